"""The simulator's storage KV tier: one file per chunk under the KV directory, really read.

Files live at <kv_dir>/<model id>/<first 2 hex>/<chunk hash hex>.kv, written whole and
renamed into place, so the index rebuilt at start only ever sees complete chunks.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import mmap
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from .model import Profile
from .payload import chunk_payload, corrupt, is_corrupted

T = TypeVar("T")
ALIGN = 4096  # O_DIRECT wants buffer, offset and length aligned to the logical block size
SUFFIX = ".kv"


class Throttle:
    """Caps the bytes per second shared by all reader threads (a "slow candidate directory")."""

    def __init__(self, bytes_per_s: float | None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self.bytes_per_s = bytes_per_s
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self._free_at = 0.0

    def reserve(self, nbytes: int) -> float:
        """Book nbytes of bandwidth; returns the clock time by which the read may finish."""
        with self._lock:
            now = self._clock()
            if not self.bytes_per_s:
                return now
            self._free_at = max(now, self._free_at) + nbytes / self.bytes_per_s
            return self._free_at

    def wait_until(self, t: float) -> None:
        """Sleep the calling reader thread until clock time t."""
        delay = t - self._clock()
        if delay > 0:
            self._sleep(delay)


def _round_up(n: int, to: int = ALIGN) -> int:
    return -(-n // to) * to


def read_direct(path: Path, size: int) -> bytes:
    """Read size bytes with O_DIRECT into a page-aligned buffer (bypassing the page cache)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        with mmap.mmap(-1, _round_up(size)) as buf:  # anonymous mmap: page-aligned
            view, got = memoryview(buf), 0
            try:
                while got < size:
                    n = os.preadv(fd, [view[got:]], got)
                    if n == 0:
                        raise OSError(errno.EIO, f"short read: {got} of {size} bytes", str(path))
                    got += n
                return bytes(view[:size])
            finally:
                view.release()
    finally:
        os.close(fd)


def read_buffered(path: Path, size: int) -> bytes:
    """Read size bytes through the page cache (the fallback where O_DIRECT is refused)."""
    with open(path, "rb", buffering=0) as f:
        data = f.read(size)
    if len(data) != size:
        raise OSError(errno.EIO, f"short read: {len(data)} of {size} bytes", str(path))
    return data


def probe_direct(directory: Path) -> str:
    """Empty when O_DIRECT reads work in directory, else why not."""
    probe = directory / f".odirect-probe-{os.getpid()}"
    try:
        probe.write_bytes(b"\0" * ALIGN)
        read_direct(probe, ALIGN)
        return ""
    except (OSError, AttributeError) as exc:  # AttributeError: no os.O_DIRECT on this OS
        return f"O_DIRECT refused ({exc}); reading through the page cache instead"
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()


class KvTier:
    """Chunk files under kv_dir: parallel O_DIRECT reads, background writes, rebuilt index."""

    def __init__(self, kv_dir: Path, profile: Profile, *, readers: int | None = None,
                 direct_io: bool | None = None, read_bytes_per_s: float | None = None,
                 corrupt_fraction: float = 0.0):
        self.profile = profile
        self.root = Path(kv_dir) / profile.model_id
        self.root.mkdir(parents=True, exist_ok=True)
        self.readers = readers or profile.readers
        self.throttle = Throttle(read_bytes_per_s)
        self.corrupt_fraction = corrupt_fraction
        self.skipped_files = 0  # files in the directory that are not whole chunks of ours
        self._index = self._scan()
        why_not = probe_direct(self.root) if direct_io is not False else "buffered by request"
        if direct_io and why_not:
            raise OSError(f"O_DIRECT required but {why_not}")
        self.direct_io, self.io_note = not why_not, why_not
        self.stats = {"read_bytes": 0, "read_chunks": 0, "write_bytes": 0, "write_chunks": 0,
                      "write_errors": 0, "read_errors": 0}
        self.last_write_error = self.last_read_error = ""
        self._stats_lock = threading.Lock()
        self._read_pool = ThreadPoolExecutor(self.readers, thread_name_prefix="kv-read")
        # Writers apart from readers, so a burst of new chunks never delays a restore.
        self._write_pool = ThreadPoolExecutor(2, thread_name_prefix="kv-write")
        self._pending: dict[bytes, Future] = {}

    def _scan(self) -> set[bytes]:
        """Index the chunk files already on disk (a persistent tier survives a restart)."""
        index = set()
        for path in self.root.glob("??/*"):
            if ".tmp" in path.name:  # a write cut short by a crash: never a chunk
                path.unlink(missing_ok=True)
                continue
            try:
                h = bytes.fromhex(path.name.removesuffix(SUFFIX))
                ok = (path.suffix == SUFFIX and len(h) == 16
                      and path.stat().st_size == self.profile.chunk_bytes)
            except (ValueError, OSError):
                ok = False
            if ok:
                index.add(h)
            else:
                self.skipped_files += 1
        return index

    def path_for(self, h: bytes) -> Path:
        """Where the chunk with hash h lives."""
        name = h.hex()
        return self.root / name[:2] / (name + SUFFIX)

    def __contains__(self, h: bytes) -> bool:
        return h in self._index

    def __len__(self) -> int:
        return len(self._index)

    def _count(self, **deltas: int) -> None:
        with self._stats_lock:
            for key, value in deltas.items():
                self.stats[key] += value

    def read_chunk(self, h: bytes) -> bytes:
        """The chunk's bytes as the storage returns them (corruption fault included)."""
        size = self.profile.chunk_bytes
        done_by = self.throttle.reserve(size)
        path = self.path_for(h)
        if self.direct_io:
            try:
                data = read_direct(path, size)
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
                self.direct_io = False
                self.io_note = f"O_DIRECT read refused ({exc}); reading through the page cache"
                data = read_buffered(path, size)
        else:
            data = read_buffered(path, size)
        self.throttle.wait_until(done_by)
        self._count(read_bytes=size, read_chunks=1)
        # The fault corrupts what the storage returns; nothing here checks or hides it.
        return corrupt(data, h) if is_corrupted(h, self.corrupt_fraction) else data

    def _failed(self, kind: str, exc: BaseException) -> None:
        """Count a failed chunk read or write and say so on stderr (the arm's log), errno and
        file: the engine goes on serving, /health 200, as LMCache's fs L2 adapter does when
        every store fails (LMCache/LMCache#4386, #4364: "FSL2Adapter failed to store <path>",
        fs_l2_adapter.py, LMCache 0.5.x), and only its log and counters tell. Said at the 1st,
        2nd, 4th, 8th ... failure, so a long soak's log stays readable."""
        with self._stats_lock:
            self.stats[f"{kind}_errors"] += 1
            count = self.stats[f"{kind}_errors"]
        setattr(self, f"last_{kind}_error", str(exc))
        if count & (count - 1) == 0:
            what = ("recomputing the rest of the prompt" if kind == "read"
                    else "the chunk is not stored")
            print(f"kvgate-sim: KV chunk {kind} failed ({count} so far): {exc}; {what}",
                  file=sys.stderr, flush=True)

    def _read_or_note(self, h: bytes) -> bytes:
        try:
            return self.read_chunk(h)
        except OSError as exc:
            self._failed("read", exc)
            if isinstance(exc, FileNotFoundError):  # removed behind our back: not stored
                self._index.discard(h)
            raise

    async def read_chunks(self, hashes: list[bytes], fn: Callable[[bytes], T] = lambda b: b,
                          return_exceptions: bool = False) -> list[T]:
        """Read chunks in parallel on the reader threads; fn(bytes) runs there too."""
        loop = asyncio.get_running_loop()
        return list(await asyncio.gather(*[
            loop.run_in_executor(self._read_pool, lambda h=h: fn(self._read_or_note(h)))
            for h in hashes], return_exceptions=return_exceptions))

    def write_chunk(self, h: bytes, payload: bytes | None = None) -> None:
        """Write a chunk file whole, then rename it into place and index it."""
        payload = payload if payload is not None else chunk_payload(h, self.profile)
        path = self.path_for(h)
        path.parent.mkdir(parents=True, exist_ok=True)  # the KV dir may have been emptied
        tmp = path.with_name(f"{path.name}.tmp{os.getpid()}-{threading.get_ident()}")
        try:
            with open(tmp, "wb") as f:
                f.write(payload)
            os.replace(tmp, path)
        except OSError:
            # A failed write leaves no part-written file behind to be taken for a stored chunk.
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        self._index.add(h)
        self._count(write_bytes=len(payload), write_chunks=1)

    def write_later(self, h: bytes, payload: bytes | None = None) -> None:
        """Queue a chunk write on the writer threads, once per chunk."""
        if h in self._index or h in self._pending:
            return
        future = self._write_pool.submit(self.write_chunk, h, payload)
        self._pending[h] = future
        future.add_done_callback(lambda f, h=h: self._written(h, f))

    def _written(self, h: bytes, future: Future) -> None:
        # Runs on a writer thread; dict.pop is atomic under the GIL.
        self._pending.pop(h, None)
        if (exc := future.exception()) is not None:
            self._failed("write", exc)

    @property
    def pending_writes(self) -> int:
        """Chunk writes queued or in progress."""
        return len(self._pending)

    async def drain(self) -> None:
        """Wait until every queued write has finished."""
        while self._pending:
            await asyncio.gather(*[asyncio.wrap_future(f) for f in list(self._pending.values())],
                                 return_exceptions=True)

    def close(self) -> None:
        """Finish queued writes and stop the reader and writer threads."""
        self._write_pool.shutdown(wait=True)
        self._read_pool.shutdown(wait=True)
