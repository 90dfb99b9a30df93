"""Records a file cites by (gate, run, SHA-256), found beside it in the reports folder.

A summary (reports/<run>/summary.json), a gate record citing the gate below, and a comparison
(reports/compare-…/comparison.json) all name records by run id: each is looked for at
reports/<run_id>/<gate>.json, and must hash as cited.
"""

from __future__ import annotations

from pathlib import Path

from .signing import DuplicateKey, strict_json
from .trust import rel as _name


def read_json(path: Path, root: Path | None = None) -> tuple[dict | None, str]:
    """(a JSON object written by kvgate, "") or (None, why it cannot be read), named as verify
    names files (relative to root)."""
    try:
        body = strict_json(path.read_text())
    except DuplicateKey as exc:
        return None, f"{_name(path, root)}: refused: {exc}"
    except (OSError, ValueError) as exc:
        return None, f"{_name(path, root)}: unreadable ({exc})"
    if not isinstance(body, dict):
        return None, f"{_name(path, root)}: not a JSON object"
    return body, ""


def _elsewhere(runs: Path, gate: str, run_id: str) -> str:
    """Where a cited run's record is when its folder was renamed, or where it was looked for."""
    try:
        folders = sorted(p for p in runs.iterdir() if p.is_dir() and p.name != run_id)
    except OSError:
        folders = []
    for folder in folders:
        body, _ = read_json(folder / f"{gate}.json", None)
        if body is not None and body.get("run_id") == run_id:
            return (f"folder {folder.name}/ holds run {run_id}'s {gate} record under another "
                    f"name: a run is found by its id, so rename the folder back to {run_id}")
    return (f"no folder {run_id}/ beside this run: verify the bundle `kvgate bundle` wrote, or "
            f"the reports folder that holds every run of the chain")


def cited(path: Path, root: Path | None, gate: str, run_id: str, digest: str) -> list[str]:
    """A record cited by (gate, run, hash) must sit beside the citing run and hash as cited."""
    me = _name(path, root)
    if not run_id or Path(run_id).name != run_id or run_id in (".", ".."):
        return [f"{me}: cites {gate} of run {run_id!r}, which is not a run id"]
    cited = path.parent.parent / run_id / f"{gate}.json"
    found, problem = read_json(cited, root) if cited.exists() else (None, "")
    if found is None:
        return [f"{me}: cites {gate} of run {run_id}, which is not here ("
                f"{problem or _elsewhere(path.parent.parent, gate, run_id)})"]
    if found.get("record_sha256") != digest:
        return [f"{me}: the {gate} record it stands on ({run_id}) is not the one it cited"]
    return []
