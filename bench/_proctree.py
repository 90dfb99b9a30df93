"""Run one client as its own process tree and measure it the same way whatever it is.

aiperf spawns a process per service (controller, dataset, timing, workers, record processors);
kvgate's client is one process. Both are started here, pinned to one CPU (children inherit the
affinity), and sampled with psutil every 50 ms over the whole tree: CPU = the sum over every
process ever seen of its last-seen user + system time (a process that exits keeps what it had
used), RSS = the peak of the tree's summed resident set. The kernel's own count for the
reaped tree (``getrusage(RUSAGE_CHILDREN)`` before/after) is kept too as a cross-check.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import threading
import time
from bisect import bisect_left
from dataclasses import dataclass, field
from pathlib import Path

import psutil

SAMPLE_S = 0.05


@dataclass
class Measured:
    """What one client run cost: CPU seconds, peak RSS, wall, and the CPU time series."""

    returncode: int | None  # None: killed at the timeout
    wall: float
    cpu: float  # psutil, summed over the tree
    kernel_cpu: float  # getrusage(RUSAGE_CHILDREN) delta: the reaped tree, for comparison
    peak_rss: int  # bytes, peak of the summed RSS
    processes: int  # distinct processes seen in the tree
    series: list[tuple[float, float]] = field(default_factory=list)  # (time.time(), cpu so far)

    def cpu_between(self, start: float, end: float) -> float | None:
        """Tree CPU seconds used between two wall-clock times (linear between samples)."""
        if not self.series or end <= start:
            return None
        return _at(self.series, end) - _at(self.series, start)


def _at(series: list[tuple[float, float]], t: float) -> float:
    i = bisect_left(series, (t, float("-inf")))
    if i == 0:
        return series[0][1]
    if i >= len(series):
        return series[-1][1]
    (t0, c0), (t1, c1) = series[i - 1], series[i]
    return c0 + (c1 - c0) * (t - t0) / (t1 - t0) if t1 > t0 else c1


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class _Sampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.last: dict[tuple[int, float], float] = {}  # (pid, create time) -> cpu seconds
        self.peak_rss = 0
        self.series: list[tuple[float, float]] = []
        self.stop = threading.Event()

    def sample(self) -> None:
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            procs = []
        rss = 0
        for p in procs:
            with contextlib.suppress(psutil.Error), p.oneshot():
                t = p.cpu_times()
                self.last[(p.pid, p.create_time())] = t.user + t.system
                rss += p.memory_info().rss
        self.peak_rss = max(self.peak_rss, rss)
        self.series.append((time.time(), sum(self.last.values())))

    def run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            self.stop.wait(SAMPLE_S)


def run_tree(argv: list[str], *, timeout: float, log: Path, env: dict[str, str] | None = None,
             cpu: int | None = None, cwd: Path | None = None) -> Measured:
    """Run argv (stdout+stderr to log) pinned to ``cpu``, bounded by ``timeout`` seconds."""
    def pin() -> None:
        if cpu is not None and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {cpu})

    kernel0, began = _children_cpu(), time.monotonic()
    with open(log, "wb") as out:
        # A session of its own: on a timeout the whole tree we started is killed by its group id.
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                preexec_fn=pin, start_new_session=True)
        sampler = _Sampler(proc.pid)
        sampler.start()
        try:
            code: int | None = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            code = None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        sampler.stop.set()
        sampler.join(5)
    sampler.sample()  # the root is gone: this keeps every process's last count
    return Measured(returncode=code, wall=time.monotonic() - began,
                    cpu=sum(sampler.last.values()), kernel_cpu=_children_cpu() - kernel0,
                    peak_rss=sampler.peak_rss, processes=len(sampler.last),
                    series=sampler.series)


def tail(log: Path, lines: int = 25) -> str:
    """The last lines of a log, for error messages."""
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"(no log: {exc})"
