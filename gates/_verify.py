"""`kvgate verify`: re-check a run's records, evidence hashes and the chain between gates."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ._store import sha256_file

EXTRA_KEYS = ("decision_rule", "record_sha256")  # written beside the record, not hashed


def record_digest(body: dict) -> str:
    """SHA-256 of a gate JSON's record part, exactly as GateRecord.sha256() computed it."""
    record = {k: v for k, v in body.items() if k not in EXTRA_KEYS}
    return hashlib.sha256(json.dumps(record, sort_keys=True, indent=2).encode()).hexdigest()


def _read(path: Path) -> tuple[dict | None, str]:
    try:
        return json.loads(path.read_text()), ""
    except (OSError, ValueError) as exc:
        return None, f"{path.name}: unreadable ({exc})"


def check_record(path: Path) -> list[str]:
    """What is wrong with one gate JSON and the evidence it lists ([] when intact)."""
    body, problem = _read(path)
    if body is None:
        return [problem]
    problems = []
    if record_digest(body) != body.get("record_sha256"):
        problems.append(f"{path.name}: the record was altered (its SHA-256 no longer matches "
                        f"{str(body.get('record_sha256'))[:16]}…)")
    for name, digest in sorted(body.get("evidence", {}).items()):
        file = path.parent / name
        if not file.is_file():
            problems.append(f"{name}: missing (listed in {path.name})")
        elif sha256_file(file) != digest:
            problems.append(f"{name}: altered (SHA-256 {sha256_file(file)[:16]}… but "
                            f"{path.name} recorded {digest[:16]}…)")
    return problems


def check_chain(path: Path) -> list[str]:
    """The upstream record a gate cites must exist beside this run and hash as cited."""
    body, _ = _read(path)
    upstream = (body or {}).get("upstream")
    if not upstream:
        return []
    cited = path.parent.parent / upstream["run_id"] / f"{upstream['gate']}.json"
    found, problem = _read(cited)
    if found is None:
        return [f"{path.name}: cites {upstream['gate']} of run {upstream['run_id']}, which is "
                f"not here ({problem or cited})"]
    if found.get("record_sha256") != upstream["record_sha256"]:
        return [f"{path.name}: the {upstream['gate']} record it stands on "
                f"({upstream['run_id']}) is not the one it cited"]
    return []


def verify(path: Path) -> tuple[list[str], list[str]]:
    """(files checked, problems) for a run folder or one gate JSON."""
    files = [path] if path.is_file() else sorted(path.glob("g[1-4].json"))
    problems = [p for f in files for p in check_record(f) + check_chain(f)]
    if not files:
        problems.append(f"{path}: no gate record (g1.json … g4.json) here")
    return [f.name for f in files], problems
