"""What makes a probe read the storage, and what says it did: the page cache, /proc/PID/io.

Before a probe, once the directory has held still (gates.inference.kv_files), every file in
the arm's KV directory is fsynced and dropped from the page cache
(posix_fadvise DONTNEED: no root needed, and only files kvgate's own KV directory holds are
touched), so a restore must read the device. DONTNEED is advice (mapped, locked or busy pages
stay; tmpfs keeps every page), so each file's resident bytes are measured (mincore, in
residency) before and after: the result says what stayed, and only a drop that left (almost)
nothing counts (gates.proof.CacheDrop). An engine reads its KV files in whichever of its
processes runs the model (vLLM: a VLLM::Worker child of the API server), so the storage reads
are summed over the server's process tree, pid by pid, from /proc/PID/io read_bytes.
"""

from __future__ import annotations

import os
from pathlib import Path

import psutil

from ..proof import CacheDrop
from .kv_files import QUIET_POLLS, WRITE_QUIET_S, file_sha256, wait_until_settled
from .residency import resident_bytes


def drop_page_cache(kv_dir: Path, stored: dict[str, str] | None = None,
                    quiet: float = WRITE_QUIET_S) -> CacheDrop:
    """Wait for the engine's writes to settle, then fsync and DONTNEED every KV file, measuring
    each file's resident bytes before (ahead of the hash's own reads) and after the drop.

    ``stored`` is filled with each file's SHA-256 first (relative path -> digest), read from
    the page cache the engine's writes left, for gates.inference.read_back after the probe.
    ``quiet``: the arm's write_quiet; two looks a QUIET_POLLS-th of it apart must agree.
    """
    interval = quiet / QUIET_POLLS
    # PhaseError naming the directory if it never holds still
    settled = wait_until_settled(kv_dir, interval=interval)
    names = sorted(name for name, (_, _, regular) in settled.listing.items() if regular)
    total = vanished = before = after = 0
    unmeasured: list[str] = []
    for name in names:
        try:
            fd = os.open(kv_dir / name, os.O_RDONLY)
        except FileNotFoundError:
            # The engine renamed or removed it after the directory settled: under a new name
            # its pages were neither dropped nor measured.
            vanished += 1
            unmeasured.append(f"{name}: vanished before it could be dropped")
            continue
        try:
            was = _resident(fd, name, unmeasured)
            if stored is not None:
                stored[name] = file_sha256(fd, name)
            os.fsync(fd)  # dirty pages are not dropped: write them out first
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            if was is not None:  # else it is named in unmeasured already
                before += was
                after += _resident(fd, name, unmeasured) or 0
            total += os.fstat(fd).st_size
        finally:
            os.close(fd)
    gone = f", {vanished} more vanished before they could be dropped" if vanished else ""
    how = (f"posix_fadvise(DONTNEED) after fsync on {len(names) - vanished} KV files "
           f"({total / 1e6:.1f} MB) in {kv_dir}{gone}, once the directory had held still "
           f"for {interval:.3g} s (waited {settled.seconds:g} s)")
    return CacheDrop(how=how, files=len(names) - vanished, bytes=total, resident_before=before,
                     resident_after=after, unmeasured=unmeasured)


def _resident(fd: int, name: str, unmeasured: list[str]) -> int | None:
    """The file's resident bytes, or None with why added to ``unmeasured``."""
    try:
        return resident_bytes(fd)
    except OSError as exc:  # a file that cannot be mapped (FUSE without mmap, ...)
        unmeasured.append(f"{name}: {exc.strerror or exc} (errno {exc.errno})")
        return None


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
