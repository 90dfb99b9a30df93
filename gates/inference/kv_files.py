"""The files in a KV directory, looked at while the engine may still be writing them.

Connectors write their KV asynchronously, under a temporary name they then rename (kvgate's
simulator tier; LMCache's local-disk backend and vLLM's offloading connector write from worker
threads), so a walk can list a file that is renamed or removed before it is opened. Every walk
here tolerates that, and `wait_until_settled` waits — whatever the engine's counters say —
until the directory's file set, sizes and times hold still across two looks.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from ..core.configuration import Arm
from .errors import PhaseError
from .kv_dir import MARKER

# relative path -> (size, mtime_ns, regular file?) of every non-directory entry
Listing = dict[str, tuple[int, int, bool]]

# The write counters are polled, and the directory looked at, this many times per quiet time
# (an arm's write_quiet): the counters must agree across QUIET_POLLS polls, two looks a
# QUIET_POLLS-th of it apart must agree.
QUIET_POLLS = 3
WRITE_QUIET_S: float = Arm.model_fields["write_quiet"].default  # said once, on the Arm
SETTLE_INTERVAL_S = WRITE_QUIET_S / QUIET_POLLS
SETTLE_TIMEOUT_S = 120.0  # as long as the counters' settle may wait


def _unlisted(exc: OSError) -> None:
    """os.walk's onerror: a directory removed before it was listed is left out like a file that
    vanished; one kvgate may not list (EACCES: an engine's 0700 folder) is an error, since the
    page-cache drop, the read-back and the bytes stored would pass over the files in it."""
    if isinstance(exc, FileNotFoundError):
        return
    raise PhaseError(f"kvgate cannot list {exc.filename}: {exc.strerror} "
                     f"({errno.errorcode.get(exc.errno or 0, 'no errno')}); it must see every KV "
                     "file to drop it from the page cache and read it back: run kvgate as the "
                     "engine's user or as root")


def look(kv_dir: Path) -> Listing:
    """Every file under kv_dir but kvgate's marker; what vanished mid-walk is left out, a folder
    that cannot be listed is a PhaseError naming it."""
    seen: Listing = {}
    for dirpath, dirnames, filenames in os.walk(kv_dir, onerror=_unlisted):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            if name == MARKER:
                continue
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue  # renamed or removed between the listing and now
            seen[os.path.relpath(path, kv_dir)] = (st.st_size, st.st_mtime_ns,
                                                   stat.S_ISREG(st.st_mode))
    return seen


class Settled(BaseModel):
    """A directory that held still: how long kvgate waited and what it held."""

    seconds: float
    files: int
    bytes: int
    listing: Listing = {}  # the last look, which the caller acts on (not looked at again)


def wait_until_settled(kv_dir: Path, *, interval: float = SETTLE_INTERVAL_S,
                       timeout: float = SETTLE_TIMEOUT_S,
                       clock: Callable[[], float] = time.monotonic,
                       sleep: Callable[[float], None] = time.sleep) -> Settled:
    """Look until two looks ``interval`` apart agree; PhaseError after ``timeout`` seconds."""
    start, before = clock(), look(kv_dir)
    while True:
        sleep(interval)
        now = look(kv_dir)
        if now == before:
            return Settled(seconds=round(clock() - start, 3), files=len(now),
                           bytes=sum(size for size, _, _ in now.values()), listing=now)
        if clock() - start >= timeout:
            raise PhaseError(
                f"KV directory {kv_dir} did not hold still within {timeout:g} s: between the "
                f"last two looks, {interval:g} s apart, {changes(before, now)}. kvgate waits for "
                "the engine's KV writes to finish before it drops the page cache and probes; "
                "see the engine's log for writes that never end, and check that nothing else "
                "writes into it (kvgate empties it before every run)")
        before = now


def changes(before: Listing, now: Listing) -> str:
    """What changed between two looks, counted, with one example of each kind."""
    kinds = [("appeared", sorted(now.keys() - before.keys())),
             ("vanished", sorted(before.keys() - now.keys())),
             ("changed size or time", sorted(k for k in now.keys() & before.keys()
                                             if now[k] != before[k]))]
    return ", ".join(f"{len(names)} file{'' if len(names) == 1 else 's'} {kind} ({names[0]})"
                     for kind, names in kinds if names)


def stored_bytes(kv_dir: Path) -> int:
    """Bytes of the files under a KV directory (kvgate's own marker left out)."""
    return sum(size for size, _, _ in look(kv_dir).values())


class KvReadBack(BaseModel):
    """The KV files' bytes as stored (hashed when the seed had settled, just before the page
    cache drop) against the same files read back after the probe: an exact signal, beside the
    outputs, that what the engine restored is what it stored. Files the engine removed in
    between (an LRU tier) are counted, not compared; new files (the probe's own) are not in it.
    """

    files: int = 0  # compared
    bytes: int = 0
    changed: list[str] = []  # relative paths whose SHA-256 differ
    vanished: int = 0
    gone: list[str] = []  # the vanished files' relative paths (empty in records before #43)


def file_sha256(fd: int, name: str = "") -> str:
    """SHA-256 of an open file from its start (os.pread: the descriptor's offset untouched);
    PhaseError naming the file, the offset and the errno when the storage refuses a read."""
    digest, offset = hashlib.sha256(), 0
    try:
        while chunk := os.pread(fd, 1 << 20, offset):
            digest.update(chunk)
            offset += len(chunk)
    except OSError as e:
        code = errno.errorcode.get(e.errno or 0, "no errno")
        raise PhaseError(f"the storage refused kvgate's own read of KV file {name or fd} at "
                         f"offset {offset:,}: {code} ({e.errno}), {e.strerror}") from None
    return digest.hexdigest()


def read_back(kv_dir: Path, stored: dict[str, str]) -> KvReadBack:
    """Hash again every file of ``stored`` (relative path -> SHA-256) and name what changed."""
    found = KvReadBack()
    for name, digest in sorted(stored.items()):
        try:
            fd = os.open(kv_dir / name, os.O_RDONLY)
        except FileNotFoundError:
            found.vanished += 1
            found.gone.append(name)
            continue
        try:
            found.bytes += os.fstat(fd).st_size
            now = file_sha256(fd, name)
        finally:
            os.close(fd)
        found.files += 1
        if now != digest:
            found.changed.append(name)
    return found
