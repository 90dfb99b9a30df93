"""Who holds the store: the processes with a lock on its files, from the kernel's lock table.

SQLite says "database is locked" and not by whom. Linux lists every fcntl lock in /proc/locks
(proc(5): "id: POSIX ADVISORY WRITE <pid> <major>:<minor>:<inode> <start> <end>", device
numbers in hex); SQLite's unix VFS takes its locks on the database file and, in WAL mode, on
its -shm file (sqlite.org/lockingv3.html, sqlite.org/wal.html). A process holding a write lock
on either is the holder; kvgate's own process (waiting, or reading) is not.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..core.text import shown

LOCKS = Path("/proc/locks")


def _ids(path: Path) -> set[tuple[str, int]]:
    ids = set()
    for suffix in ("", "-wal", "-shm"):
        try:
            st = os.stat(f"{path}{suffix}")
        except OSError:
            continue
        ids.add((f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}", st.st_ino))
    return ids


def holders(path: Path, locks: Path = LOCKS) -> list[int]:
    """Pids of the other processes with a lock on the store's files (write locks first)."""
    try:
        lines = locks.read_text().splitlines()
    except OSError:
        return []  # not Linux, or no /proc: the holder goes unnamed
    ids, found = _ids(path), {}
    for line in lines:
        words = line.replace("->", "").split()
        if len(words) < 6 or not words[4].isdigit():
            continue
        device, _, inode = words[5].rpartition(":")
        if (device, int(inode) if inode.isdigit() else -1) in ids and int(words[4]) != \
                os.getpid():
            found[int(words[4])] = found.get(int(words[4])) or words[3] == "WRITE"
    return sorted(found, key=lambda pid: (not found[pid], pid))


def _command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return shown(" ".join(raw.decode(errors="replace").split("\0")).strip())[:120]


def holders_said(path: Path) -> str:
    """'held by pid 1234 (kvgate run g3 …)', or "" when no other process is seen holding it."""
    pids = holders(path)
    if not pids:
        return ""
    return "held by " + ", ".join(f"pid {pid}" + (f" ({cmd})" if (cmd := _command(pid)) else "")
                                  for pid in pids[:3])
