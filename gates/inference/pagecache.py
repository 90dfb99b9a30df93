"""What makes a probe read the storage, and what says it did: the page cache, /proc/PID/io.

Before a probe, once the directory has held still (gates.inference.kv_files), the KV
directory's filesystem is synced and every file in the arm's KV directory is dropped from the
page cache (posix_fadvise DONTNEED: no root needed, and only files kvgate's own KV directory
holds are touched), so a restore must read the device. An engine reads its KV files in
whichever of its processes runs the model (vLLM: a VLLM::Worker child of the API server), so
the storage reads are summed over the server's process tree, pid by pid, from /proc/PID/io
read_bytes.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import psutil

from .kv_files import SETTLE_INTERVAL_S, file_sha256, wait_until_settled


def _libc_syncfs():
    try:
        return ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):  # not Linux (or no glibc): each file is fsynced instead
        return None


_SYNCFS = _libc_syncfs()


def sync_filesystem(kv_dir: Path) -> bool:
    """syncfs(2) on the filesystem that holds kv_dir: its dirty pages written out, waited for.

    One call instead of an fsync per file: an fsync also commits the file's metadata to the
    journal, and 2,176 freshly written 16 KiB files took 0.9-1.1 s that way on this project's
    VM against 0.08 s for one syncfs. False when syncfs is missing or fails (errno kept out:
    the caller falls back to fsync, which raises what it must)."""
    if _SYNCFS is None:
        return False
    fd = os.open(kv_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return _SYNCFS(fd) == 0
    finally:
        os.close(fd)


def drop_page_cache(kv_dir: Path, stored: dict[str, str] | None = None) -> str:
    """Wait for the engine's writes to settle, write out their dirty pages, then DONTNEED
    every KV file (dirty pages are not dropped, so they are written out first).

    ``stored`` is filled with each file's SHA-256 first (relative path -> digest), read from
    the page cache the engine's writes left, for gates.inference.read_back after the probe.
    """
    settled = wait_until_settled(kv_dir)  # PhaseError naming the directory if it never does
    names = sorted(name for name, (_, _, regular) in settled.listing.items() if regular)
    if stored is not None:
        _each(kv_dir, names, lambda name, fd: stored.__setitem__(name, file_sha256(fd)))
    synced = sync_filesystem(kv_dir)
    sizes: dict[str, int] = {}

    def drop(name: str, fd: int) -> None:
        if not synced:
            os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        sizes[name] = os.fstat(fd).st_size
    vanished = len(names) - _each(kv_dir, names, drop)
    how = "syncfs of its filesystem" if synced else "fsync"
    gone = f", {vanished} more vanished before they could be dropped" if vanished else ""
    return (f"posix_fadvise(DONTNEED) after {how} on {len(sizes)} KV files "
            f"({sum(sizes.values()) / 1e6:.1f} MB) in {kv_dir}{gone}, once the directory had "
            f"held still for {SETTLE_INTERVAL_S:g} s (waited {settled.seconds:g} s)")


def _each(kv_dir: Path, names: list[str], act) -> int:
    """act(name, fd) on every file still there; how many were (the engine may rename or
    remove a file after the directory settled)."""
    done = 0
    for name in names:
        try:
            fd = os.open(kv_dir / name, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            act(name, fd)
            done += 1
        finally:
            os.close(fd)
    return done


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
