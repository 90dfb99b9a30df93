"""Who used the CPU during a repetition: the engine, kvgate itself, or everything else.

A baseline engine starved of CPU by another process measures slow, and a slow baseline inflates
every G3 gain; so each repetition records the host's CPU use by other processes, the engine
process tree's own, and its threads' run-queue waits (/proc/PID/task/TID/schedstat, field 2,
nanoseconds spent runnable but waiting: Documentation/scheduler/sched-stats.rst). Reading
psutil and procfs is the seam (`cpu_snapshot`); the arithmetic is pure (`cpu_use`).
"""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import BaseModel


class CpuSnapshot(BaseModel):
    """Cumulative CPU seconds at one moment."""

    wall: float
    cores: int
    host_busy: float  # every process, all cores (psutil.cpu_times: total minus idle, iowait)
    engine: float = 0.0  # the engine's process tree
    own: float = 0.0  # this process (the load generator)
    engine_wait_ns: int | None = None  # run-queue waits of the engine's threads


class CpuUse(BaseModel):
    """CPU use over an interval, as % of all cores."""

    seconds: float
    other_pct: float  # everything but the engine and kvgate: what could starve the engine
    engine_pct: float
    own_pct: float
    engine_wait_ms: float | None = None

    def line(self) -> str:
        """One line for a deviation or a note."""
        wait = f", engine run-queue waits {self.engine_wait_ms:,.0f} ms" \
            if self.engine_wait_ms is not None else ""
        return (f"other processes used {self.other_pct:.0f} % of the CPU (engine "
                f"{self.engine_pct:.0f} %, kvgate {self.own_pct:.0f} %{wait}) over "
                f"{self.seconds:.0f} s")


def _schedstat_wait(pid: int) -> int | None:
    total, found = 0, False
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[1])
            found = True
        except (OSError, ValueError, IndexError):
            continue
    return total if found else None


def cpu_snapshot(engine_pid: int | None = None) -> CpuSnapshot:
    """The real seam: psutil's host and process CPU times, procfs run-queue waits."""
    import psutil  # here, so the pure part of this module needs no psutil

    t = psutil.cpu_times()
    busy = sum(t) - t.idle - getattr(t, "iowait", 0.0)
    me = psutil.Process().cpu_times()
    engine, wait = 0.0, None
    if engine_pid:
        try:
            root = psutil.Process(engine_pid)
            for p in [root, *root.children(recursive=True)]:
                c = p.cpu_times()
                engine += c.user + c.system
                w = _schedstat_wait(p.pid)
                wait = None if w is None else (wait or 0) + w
        except psutil.Error:
            pass  # the engine ended: what it used is gone with it
    return CpuSnapshot(wall=time.monotonic(), cores=psutil.cpu_count() or 1, host_busy=busy,
                       engine=engine, own=me.user + me.system, engine_wait_ns=wait)


def cpu_use(before: CpuSnapshot, after: CpuSnapshot) -> CpuUse:
    """What each party used between two snapshots, as % of every core's time."""
    seconds = max(after.wall - before.wall, 1e-9)
    capacity = seconds * after.cores / 100
    engine = max(after.engine - before.engine, 0.0)
    own = max(after.own - before.own, 0.0)
    other = max(after.host_busy - before.host_busy - engine - own, 0.0)
    wait = None if before.engine_wait_ns is None or after.engine_wait_ns is None else \
        max(after.engine_wait_ns - before.engine_wait_ns, 0) / 1e6
    return CpuUse(seconds=seconds, other_pct=other / capacity, engine_pct=engine / capacity,
                  own_pct=own / capacity, engine_wait_ms=wait)
