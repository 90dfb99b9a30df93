"""What makes a probe read the storage, and what says it did: the page cache, /proc/PID/io.

Before a probe every file in the arm's KV directory is fsynced and dropped from the page cache
(posix_fadvise DONTNEED: no root needed, and only files kvgate's own KV directory holds are
touched), so a restore must read the device. An engine reads its KV files in whichever of its
processes runs the model (vLLM: a VLLM::Worker child of the API server), so the storage reads
are summed over the server's process tree, pid by pid, from /proc/PID/io read_bytes.
"""

from __future__ import annotations

import os
from pathlib import Path

import psutil

from .kv_dir import MARKER


def drop_page_cache(kv_dir: Path) -> str:
    """fsync and posix_fadvise(DONTNEED) every file under kv_dir; says what was done."""
    files = sorted(p for p in kv_dir.rglob("*") if p.is_file() and not p.is_symlink()
                   and p.name != MARKER)
    total = 0
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)  # dirty pages are not dropped: write them out first
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            total += os.fstat(fd).st_size
        finally:
            os.close(fd)
    return (f"posix_fadvise(DONTNEED) after fsync on {len(files)} KV files "
            f"({total / 1e6:.1f} MB) in {kv_dir}")


def tree_read_bytes(pid: int | None) -> dict[int, int] | None:
    """read_bytes of the process and every descendant, by pid; None if pid is gone or unset."""
    if pid is None:
        return None
    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    out: dict[int, int] = {}
    for process in tree:
        try:
            out[process.pid] = process.io_counters().read_bytes
        except (psutil.NoSuchProcess, psutil.AccessDenied, AttributeError):
            continue  # a child that exited between the listing and the read
    return out if pid in out else None


def read_bytes_delta(before: dict[int, int] | None, after: dict[int, int] | None) -> int | None:
    """Bytes the tree's processes read between two snapshots (pids present in both)."""
    if before is None or after is None:
        return None
    # A pid missing from either side is a process that started or ended mid-probe: its
    # counter has no baseline, and counting it whole would credit reads from before the probe.
    return sum(max(after[p] - before[p], 0) for p in before.keys() & after.keys())
