"""What `kvgate verify` was given: a run folder, a gate JSON or a bundle, or none of them.

A path that does not exist, or a folder into which kvgate wrote no record, report or summary,
is bad input (exit 2), not tampering: a mistyped path, or the folder of a run killed before its
first gate finished, has nothing to verify, and ALTERED would send the reader looking for
someone who changed files. A folder that holds any file kvgate writes there is a run folder,
and every file missing from it is named as ALTERED, as before.
"""

from __future__ import annotations

from pathlib import Path

from ..store import DB_NAME, MANIFEST
from .layout import COMPARISON_FILES, EVIDENCE, KNOWN, SWEEP_FILES

ARCHIVES = (".tar.gz", ".tgz", ".tar")
GIVE = ("give a run folder (reports/<run-id>), one gate JSON, a bundle (.bundle.tar.gz), a "
        "comparison's folder (reports/compare-…) or a sweep's (reports/sweep-…)")


class NotVerifiable(ValueError):
    """verify was given no run folder, gate JSON or bundle; the message says what it was."""


def _kvgate_wrote(folder: Path) -> bool:
    return (folder / MANIFEST).is_file() or any(
        (folder / name).is_file() or (folder / name).is_symlink()
        for name in KNOWN | set(COMPARISON_FILES) | set(SWEEP_FILES))


def _why_not(folder: Path) -> str:
    if (folder / DB_NAME).is_file():
        return ("it is the reports folder (it holds the store): give one run's folder in it, "
                "reports/<run-id>, or that run's bundle")
    if any(folder.glob("*/g[1-4].json")):
        return (f"it holds run folders, but no {MANIFEST}: an extracted bundle is checked whole "
                "only with its manifest; verify the bundle file, or one run folder in it")
    if (folder / EVIDENCE).is_dir():
        return ("a run stopped before its first gate finished (killed?), or one still running, "
                "leaves only evidence/ behind: there is nothing to verify until a gate writes "
                "its record (`kvgate soak status` tells whether a soak still runs)")
    return GIVE


def check_given(path: Path) -> None:
    """Raise NotVerifiable unless path is something verify can check (exists, and is kvgate's)."""
    if not path.exists() and not path.is_symlink():
        raise NotVerifiable(f"{path}: no such file or folder: {GIVE}")
    if path.is_dir():
        if not _kvgate_wrote(path):
            raise NotVerifiable(f"{path}: no gate record, report or summary here, so it is no "
                                f"run folder: {_why_not(path)}")
    elif not (path.name.endswith(ARCHIVES) or path.suffix == ".json"):
        raise NotVerifiable(f"{path}: neither a gate JSON nor a bundle: {GIVE}")
