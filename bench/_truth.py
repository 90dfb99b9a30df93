"""Server truth and the kvgate/aiperf comparison for bench/vs_aiperf.py. Pure: no I/O.

The reference server's stamps are the truth: server TTFT = first token's send stamp - receive
stamp, server ITL = (last send - first send) / (tokens - 1), the same formula both clients use
for their ITL (aiperf: metrics/types/inter_token_latency_metric.py; kvgate: metrics.tpot).
A client's error on a request = its value - the server's, matched by the stamp key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from _aiperf import Record

from gates.core.statistics import percentile

THROUGHPUT_TOLERANCE = 0.99  # "not lower": at low concurrency both wait on the server alike
# Two errors closer than this are level, neither ahead: loopback delivery itself jitters by
# tens of microseconds (the raw-socket peer's first-event lag p50 is ~60 us in
# bench/timing_fidelity.py), so a smaller difference is not the clients'.
ERROR_FLOOR = 10e-6  # seconds
ERRORS = ("ttft_p50", "ttft_p99", "itl_p50")


@dataclass(frozen=True)
class Truth:
    """One request as the server timed it (perf_counter_ns, one clock for the machine)."""

    recv: int
    sent: tuple[int, ...]

    @property
    def ttft(self) -> float | None:
        """Server TTFT, seconds."""
        return (self.sent[0] - self.recv) / 1e9 if self.sent else None

    @property
    def itl(self) -> float | None:
        """Server ITL, seconds."""
        n = len(self.sent)
        return (self.sent[-1] - self.sent[0]) / (n - 1) / 1e9 if n >= 2 else None


def truths(stamps: dict) -> dict[str, Truth]:
    """The /bench/stamps body of bench/_refserver.py as Truths by key."""
    return {k: Truth(v["recv"], tuple(v["sent"])) for k, v in stamps["stamps"].items()}


@dataclass
class Run:
    """One client run at one concurrency, measured against the server's stamps."""

    ttft_err: list[float] = field(default_factory=list)  # client TTFT - server TTFT, s
    itl_err: list[float] = field(default_factory=list)  # |client ITL - server ITL|, s
    failed: int = 0  # not ok at the client
    unmatched: int = 0  # ok, but no server stamps under its key
    rate: float | None = None  # requests/s, the server's view (see match)
    cpu: float | None = None  # tree CPU seconds, whole run
    window_cpu: float | None = None  # tree CPU seconds between first start and last end
    peak_rss: int | None = None  # bytes


def match(records: Sequence[Record], truth: dict[str, Truth]) -> Run:
    """Errors of a client's records against the server's stamps, request by request.

    rate = matched requests / (last token sent - first request received) of those requests:
    the server's clock alone, so both clients' throughput is timed the same way.
    """
    run, seen = Run(), []
    for r in records:
        if not r.ok or r.ttft is None:
            run.failed += 1
            continue
        t = truth.get(r.key)
        if t is None or t.ttft is None:
            run.unmatched += 1
            continue
        seen.append(t)
        run.ttft_err.append(r.ttft - t.ttft)
        if r.itl is not None and t.itl is not None:
            run.itl_err.append(abs(r.itl - t.itl))
    if len(seen) >= 2:
        span = max(t.sent[-1] for t in seen) - min(t.recv for t in seen)
        run.rate = len(seen) / (span / 1e9) if span > 0 else None
    return run


def window(records: Sequence[Record]) -> tuple[float, float] | None:
    """Wall-clock (first start, last end) of the measured requests, for the CPU window."""
    starts = [r.start for r in records if r.start is not None]
    ends = [r.end for r in records if r.end is not None]
    return (min(starts), max(ends)) if starts and ends else None


def _mean(values: Sequence[float | None]) -> float | None:
    xs = [v for v in values if v is not None]
    return sum(xs) / len(xs) if xs else None


@dataclass
class Side:
    """Every run of one client at one concurrency, pooled."""

    runs: list[Run]

    def pooled(self, name: str) -> list[float]:
        """One error list over all runs."""
        return [x for r in self.runs for x in getattr(r, name)]

    def value(self, name: str) -> float | None:
        """ttft_p50 / ttft_p99 / itl_p50 over the pooled errors; rate, cpu, window_cpu as the
        mean per run; peak_rss as the highest run's."""
        if name in ("ttft_p50", "ttft_p99", "itl_p50"):
            errors, p = name.split("_")
            return percentile(self.pooled(f"{errors}_err"), float(p[1:]))
        if name == "peak_rss":
            peaks = [r.peak_rss for r in self.runs if r.peak_rss is not None]
            return float(max(peaks)) if peaks else None
        return _mean([getattr(r, name) for r in self.runs])


LOWER_IS_BETTER = ("ttft_p50", "ttft_p99", "itl_p50", "cpu", "window_cpu", "peak_rss")


def behind(kvgate: Side, aiperf: Side) -> list[str]:
    """What kvgate is not ahead on: a lower error/CPU/RSS (errors within ERROR_FLOOR level),
    a throughput not lower."""
    out = []
    for name in LOWER_IS_BETTER:
        k, a = kvgate.value(name), aiperf.value(name)
        if k is None or a is None or k >= a and not level(name, k, a):
            out.append(name)
    k, a = kvgate.value("rate"), aiperf.value("rate")
    if k is None or a is None or k < THROUGHPUT_TOLERANCE * a:
        out.append("rate")
    return out


def level(name: str, k: float, a: float) -> bool:
    """Whether two values of an error metric are too close to tell the clients apart."""
    return name in ERRORS and abs(k - a) < ERROR_FLOOR


def levels(kvgate: Side, aiperf: Side) -> list[str]:
    """The error metrics on which the two are level (within ERROR_FLOOR), said on the row."""
    out = []
    for name in ERRORS:
        k, a = kvgate.value(name), aiperf.value(name)
        if k is not None and a is not None and k >= a and level(name, k, a):
            out.append(name)
    return out


def ratio(k: float | None, a: float | None) -> float | None:
    """kvgate / aiperf, None when either is missing or aiperf's is 0."""
    return None if k is None or a is None or a == 0 else k / a
