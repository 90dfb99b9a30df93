"""How many bytes of an open file are in the page cache: mincore(2) over a mapping of it.

The seam behind gates.proof.CacheDrop's figures. Mapping a file (PROT_READ, no MAP_POPULATE)
faults nothing in, so the look does not change what it measures. A file that cannot be mapped
(a FUSE filesystem without mmap, a special file) raises OSError naming the call and errno; an
empty file holds no pages. Linux: mmap(2), mincore(2) (bit 0 of each vector byte: resident).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from functools import cache

PAGE = mmap.PAGESIZE
_BIT0 = bytes(i & 1 for i in range(256))  # mincore's vector byte -> 1 when resident, else 0


@cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
    return libc


def _fail(call: str) -> OSError:
    errno = ctypes.get_errno()
    return OSError(errno, f"{call}: {os.strerror(errno)}")


def resident_bytes(fd: int) -> int:
    """Bytes of the open file ``fd`` resident in the page cache now (OSError if unmeasurable)."""
    size = os.fstat(fd).st_size
    if size == 0:
        return 0
    libc = _libc()
    addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    if addr is None or addr == ctypes.c_void_p(-1).value:  # MAP_FAILED
        raise _fail("mmap")
    try:
        pages = (size + PAGE - 1) // PAGE
        vector = (ctypes.c_ubyte * pages)()
        if libc.mincore(addr, size, vector) != 0:
            raise _fail("mincore")
        flags = bytes(vector).translate(_BIT0)
        # The last page holds only the file's tail: count the bytes of the file, not the page.
        tail = size - (pages - 1) * PAGE
        return flags[:-1].count(1) * PAGE + (tail if flags[-1] else 0)
    finally:
        libc.munmap(addr, size)
