"""One gate record's file checked as `kvgate verify` checks it, for verify and for the files
that cite records (a comparison): its own digest, the evidence it lists, its signature (which
covers its decision rule) and the report bound to it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..core.verdicts import json_digest
from ..store import sha256_file
from .citing import read_json
from .trust import Verification, check_signed
from .trust import rel as _name

EXTRA_KEYS = ("decision_rule", "record_sha256")  # written beside the record, not hashed


def record_digest(body: dict) -> str:
    """SHA-256 of a gate JSON's record part, exactly as GateRecord.sha256() computed it."""
    return json_digest(body, EXTRA_KEYS)


def check_record(path: Path, root: Path | None = None) -> list[str]:
    """What is wrong with one gate JSON and the evidence it lists ([] when intact)."""
    body, problem = read_json(path, root)
    if body is None:
        return [problem]
    me = _name(path, root)
    problems = []
    if record_digest(body) != body.get("record_sha256"):
        problems.append(f"{me}: the record was altered (its SHA-256 no longer matches "
                        f"{str(body.get('record_sha256'))[:16]}…)")
    for name, digest in sorted((body.get("evidence") or {}).items()):
        file = path.parent / name
        shown = _name(file, root) if root else name
        if not file.is_file() or file.is_symlink():
            problems.append(f"{shown}: missing (listed in {me})")
        elif (actual := sha256_file(file)) != digest:
            problems.append(f"{shown}: altered (SHA-256 {actual[:16]}… but {me} recorded "
                            f"{digest[:16]}…)")
    return problems


def check_cited_records(paths: Iterable[Path], root: Path) -> Verification:
    """Every cited record file that is there, checked whole: digest, evidence, signature.

    Whether each is there and hashes as cited is citing.cited's (or the caller's) to say.
    """
    found = Verification()
    for path in sorted(set(paths)):
        body, _ = read_json(path, root)
        if body is None:
            continue  # named by the caller, which knows who cites it
        found.files.append(_name(path, root))
        found.problems += check_record(path, root)
        problems, signer = check_signed(path, record_digest(body), root,
                                        body.get("decision_rule"))
        found.problems += problems
        found.signers[_name(path, root)] = signer
    return found
