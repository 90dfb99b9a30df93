"""A candidate's working-set sweep in a comparison: its break-even size, cited by its hash.

`kvgate compare --sweep SWEEP=ARRAY` names the sweep (reports/sweep-<run>/) that measured an
array's tier; the comparison states its break-even and proof-from sizes and the SHA-256 of its
sweep.json, refuses a sweep whose hash no longer matches, and `kvgate verify` of the
comparison finds the sweep beside it as cited.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from .citing import read_json
from .comparison_model import CitedSweep, Column, CompareError
from .layout import SWEEP_JSON
from .sweep_check import sweep_digest
from .sweep_page import SWEEP_HASH_KEY, SweepRecord


def sweep_folder(name: str) -> str:
    """A sweep's folder name from its run id or its folder name."""
    return name if name.startswith("sweep-") else f"sweep-{name}"


def _read(path: Path) -> tuple[CitedSweep | None, str]:
    body, problem = read_json(path)
    if body is None:
        return None, problem
    digest = sweep_digest(body)
    if digest != body.get(SWEEP_HASH_KEY):
        return None, (f"{path}: the sweep was altered (its SHA-256 no longer matches "
                      f"{str(body.get(SWEEP_HASH_KEY))[:16]}…): `kvgate verify` it")
    try:
        r = SweepRecord.model_validate({k: v for k, v in body.items() if k != SWEEP_HASH_KEY})
    except ValueError as exc:
        return None, f"{path}: not a kvgate sweep ({str(exc).splitlines()[0]})"
    return CitedSweep(id=path.parent.name, sweep_sha256=digest, break_even=r.break_even,
                      proof_from=r.proof_from, engine=r.engine, simulated=r.simulated), ""


def with_sweeps(columns: Sequence[Column], out_dir: Path,
                sweeps: Mapping[str, str]) -> list[Column]:
    """The columns, each with the sweep named for its array (array -> sweep); CompareError
    for a sweep that is not there, altered, or named for no candidate."""
    arrays = [c.array for c in columns]
    for array in sweeps:
        if array not in arrays:
            raise CompareError(f"--sweep names the array {array!r}, which is none of the "
                               f"candidates ({', '.join(arrays)})")
    out = []
    for col in columns:
        if col.array not in sweeps:
            out.append(col)
            continue
        cited, problem = _read(Path(out_dir) / sweep_folder(sweeps[col.array]) / SWEEP_JSON)
        if cited is None:
            raise CompareError(f"the sweep named for {col.array}: {problem}")
        out.append(col.model_copy(update={"sweep": cited}))
    return out


def sweep_problems(folder: Path, col: Column) -> list[str]:
    """What `kvgate verify` finds wrong with the sweep a comparison's column cites."""
    if col.sweep is None:
        return []
    found, problem = _read(folder.parent / col.sweep.id / SWEEP_JSON)
    if found is None:
        return [f"{col.array}: the sweep it cites: {problem}"]
    if found != col.sweep:
        return [f"{col.array}: it states its sweep {col.sweep.id} as it is not (break-even, "
                "proof-from, engine or SHA-256 differ)"]
    return []
