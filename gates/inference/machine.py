"""The machine as a control: a fixed CPU workload, and a short read of the KV device, timed
around every repetition.

A one-thread engine on a shared VM runs a whole repetition several per cent faster or slower
when the host's CPU speed moves (seen here: ~10 % with nothing else running), and a disk shared
with other tenants serves the same restores faster or slower from one minute to the next. A G2
stability failure or a moved G3 baseline is then the machine's doing, not the baseline's;
timing the same fixed work before and after each repetition says by how much the machine itself
moved. The timings are seams (`cpu_reference`, and a device reader handed in by the caller:
this room runs no fio); the arithmetic is pure (`distinct`, `cpu_speeds`, `device_speeds`,
whose CV G2 bounds as it bounds its own: docs/g2-stability.md).
"""

from __future__ import annotations

import hashlib
import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from pydantic import BaseModel

# One round: SHA-256 of 1 MiB (C, memory-bound) and a short integer loop (the interpreter,
# branch-bound), 4-8 ms on this project's 2-core VM, whose speed flips between two levels
# 1.6x apart every few hundred ms even when idle; the mean of ROUNDS rounds per CPU is the
# machine's average speed over about a tenth of a second, not one lucky instant.
_BLOCK = bytes(range(256)) * 4096
ROUNDS = 20


def _one_round() -> float:
    t = time.perf_counter()
    hashlib.sha256(_BLOCK).digest()
    acc = 0
    for i in range(60_000):
        acc ^= i * i
    return time.perf_counter() - t


class CpuReference(BaseModel):
    """The fixed workload's time on each CPU kvgate may run on, at one moment."""

    seconds: dict[int, float]  # cpu -> mean seconds of ROUNDS rounds

    @property
    def mean(self) -> float:
        """Seconds, averaged over the CPUs (what the speed variation is computed on)."""
        return statistics.fmean(self.seconds.values())


def cpu_reference(cpus: Sequence[int] | None = None) -> CpuReference:
    """The real seam: time the fixed workload pinned to each CPU in turn (this thread only)."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    chosen = [c for c in (cpus if cpus is not None else allowed) if c in allowed] or [-1]
    out: dict[int, float] = {}
    try:
        for cpu in chosen:
            if cpu >= 0:
                os.sched_setaffinity(0, {cpu})
            out[cpu] = statistics.fmean(_one_round() for _ in range(ROUNDS))
    finally:
        if allowed:
            os.sched_setaffinity(0, allowed)
    return CpuReference(seconds=out)


T = TypeVar("T")


def distinct(brackets: Sequence[Sequence[T]]) -> list[T]:
    """Each reading once, in time order, from repetitions' [before, after] brackets.

    Back-to-back repetitions share a reading (MachineReadings: one repetition's after is the
    next one's before); counted twice it would pull the CV of the readings towards that
    reading's value and lend the statistic a reading it does not have.
    """
    out: list[T] = []
    for bracket in brackets:
        # Only a bracket's first reading can be the previous one's last.
        skip = bool(out and bracket and bracket[0] == out[-1])
        out += list(bracket[skip:])
    return out


def cpu_speeds(references: Sequence[CpuReference]) -> list[float]:
    """The machine's speed at each reading (rounds per second of the fixed workload): a reading
    that takes 10 % longer is a machine 10 % slower, whatever the host's absolute time."""
    return [1 / r.mean for r in references if r.seconds and r.mean > 0]


def device_speeds(references: Sequence[DeviceReference]) -> list[float]:
    """The KV device's read speed at each reading that has one (a failed reading is no speed:
    not 0, which would be an infinite variation)."""
    return [r.bytes_per_s for r in references if r.bytes_per_s]


def speed_variation(references: Sequence[CpuReference]) -> float | None:
    """How far the machine's speed moved over these readings: (slowest - fastest) / fastest, %.

    None with fewer than two readings. A range over all readings grows with their number under
    the same noise: G3's looks table and baseline-shift note show it; G2 decides on the CV of
    cpu_speeds with its interval instead.
    """
    times = [r.mean for r in references if r.seconds]
    if len(times) < 2 or min(times) <= 0:
        return None
    return 100 * (max(times) - min(times)) / min(times)


class DeviceReference(BaseModel):
    """The KV device's read speed at one moment: a short, fixed random-read job (G1's KV-restore
    pattern) on a file written once, or why it could not be read."""

    bytes_per_s: float | None = None
    error: str = ""


def device_variation(references: Sequence[DeviceReference]) -> float | None:
    """How far the KV device's read speed moved: (fastest - slowest) / slowest, %.

    The same fixed work read at half the speed takes twice as long: 100 %, the same scale as
    speed_variation. None with fewer than two readings that have a speed.
    """
    speeds = [r.bytes_per_s for r in references if r.bytes_per_s]
    if len(speeds) < 2:
        return None
    return 100 * (max(speeds) - min(speeds)) / min(speeds)


class MachineReadings:
    """The CPU reference (and the KV device's, where a reader is given) around each
    repetition, read once between two repetitions.

    Repetitions run back to back, so one reading after a repetition is also the next one's
    reading before: half the readings for the same bracket. ``read`` and ``device`` are the
    seams; ``bracket`` gives the repetition's fields (``machine``, ``device``).
    """

    def __init__(self, read: Callable[[], CpuReference] = cpu_reference,
                 device: Callable[[], DeviceReference] | None = None):
        self.read, self.device = read, device
        self.last: tuple[CpuReference, DeviceReference | None] | None = None

    def _now(self) -> tuple[CpuReference, DeviceReference | None]:
        return self.read(), (self.device() if self.device is not None else None)

    def bracket(self) -> dict[str, list]:
        """{machine: [before, after], device: [before, after]} for the repetition that just
        ran (before: the previous reading); device is empty without a device reader."""
        before, self.last = self.last, self._now()
        readings = [self.last] if before is None else [before, self.last]
        return {"machine": [cpu for cpu, _ in readings],
                "device": [dev for _, dev in readings if dev is not None]}

    def start(self) -> None:
        """Read before the first repetition (or after a pause: an old reading is stale)."""
        self.last = self._now()
