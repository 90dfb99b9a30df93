"""Which fault an I/O meets: the rules the test sets, decided per operation. Pure (no I/O).

A rule matches an operation by kind (read / write), by the file's path under the mount (an
fnmatch pattern), by the calling process's command line (another pattern: an engine's I/O
fails while kvgate's own reads of the same files succeed, a fault in one I/O path as
LMCache/LMCache#4364 met in O_DIRECT writes on XFS) and by byte range; it lets ``after``
matching operations through first, fires on a ``share`` of the rest (a seeded draw, so a run
can be repeated), and stops after ``times`` firings, if given: a fault that clears again.
"""

from __future__ import annotations

import errno as errnos
import fnmatch
import random
import threading
from dataclasses import asdict, dataclass, field

KINDS = ("error", "short", "delay", "flip")
OPS = ("read", "write", "any")
TAILS = ("fixed", "pareto")


@dataclass
class Fault:
    """One rule. ``kind``: error (``errno``), short (a write keeps ``keep`` of its bytes),
    delay (``delay`` seconds, fixed or Pareto-tailed with shape ``alpha``, capped at
    ``max_delay``), flip (reads return the bytes in [start, end) inverted)."""

    kind: str
    op: str = "any"
    errno: int = errnos.EIO
    path: str = "*"
    process: str = "*"  # the caller's /proc/PID/cmdline, its arguments joined by spaces
    start: int = 0
    end: int | None = None  # None: to the end of the file
    after: int = 0
    times: int | None = None
    share: float = 1.0
    delay: float = 0.0
    tail: str = "fixed"
    alpha: float = 1.5
    max_delay: float = 10.0
    keep: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        problems = [f"kind {self.kind!r} is not one of {KINDS}"] * (self.kind not in KINDS)
        problems += [f"op {self.op!r} is not one of {OPS}"] * (self.op not in OPS)
        problems += [f"tail {self.tail!r} is not one of {TAILS}"] * (self.tail not in TAILS)
        problems += ["flip applies to reads only"] * (self.kind == "flip" and self.op == "write")
        problems += ["short applies to writes only"] * (self.kind == "short" and self.op == "read")
        problems += [f"share {self.share} is not in [0, 1]"] * (not 0 <= self.share <= 1)
        problems += [f"keep {self.keep} is not in [0, 1)"] * (not 0 <= self.keep < 1)
        if problems:
            raise ValueError("; ".join(problems))

    def covers(self, op: str, path: str, offset: int, size: int, process: str = "") -> bool:
        """Whether an operation of ``size`` bytes at ``offset`` of ``path``, asked by a process
        whose command line is ``process``, is in scope."""
        implied = {"flip": "read", "short": "write"}.get(self.kind, self.op)
        wanted = self.op if self.op != "any" else implied
        end = self.end if self.end is not None else float("inf")
        return (wanted in ("any", op) and fnmatch.fnmatchcase(path, self.path)
                and (self.process == "*" or fnmatch.fnmatchcase(process, self.process))
                and offset < end and offset + size > self.start)


@dataclass
class Decision:
    """What one operation meets: an errno, a delay, a shortened length, byte ranges to flip."""

    errno: int = 0
    delay: float = 0.0
    length: int | None = None  # a short write: bytes actually written
    flip: list[tuple[int, int]] = field(default_factory=list)  # file offsets, [start, end)


@dataclass
class _Armed:
    fault: Fault
    rng: random.Random
    seen: int = 0
    fired: int = 0


class FaultTable:
    """The rules in force and what they did; thread-safe (FUSE calls come on many threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed: list[_Armed] = []
        self.ops = {"read": 0, "write": 0}

    def set(self, faults: list[Fault]) -> None:
        """Replace the rules; their counts start again from zero."""
        with self._lock:
            self._armed = [_Armed(f, random.Random(f.seed)) for f in faults]

    def stats(self) -> dict:
        """Operations seen by kind, and per rule how many matched and how many it fired on."""
        with self._lock:
            return {"ops": dict(self.ops), "faults": [
                {"fault": asdict(a.fault), "seen": a.seen, "fired": a.fired}
                for a in self._armed]}

    def by_process(self) -> bool:
        """Whether a rule asks who the caller is (its command line is looked up only then)."""
        with self._lock:
            return any(a.fault.process != "*" for a in self._armed)

    def decide(self, op: str, path: str, offset: int, size: int,
               process: str = "") -> Decision:
        """The decision for one read or write; every rule in scope is applied, in order."""
        decision = Decision()
        with self._lock:
            self.ops[op] += 1
            for armed in self._armed:
                if armed.fault.covers(op, path, offset, size, process) and self._fires(armed):
                    _apply(armed.fault, armed.rng, decision, offset, size)
        return decision

    @staticmethod
    def _fires(armed: _Armed) -> bool:
        fault = armed.fault
        armed.seen += 1
        if armed.seen <= fault.after or (fault.times is not None and armed.fired >= fault.times):
            return False
        if fault.share < 1 and armed.rng.random() >= fault.share:
            return False
        armed.fired += 1
        return True


def _apply(fault: Fault, rng: random.Random, decision: Decision, offset: int,
           size: int) -> None:
    if fault.kind == "error" and not decision.errno:
        decision.errno = fault.errno
    elif fault.kind == "delay":
        decision.delay += delay_of(fault, rng)
    elif fault.kind == "short":
        decision.length = min(decision.length or size, int(size * fault.keep))
    elif fault.kind == "flip":
        end = min(offset + size, fault.end if fault.end is not None else offset + size)
        decision.flip.append((max(offset, fault.start), end))


def delay_of(fault: Fault, rng: random.Random) -> float:
    """A fixed delay, or one from a Pareto tail whose smallest value is ``delay``."""
    if fault.tail == "fixed":
        return fault.delay
    return min(fault.max_delay, fault.delay * rng.paretovariate(fault.alpha))


def flipped(data: bytes, offset: int, ranges: list[tuple[int, int]]) -> bytes:
    """``data`` read at file ``offset`` with the bytes of each range inverted."""
    out = bytearray(data)
    for start, end in ranges:
        lo, hi = max(start - offset, 0), min(end - offset, len(out))
        if lo < hi:
            out[lo:hi] = out[lo:hi].translate(_INVERT)
    return bytes(out)


_INVERT = bytes(b ^ 0xFF for b in range(256))
