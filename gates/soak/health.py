"""G4 health collectors' common ground: the window context, the protocol, process and free space.

Each collector returns one HealthReading per window; NOT APPLICABLE only for a fact of the
site (no devices named, no fabric, an engine kvgate does not run), with the reason; a signal
that could not be read (a tool missing, a permission refused) is an error reading naming it.
The kernel log, NVMe and fio verify collectors have modules of their own (kernel_log,
nvme_health, fio_verify).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import psutil
from pydantic import BaseModel

from .rules import FREE_SPACE, PROCESS, HealthReading

MAX_DETAILS = 20  # lines kept per reading: a storm of identical errors must not flood the store


class WindowContext(BaseModel):
    """The window a reading is for; ``since`` is the last committed window's end (gaps too)."""

    index: int
    start: float
    end: float
    since: float


class Collector(Protocol):
    """A health signal. concurrent ones run in a worker thread during the window (fio)."""

    name: str
    concurrent: bool

    def prime(self, now: float) -> None: ...

    def collect(self, ctx: WindowContext) -> HealthReading: ...


class BaseCollector:
    """What most collectors share: they run after the window's load and need no baseline."""

    concurrent = False

    def prime(self, now: float) -> None:
        """Take a baseline before the first window of a session (most collectors need none)."""


# ---- the engine's process and the target's free space -----------------------------------

class ProcessHealth(BaseCollector):
    """RSS and open files of a local engine process and its children (psutil)."""

    name = PROCESS

    def __init__(self, pid: Callable[[], int | None]):
        self.pid = pid

    def collect(self, ctx: WindowContext) -> HealthReading:
        """RSS bytes and open file descriptors; N/A for an engine kvgate does not run."""
        pid = self.pid()
        if pid is None:
            return HealthReading.not_applicable("the engine is not a local process kvgate "
                                                "started (endpoint arm)")
        try:
            root = psutil.Process(pid)
            tree = [root, *root.children(recursive=True)]
            counted = [_rss_and_fds(p, must=p is root) for p in tree]
        except psutil.NoSuchProcess:
            return HealthReading.failed(f"engine process {pid} is gone")
        except psutil.AccessDenied as exc:  # the engine is there: could not measure
            return HealthReading.failed(f"no permission to read the engine's process {pid} "
                                        f"({exc}): run kvgate as the engine's user or as root")
        live = [c for c in counted if c is not None]
        return HealthReading(values={"rss_bytes": float(sum(r for r, _ in live)),
                                     "open_files": float(sum(f for _, f in live)),
                                     "processes": float(len(live))})


def _rss_and_fds(process, must: bool) -> tuple[int, int] | None:
    """One process's RSS and open files; None for a child that ended between the listing and
    the read (the engine's own process ending is the engine gone, and raises)."""
    try:
        return process.memory_info().rss, process.num_fds()
    except psutil.NoSuchProcess:
        if must:
            raise
        return None


class FreeSpace(BaseCollector):
    """Free space on the target; an alert below site.toml's min_free."""

    name = FREE_SPACE

    def __init__(self, directory: Path, min_free: int = 0):
        self.directory, self.min_free = Path(directory), min_free

    def collect(self, ctx: WindowContext) -> HealthReading:
        """Free and total bytes of the target's filesystem."""
        try:
            usage = shutil.disk_usage(self.directory)
        except OSError as exc:
            return HealthReading.failed(f"cannot stat the target {self.directory}: {exc}")
        low = usage.free < self.min_free
        return HealthReading(status="alert" if low else "ok",
                             values={"free_bytes": float(usage.free),
                                     "total_bytes": float(usage.total)},
                             reason=f"below min_free {self.min_free}" if low else "")
