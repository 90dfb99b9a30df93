"""`kvgate verify` of a sweep's folder (reports/sweep-<run>/, written by `kvgate sweep`).

Beyond its hash, seal and signature, a sweep must say only what its pairs give: each point's
gains are re-derived from the per-pair figures it states, under the decision rule it states,
and its break-even and proof-from sizes from its points; every evidence file it lists is found
in its run's folder beside it (../<run>/evidence/…) with the SHA-256 it names. A sweep edited
and rehashed (a gain raised, a size moved) is named, signed or not.
"""

from __future__ import annotations

from pathlib import Path

from ..core.configuration import G3Limits
from ..core.verdicts import json_digest
from ..inference import break_even, proof_from, sweep_figure
from ..model import sweep_forecast
from ..store import sha256_file
from .citing import read_json
from .layout import SWEEP_FILES, SWEEP_HTML, SWEEP_JSON
from .sealing import check_seal
from .sweep_page import SWEEP_HASH_KEY, SweepRecord
from .trust import Verification, check_signed
from .trust import rel as _name

GAIN_FIELDS = (("g3.ttft_p50_reduction", "ttft_reduction", "baseline_ttft_p50",
                "candidate_ttft_p50"),
               ("g3.throughput_gain", "throughput_gain", "baseline_throughput",
                "candidate_throughput"))


def is_sweep(folder: Path) -> bool:
    """Whether a folder is one `kvgate sweep` wrote (it holds any of its files)."""
    return any((folder / name).exists() or (folder / name).is_symlink()
               for name in SWEEP_FILES)


def sweep_digest(body: dict) -> str:
    """SHA-256 of sweep.json without its own hash field (sorted keys, as written)."""
    return json_digest(body, (SWEEP_HASH_KEY,))


def _points(r: SweepRecord) -> list[str]:
    out = []
    for p in r.points:
        if p.error:
            continue
        limits = G3Limits(ttft_p50_reduction_min=p.ttft_reduction.limit,  # type: ignore[union-attr]
                          throughput_gain_min=p.throughput_gain.limit)  # type: ignore[union-attr]
        for id, field, base, cand in GAIN_FIELDS:
            try:
                again = sweep_figure(id, getattr(p, base), getattr(p, cand), limits, r.decision)
            except (ValueError, AssertionError) as exc:
                out.append(f"its point at {p.working_set:,} B gives no {field} ({exc})")
                continue
            if again != getattr(p, field):
                out.append(f"its point at {p.working_set:,} B states a {field} its pairs do "
                           "not give")
    return out


def sweep_findings(body: dict) -> list[str]:
    """What a sweep.json states that its own figures do not give."""
    try:
        r = SweepRecord.model_validate({k: v for k, v in body.items() if k != SWEEP_HASH_KEY})
    except ValueError as exc:
        return [f"not a kvgate sweep ({str(exc).splitlines()[0]})"]
    out = _points(r)
    if r.forecast and r.forecast.points != sweep_forecast(
            [p.working_set for p in r.forecast.points], r.forecast.memories,
            (r.forecast.baseline_bps, ""), (r.forecast.candidate_bps, "")).points:
        out.append("its KV-model forecast is not what the model gives for the bandwidths and "
                   "tiers it states")
    for what, stated, found in (("break-even", r.break_even, break_even(r.points)),
                                ("proof-from", r.proof_from, proof_from(r.points))):
        if stated != (found.working_set if found else None):
            out.append(f"it states a {what} size of {stated}, its points give "
                       f"{found.working_set if found else None}")
    return out


def _evidence(body: dict, folder: Path, root: Path) -> list[str]:
    run = folder.parent / str(body.get("run_id", ""))
    listed = body.get("evidence") or {}
    if listed and not run.is_dir():
        return [f"{_name(folder / SWEEP_JSON, root)}: its run's folder {run.name}/ is not "
                "beside it (its evidence cannot be checked)"]
    out = []
    for path, digest in sorted(listed.items()):
        file = run / path
        if not file.is_file() or file.is_symlink():
            out.append(f"{_name(file, root)}: missing (evidence of the sweep)")
        elif sha256_file(file) != digest:
            out.append(f"{_name(file, root)}: altered (the sweep lists {str(digest)[:16]}…)")
    return out


def check_sweep(folder: Path, root: Path) -> Verification:
    """Files checked, problems and signer of one sweep folder, names relative to root."""
    path, html = folder / SWEEP_JSON, folder / SWEEP_HTML
    if not path.is_file() or path.is_symlink():
        return Verification([], [f"{_name(path, root)}: missing (a sweep folder holds its "
                                 "sweep.json, sweep.html and, when signed, its .sig)"])
    body, problem = read_json(path, root)
    if body is None:
        return Verification([_name(path, root)], [problem])
    me = _name(path, root)
    problems = [] if sweep_digest(body) == body.get(SWEEP_HASH_KEY) else [
        f"{me}: the sweep was altered (its SHA-256 no longer matches "
        f"{str(body.get(SWEEP_HASH_KEY))[:16]}…)"]
    problems += [f"{me}: {p}" for p in sweep_findings(body)] + _evidence(body, folder, root)
    if not html.is_file() or html.is_symlink():
        problems.append(f"{_name(html, root)}: missing (the page of {me})")
    elif seal := check_seal(html.read_text(encoding="utf-8", errors="replace")):
        problems.append(f"{_name(html, root)}: {seal}")
    problems += [f"{_name(p, root)}: unlisted (in the sweep folder, but not a file kvgate "
                 "sweep writes there)" for p in sorted(folder.iterdir())
                 if p.name not in SWEEP_FILES or p.is_dir() or p.is_symlink()]
    found = Verification([me, _name(html, root)], problems)
    sig_problems, signer = check_signed(path, sweep_digest(body), root)
    found.problems += sig_problems
    found.signers[me] = signer
    return found
