"""KV directories (DESIGN §5): kvgate empties an arm's KV directory before every run, safely.

It refuses the root, the home directory, mount points, paths outside the allowed roots, and
any non-empty directory without the MARKER file kvgate leaves in the directories it manages.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from ..core.configuration import Arm, ArmError

MARKER = ".kvgate-kv-dir"  # kvgate empties only KV directories that carry this file


class KvDir(BaseModel):
    """What prepare_kv_dir did, for the record."""

    path: Path
    created: bool
    removed_files: int
    removed_bytes: int
    free_bytes: int


def _mount_points(mountinfo: Path = Path("/proc/self/mountinfo")) -> list[Path]:
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError:
        return []
    # Field 5 is the mount point, with space, tab, newline and backslash as octal escapes.
    return [Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4]))
            for line in lines if len(line.split()) > 4]


def _tally(entry: os.DirEntry) -> tuple[int, int]:
    """Files (symbolic links included, never followed) and bytes under one entry."""
    if not entry.is_dir(follow_symlinks=False):
        return 1, entry.stat(follow_symlinks=False).st_size
    files = nbytes = 0
    for dirpath, dirnames, filenames in os.walk(entry.path):
        paths = [os.path.join(dirpath, n) for n in filenames + dirnames]
        leaves = [p for p in paths if os.path.islink(p) or not os.path.isdir(p)]
        files, nbytes = files + len(leaves), nbytes + sum(os.lstat(p).st_size for p in leaves)
    return files, nbytes


def prepare_kv_dir(name: str, arm: Arm, allowed_roots: Path | Sequence[Path] | None,
                   mountinfo: Path = Path("/proc/self/mountinfo")) -> KvDir | None:
    """Empty the arm's KV directory (creating it if missing); None when the arm has no tier."""
    if arm.kv_dir is None:
        return None
    given = arm.kv_dir

    def refuse(why: str) -> ArmError:
        return ArmError(name, "prepare", f"refusing to empty KV directory {given}: {why} "
                        f"(site.toml [arms.{name}] kv_dir)")

    roots = [allowed_roots] if isinstance(allowed_roots, Path) else list(allowed_roots or [])
    roots += [arm.kv_root] if arm.kv_root is not None else []
    if not given.is_absolute():
        raise refuse("not an absolute path")
    real = Path(os.path.realpath(given))  # judge where a symbolic link really leads
    home = Path(os.path.realpath(Path.home()))
    mounts = _mount_points(mountinfo)
    if real == Path("/"):
        raise refuse("it is the root directory")
    if real == home or real in home.parents:
        raise refuse(f"it is or holds the home directory {home}")
    if os.path.ismount(real) or real in mounts:
        raise refuse("it is a mount point; use a directory inside the mounted filesystem")
    real_roots = [Path(os.path.realpath(r)) for r in roots]
    if not any(r in real.parents for r in real_roots):
        where = ", ".join(map(str, roots)) or "none given"
        raise refuse(f"kvgate empties only subdirectories of the allowed roots ({where})")
    created, files, nbytes = False, 0, 0
    if real.exists():
        if not real.is_dir():
            raise refuse("it is not a directory")
        inner = [m for m in mounts if real in m.parents]
        if inner:
            raise refuse(f"a filesystem is mounted inside it, at {inner[0]}")
        with os.scandir(real) as listing:
            entries = [e for e in listing if e.name != MARKER]
        if entries and not (real / MARKER).is_file():
            n = len(entries)
            raise refuse(f"it holds {n} entr{'y' if n == 1 else 'ies'} and no {MARKER} file, so "
                         "kvgate did not create it; empty or remove it once yourself and kvgate "
                         "will manage it from then on")
        try:
            for entry in entries:
                count, size = _tally(entry)
                files, nbytes = files + count, nbytes + size
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
        except OSError as exc:
            raise ArmError(name, "prepare", f"cannot empty KV directory {real}: {exc}") from None
    else:
        if given.is_symlink():
            raise refuse("it is a dangling symbolic link")
        if not real.parent.is_dir():
            raise refuse(f"its parent {real.parent} does not exist")
        created = True
    marker = real / MARKER
    try:
        real.mkdir(exist_ok=True)
        if not marker.exists():
            marker.write_text(f"KV directory of kvgate arm '{name}': emptied before every run\n")
    except OSError as exc:
        raise ArmError(name, "prepare", f"cannot create KV directory {real}: {exc}") from None
    return KvDir(path=real, created=created, removed_files=files, removed_bytes=nbytes,
                 free_bytes=shutil.disk_usage(real).free)
