"""What a run folder holds: the files kvgate writes at its top level, and what each implies.

A gate JSON implies its report and the report's seal file; summary.json implies summary.html.
Every other file at the top level, or below it outside evidence/, is one kvgate never writes
there, and verify names it (evidence/ itself is checked against the records' manifests).
"""

from __future__ import annotations

import re
from pathlib import Path

from ..store import COMPARISON_JSON, SWEEP_JSON
from .trust import rel as _name

_RECORD_NAME = re.compile(r"g[1-4]\.json")
EVIDENCE = "evidence"
# What kvgate writes at a run folder's top level besides evidence/: per gate, its record, the
# record's signature, the report and the report's seal file; and the summary's three files.
GATE_FILES = ("{gate}.json", "{gate}.json.sig", "{gate}.html", "{gate}.html.seal")
SUMMARY_FILES = ("summary.json", "summary.json.sig", "summary.html")
KNOWN = {f.format(gate=f"g{n}") for f in GATE_FILES for n in range(1, 5)} | set(SUMMARY_FILES)
# What `kvgate compare` writes into its own folder (compare-<when>-<runs>/ in the reports folder).
COMPARISON_HTML = "comparison.html"
COMPARISON_FILES = (COMPARISON_JSON, COMPARISON_JSON + ".sig", COMPARISON_HTML)
# What `kvgate sweep` writes into its own folder (sweep-<run>/ in the reports folder).
SWEEP_HTML = "sweep.html"
SWEEP_FILES = (SWEEP_JSON, SWEEP_JSON + ".sig", SWEEP_HTML)


def _absent(path: Path) -> bool:
    # A symbolic link is never a file kvgate wrote: it counts as missing, as evidence does.
    return not path.is_file() or path.is_symlink()


def implied(record: Path, root: Path | None = None) -> list[tuple[Path, str]]:
    """(file, why it must be there) for the reports a gate JSON or summary.json implies."""
    me = _name(record, root)
    if record.name == "summary.json":
        return [(record.with_name("summary.html"), f"the report of {me}")]
    if not _RECORD_NAME.fullmatch(record.name):
        return []
    html = record.with_suffix(".html")
    return [(html, f"the report of {me}"),
            (html.with_name(html.name + ".seal"), f"the seal file of {_name(html, root)}, "
             f"written with {me}")]


def check_implied(records: list[Path], root: Path | None) -> tuple[list[str], set[Path]]:
    """(problems, files missing): each report a record implies must be there (and sealed).

    That each present report's seal matches its content is check_report_seal's part.
    """
    problems, missing = [], set()
    for record in records:
        for file, why in implied(record, root):
            if _absent(file):
                missing.add(file)
                problems.append(f"{_name(file, root)}: missing ({why})")
    return problems, missing


def check_orphans(folder: Path, root: Path | None) -> list[str]:
    """Reports and seal files whose record is gone (a .sig's is named by stray_signatures)."""
    problems = []
    for name in sorted(KNOWN):
        file = folder / name
        if not (file.is_file() or file.is_symlink()) or name.endswith(".json.sig"):
            continue
        owner = "summary.json" if name.startswith("summary") else f"{name[:2]}.json"
        if name.endswith(".json") or (folder / owner).is_file():
            continue
        kind = "seal file" if name.endswith(".seal") else "report"
        problems.append(f"{_name(file, root)}: a {kind} without {owner} beside it (its record "
                        "was removed, or it was added)")
    return problems


def check_unlisted_top(folder: Path, root: Path | None) -> list[str]:
    """Files in a run folder outside evidence/ that kvgate does not write there."""
    found = []
    for entry in sorted(folder.iterdir()):
        if entry.name == EVIDENCE and entry.is_dir() and not entry.is_symlink():
            continue
        if entry.name in KNOWN and not entry.is_dir():
            continue  # a known name: checked as a record, report, seal or signature
        if entry.is_dir() and not entry.is_symlink():
            inside = sorted(p for p in entry.rglob("*") if p.is_file() or p.is_symlink())
            found += inside or [entry]
        else:
            found.append(entry)
    return [f"{_name(p, root)}: unlisted (in the run folder, but not a record, report, seal "
            "file, signature or evidence file kvgate writes there)" for p in found]
