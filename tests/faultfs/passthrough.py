"""The FUSE passthrough: every call goes to the backing directory, reads and writes through
the fault table first. mfusepy (PyPI, 3.1) over Debian's libfuse3; its Operations API is read
from mfusepy.py 3.1.1 (class Operations: paths as str, file handles as int, OSError for errno).
"""

from __future__ import annotations

import errno
import os
import time

import mfusepy

from .faults import FaultTable, flipped

STAT_KEYS = ("st_mode", "st_ino", "st_dev", "st_nlink", "st_uid", "st_gid", "st_size",
             "st_blocks", "st_blksize")


class FaultPassthrough(mfusepy.Operations):
    """A plain directory, ``root``, served at the mount point, with ``table``'s faults."""

    use_ns = True  # mfusepy: times as integer nanoseconds

    def __init__(self, root: str, table: FaultTable):
        self.root, self.table = os.path.realpath(root), table

    def _full(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    # ---- data: where the faults are -------------------------------------------------------

    def _caller(self) -> str:
        """The calling process's command line, when a rule asks for it ("" if it is gone)."""
        if not self.table.by_process():
            return ""
        # FUSE passes the calling thread's id; /proc/TID/cmdline is its process's.
        _, _, pid = mfusepy.fuse_get_context()
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            return ""

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        decision = self.table.decide("read", path, offset, size, self._caller())
        if decision.delay:
            time.sleep(decision.delay)
        if decision.errno:
            raise mfusepy.FuseOSError(decision.errno)
        data = os.pread(fh, size, offset)
        return flipped(data, offset, decision.flip) if decision.flip else data

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        decision = self.table.decide("write", path, offset, len(data), self._caller())
        if decision.delay:
            time.sleep(decision.delay)
        if decision.errno:
            raise mfusepy.FuseOSError(decision.errno)
        length = len(data) if decision.length is None else decision.length
        return os.pwrite(fh, data[:length], offset)

    # ---- everything else passes through ----------------------------------------------------

    def getattr(self, path: str, fh: int | None = None) -> dict:
        st = os.fstat(fh) if fh is not None else os.lstat(self._full(path))
        attrs = {key: getattr(st, key) for key in STAT_KEYS}
        attrs.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
        return attrs

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self._full(path))]

    def open(self, path: str, flags: int) -> int:
        # The backing file is opened without O_DIRECT: Python's buffers are not aligned as
        # O_DIRECT needs. The kernel still sends every read and write of an O_DIRECT (or a
        # direct_io mount's) file to us: the fault applies; the backing page cache is below it.
        return os.open(self._full(path), flags & ~os.O_DIRECT)

    def create(self, path: str, mode: int, flags: int = os.O_WRONLY | os.O_TRUNC) -> int:
        return os.open(self._full(path), (flags & ~os.O_DIRECT) | os.O_CREAT, mode)

    def release(self, path: str, fh: int) -> int:
        os.close(fh)
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        (os.fdatasync if datasync else os.fsync)(fh)
        return 0

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        os.truncate(self._full(path) if fh is None else fh, length)
        return 0

    def fallocate(self, path: str, mode: int, offset: int, size: int, fh: int) -> int:
        if mode:  # punch-hole and friends: not needed by fio's default, so not passed on
            raise mfusepy.FuseOSError(errno.EOPNOTSUPP)
        os.posix_fallocate(fh, offset, size)
        return 0

    def unlink(self, path: str) -> int:
        os.unlink(self._full(path))
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        os.mkdir(self._full(path), mode)
        return 0

    def rmdir(self, path: str) -> int:
        os.rmdir(self._full(path))
        return 0

    def rename(self, old: str, new: str) -> int:
        os.rename(self._full(old), self._full(new))
        return 0

    def link(self, target: str, source: str) -> int:
        os.link(self._full(source), self._full(target))
        return 0

    def symlink(self, target: str, source: str) -> int:
        os.symlink(source, self._full(target))
        return 0

    def readlink(self, path: str) -> str:
        return os.readlink(self._full(path))

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self._full(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self._full(path), uid, gid)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        os.utime(self._full(path), ns=times) if times else os.utime(self._full(path))
        return 0

    def access(self, path: str, amode: int) -> int:
        if not os.access(self._full(path), amode):
            raise mfusepy.FuseOSError(errno.EACCES)
        return 0

    def statfs(self, path: str) -> dict:
        st = os.statvfs(self._full(path))
        return {key: getattr(st, key) for key in (
            "f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree",
            "f_favail", "f_flag", "f_namemax")}
