"""One run at a time on a target: a lock file in the target directory, and no leftover fio.

Two runs on one array each measure about half of it and both pass (issue #17), so a run takes
the target for its whole length. The lock is an flock(2) on ``.kvgate.lock`` inside the target,
naming its holder (pid, run id, start, host); the kernel frees it when the holder dies, kill -9
included, so a stale file never blocks anyone. A fio left running by a killed run holds no lock,
so the processes are asked too: a fio working in the target refuses the run as well.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

import psutil

from ..core.configuration import Target
from .target import TargetError, ensure_directory

LOCK_FILE = ".kvgate.lock"


class TargetBusy(TargetError, ValueError):
    """Another run, or a leftover fio, holds the target; this run wrote nothing to it.

    A ValueError too, so a run's start refuses it like any other start failure.
    """


@dataclass(eq=False)
class TargetLock:
    """This process's hold on one target directory; shared by the sessions it opens there."""

    directory: Path
    fd: int
    pid: int
    holders: int = 1

    @property
    def path(self) -> Path:
        """The lock file."""
        return self.directory / LOCK_FILE

    def release(self) -> None:
        """Let the target go once every session that took it in this process has."""
        self.holders -= 1
        if self.holders > 0 or self.fd < 0:
            return
        if _HELD.get(self.directory) is self:
            del _HELD[self.directory]
        # Unlinked while still held: a run that opened this file meanwhile sees it is gone
        # once it gets the flock, and takes a new one (_open_locked).
        with contextlib.suppress(OSError):
            if _same_file(self.fd, self.path):
                self.path.unlink()
        os.close(self.fd)
        self.fd = -1


# The targets this process holds: flock(2) treats two open() of one file as two owners, so a
# second session of the same process would otherwise refuse itself.
_HELD: dict[Path, TargetLock] = {}


def _same_file(fd: int, path: Path) -> bool:
    mine, there = os.fstat(fd), os.stat(path, follow_symlinks=False)
    return (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino)


def _holder(path: Path) -> dict:
    with contextlib.suppress(OSError, ValueError):
        found = json.loads(path.read_text(errors="replace"))
        if isinstance(found, dict):
            return found
    return {}


def _held_by(directory: Path, path: Path) -> str:
    owner = _holder(path)
    pid = owner.get("pid", "unknown")
    where = f" on host {owner['host']}" if owner.get("host") else ""
    since = f", started {owner['started']}" if owner.get("started") else ""
    return (f"target {directory} is in use by kvgate run {owner.get('run_id', '(not yet named)')} "
            f"(pid {pid}{where}{since}; lock file {path}): wait for that run to finish, or stop "
            f"it (kill {pid}), then start this one again")


def _open_locked(path: Path) -> int | None:
    """An fd of the lock file, flock-ed by us, or None when the target is not writable.

    Raises BlockingIOError when someone holds it.
    """
    for _ in range(10):
        try:
            # O_NOFOLLOW: a link planted under our name would aim our writes outside the target.
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                return None  # nothing can write there: each gate says so as it always has
            raise TargetBusy(f"cannot take target {path.parent}: its lock file {path}: "
                             f"{exc.strerror or exc} (remove it; kvgate makes its own)") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if _same_file(fd, path):
                return fd
        except FileNotFoundError:
            pass  # the holder removed the file as it let go: take the new one
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # we locked a file its holder unlinked on release: try the new one
    raise TargetBusy(f"cannot take target {path.parent}: its lock file {path} keeps being "
                     "replaced (another kvgate starting and stopping?); try again")


def fio_in(directory: Path, names: set[str]) -> list[int]:
    """Pids of fio processes working in the directory: their cwd or an open file inside it."""
    top = Path(os.path.realpath(directory))

    def inside(path: str | None) -> bool:
        return bool(path) and (Path(path) == top or top in Path(path).parents)

    found = []
    for proc in psutil.process_iter(["name", "cwd"]):
        if proc.info["name"] not in names:
            continue
        # cwd is None when it is not ours to read: the open files may still be readable.
        with contextlib.suppress(psutil.Error):
            if inside(proc.info["cwd"]) or any(inside(f.path) for f in proc.open_files()):
                found.append(proc.pid)
    return sorted(found)


def lock_target(target: Target, run_id: str, started: str,
                fio_binary: str = "fio") -> TargetLock | None:
    """Take the target directory for this run, or raise TargetBusy naming who has it.

    The directory is created first where ``create = true`` allows; None when it cannot be, or
    is not writable (the gates then say why the target is unusable, as they always have).
    """
    try:
        directory = Path(os.path.realpath(ensure_directory(target)))
    except TargetError:
        return None
    held = _HELD.get(directory)
    if held is not None and held.pid == os.getpid():
        held.holders += 1
        return held
    path = directory / LOCK_FILE
    try:
        fd = _open_locked(path)
    except BlockingIOError:
        raise TargetBusy(_held_by(directory, path)) from None
    if fd is None:
        return None
    lock = TargetLock(directory, fd, os.getpid())
    owner = {"pid": lock.pid, "run_id": run_id, "started": started,
             "host": socket.gethostname()}
    with contextlib.suppress(OSError):  # a full target is locked all the same (G1 says it is full)
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(owner) + "\n").encode(), 0)
    fio = fio_in(directory, {"fio", Path(fio_binary).name[:15]})  # a name as /proc keeps it
    if fio:
        lock.release()
        pids = ", ".join(map(str, fio))
        raise TargetBusy(f"target {directory} is in use by fio (pid {pids}), left running by an "
                         "earlier run or started by hand: wait for it to end, or stop it "
                         f"(kill {pids}), then start this run again")
    _HELD[directory] = lock
    return lock
