"""Trying an engine's KV I/O pattern on the target: a few hundred chunk files written and read
back concurrently with the engine's flags and sizes, in a scratch folder removed afterwards.

A refused O_DIRECT (EINVAL), a short write or read, bytes that differ on read-back, and a buffered
fallback (the engine's own, or a filesystem that keeps O_DIRECT writes in the page cache) are
failures, each naming the file, the operation, the engine setting and the errno.
"""

from __future__ import annotations

import ctypes
import errno as errnos
import hashlib
import mmap
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..core.configuration import Site
from ..core.verdicts import Measurement
from .kvio import FILES, THREADS, KvIoPattern, KvIoResult, judge, patterns

PAGE = mmap.PAGESIZE
SCRATCH = ".kvgate-kv-io"


def _content(index: int, size: int) -> bytes:
    """The bytes of chunk file #index: distinct per file, so a mixed-up read shows."""
    seed = hashlib.blake2b(index.to_bytes(8, "little"), digest_size=64).digest()
    return (seed * (size // 64 + 1))[:size]


def _aligned(size: int) -> mmap.mmap:
    # Anonymous mmap: page-aligned, as the engines' pinned buffers are.
    return mmap.mmap(-1, max(PAGE, -(-size // PAGE) * PAGE))


def _why(exc: OSError) -> str:
    name = errnos.errorcode.get(exc.errno or 0, str(exc.errno))
    return f"{name} ({exc.strerror or exc})"


class _Trial:
    def __init__(self, p: KvIoPattern, folder: Path, files: int):
        self.p, self.folder, self.files = p, folder, files
        self.big = folder / "kv-blocks.bin"

    def _say(self, where: str, op: str, direct: bool, what: str) -> str:
        flags = "O_DIRECT " if direct else ""
        return (f"{where}: {flags}{op} of {self.p.file_bytes:,} B {what} "
                f"[arms.{self.p.arm} {self.p.engine}: {self.p.setting}]")

    def _target(self, i: int) -> tuple[Path, int]:
        if self.p.one_file:
            return self.big, i * self.p.file_bytes
        return self.folder / f"chunk-{i:04d}.kv", 0

    def write(self, i: int, direct: bool) -> str:
        path, offset = self._target(i)
        size, where = self.p.file_bytes, f"{path.name}@{offset}" if self.p.one_file else path.name
        flags = os.O_WRONLY | (os.O_DIRECT if direct else 0) | (
            0 if self.p.one_file else os.O_CREAT | os.O_TRUNC)
        buf = _aligned(size)
        try:
            buf[:size] = _content(i, size)
            fd = os.open(path, flags, 0o644)
            try:
                done = os.pwritev(fd, [memoryview(buf)[:size]], offset)
            finally:
                os.close(fd)
        except OSError as exc:
            return self._say(where, "write", direct, f"failed: {_why(exc)}")
        finally:
            buf.close()
        return "" if done == size else self._say(where, "write", direct,
                                                 f"was short: {done:,} B written")

    def read(self, i: int, direct: bool) -> str:
        path, offset = self._target(i)
        size, where = self.p.file_bytes, f"{path.name}@{offset}" if self.p.one_file else path.name
        buf = _aligned(size)
        try:
            fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
            try:
                got = os.preadv(fd, [memoryview(buf)[:size]], offset)
            finally:
                os.close(fd)
            if got != size:
                return self._say(where, "read", direct, f"was short: {got:,} B read")
            if buf[:size] != _content(i, size):
                return self._say(where, "read", direct, "returned bytes that differ from "
                                 "those written")
        except OSError as exc:
            return self._say(where, "read", direct, f"failed: {_why(exc)}")
        finally:
            buf.close()
        return ""


_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.mmap.restype = ctypes.c_void_p
_LIBC.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                       ctypes.c_long]
_LIBC.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_LIBC.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
MAP_FAILED = ctypes.c_void_p(-1).value


def resident_pages(path: Path) -> tuple[int, int] | str:
    """Pages of path in the page cache and in all (mmap(2) + mincore(2), as
    gates/inference/residency.py does), or why they could not be seen."""
    size = path.stat().st_size
    pages = -(-size // PAGE)
    if size == 0:
        return 0, 0
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _LIBC.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, MAP_FAILED):
            return f"mmap of {path.name}: {os.strerror(ctypes.get_errno())}"
        try:
            vector = (ctypes.c_ubyte * pages)()
            if _LIBC.mincore(addr, size, vector) != 0:
                return f"mincore of {path.name}: {os.strerror(ctypes.get_errno())}"
            return sum(b & 1 for b in vector), pages
        finally:
            _LIBC.munmap(addr, size)
    finally:
        os.close(fd)


def try_pattern(p: KvIoPattern, directory: Path, files: int = FILES,
                threads: int = THREADS) -> KvIoResult:
    """Write files chunks with the pattern's flags, read them back, and say what failed."""
    folder = directory / SCRATCH
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    try:
        return _run(p, folder, files, threads)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run(p: KvIoPattern, folder: Path, files: int, threads: int) -> KvIoResult:
    failures, notes = [], []
    direct_w, direct_r = p.direct_write, p.direct_read
    bsize = os.statvfs(folder).f_bsize
    if p.fallback_unaligned and p.file_bytes % bsize:
        failures.append(f"silent buffered fallback: {p.file_bytes:,} B per chunk is not a "
                        f"multiple of the filesystem block ({bsize} B, statvfs f_bsize), so "
                        f"{p.engine} writes and reads it without O_DIRECT and says nothing "
                        f"[arms.{p.arm}: {p.setting}]")
        direct_w = direct_r = False
    trial = _Trial(p, folder, files)
    if p.one_file:
        try:
            with trial.big.open("wb") as f:
                os.posix_fallocate(f.fileno(), 0, files * p.file_bytes)
        except OSError as exc:
            notes.append(f"fallocate refused ({_why(exc)}): the file is extended by writes")
    unmeasured = ""
    with ThreadPoolExecutor(threads) as pool:
        failures += [f for f in pool.map(lambda i: trial.write(i, direct_w), range(files)) if f]
        if direct_w and not failures:
            cached = _cached(trial)
            if isinstance(cached, str):
                unmeasured = (f"whether the filesystem honours {p.engine}'s O_DIRECT could not "
                              f"be seen: page-cache residency after O_DIRECT writes not "
                              f"measured: {cached} [arms.{p.arm}: {p.setting}]")
            else:
                failures += cached
        failures += [f for f in pool.map(lambda i: trial.read(i, direct_r), range(files)) if f]
    return KvIoResult(pattern=p, files=files, failures=failures, note="; ".join(notes),
                      unmeasured=unmeasured)


def _cached(trial: _Trial) -> list[str] | str:
    """A filesystem that takes O_DIRECT but keeps the written pages cached does buffered I/O:
    the failure naming it ([] for none), or why residency could not be seen."""
    path = trial.big if trial.p.one_file else trial._target(0)[0]
    seen = resident_pages(path)
    if isinstance(seen, str):
        return seen
    cached, pages = seen
    if cached == 0:
        return []
    return [f"silent buffered fallback: {cached} of {pages} pages of {path.name} stayed in the "
            f"page cache after O_DIRECT writes: the filesystem does not honour O_DIRECT "
            f"[arms.{trial.p.arm} {trial.p.engine}: {trial.p.setting}]"]


def engine_kv_io(site: Site, kv_bytes_per_token: int) -> Measurement:
    """G1's try of the candidate engine's KV I/O in the target directory (site as G2/G3 run it)."""
    found, unknown = patterns(site, kv_bytes_per_token)
    if not found and not unknown:
        return judge([], [], why_not="site.toml names no candidate arm: no engine writes its KV "
                     "to the array")
    target = site.target.directory
    if found and not target.is_dir():
        if not site.target.create:
            return judge([], [f"the target directory {target} does not exist ([target] create "
                              "= false)"])
        target.mkdir(parents=True, exist_ok=True)
    return judge([try_pattern(p, target) for p in found], unknown)
