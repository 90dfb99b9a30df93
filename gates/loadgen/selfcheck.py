"""The generator's own health: is it, rather than the server, the bottleneck? (DESIGN §5)."""

from __future__ import annotations

import asyncio
import time

from pydantic import BaseModel

from ..core.statistics import percentile
from .cpu import CpuUse

# Lag beyond these means our timestamps carry our own delay, not the server's. For slow
# responses the loop-lag budget grows with them: 7 ms is noise on a 2-second TTFT.
LOOP_LAG_P99_MAX = 0.005
LOOP_LAG_SHARE_MAX = 0.02  # of the phase's TTFT p50
SCHEDULE_LAG_P99_MAX = 0.010
# Other processes above this share of all cores make a lagging loop the machine's doing, not the
# generator's (the same default as G2's other_cpu_max). The verdict stays unfit either way: a
# starved generator's timestamps are as late as a saturated one's.
OTHER_CPU_BUSY = 25.0
SATURATED_CORE = 50.0  # kvgate's own use, % of one core, below which the loop was held, not busy


class SelfCheck(BaseModel):
    """Event-loop and schedule lag of a phase, and whether its numbers are fit for a gate."""

    loop_lag_p99: float = 0.0
    loop_lag_max: float = 0.0
    schedule_lag_p99: float | None = None
    fit: bool = True
    reasons: list[str] = []
    other_cpu_pct: float | None = None  # processes other than kvgate, % of all cores
    own_cpu_pct: float | None = None  # kvgate itself, % of one core
    reconnects: int = 0  # requests sent again on a new connection (gates.loadgen.pool)
    notes: list[str] = []  # what a reader should know that does not make the phase unfit

    def line(self) -> str:
        """The verdict with its reasons and notes, e.g. for `kvgate loadgen`'s summary."""
        verdict = "fit for a gate" if self.fit else "UNFIT: " + "; ".join(self.reasons)
        return "; ".join([verdict, *self.notes])


class LoopLagMonitor:
    """Sleeps a fixed interval over and over; the overshoot is the event loop's lag."""

    def __init__(self, interval: float = 0.01):
        self.interval = interval
        self.lags: list[float] = []
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        """Begin sampling in the running loop."""
        self._task = asyncio.get_running_loop().create_task(self._sample())

    def stop(self) -> None:
        """Stop sampling."""
        if self._task:
            self._task.cancel()

    async def _sample(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(self.interval)
            self.lags.append(max(0.0, time.perf_counter() - before - self.interval))


def _why(check: SelfCheck) -> str:
    """Who held the event loop up: the machine's other processes, kvgate, or neither."""
    if check.other_cpu_pct is None or check.own_cpu_pct is None:
        return "the load generator is saturated"
    other, own = f"{check.other_cpu_pct:.0f} %", f"{check.own_cpu_pct:.0f} %"
    if check.other_cpu_pct > OTHER_CPU_BUSY:
        return (f"other processes used {other} of the CPU during the phase (kvgate used {own} "
                "of one core): the machine is busy, not the generator saturated")
    if check.own_cpu_pct >= SATURATED_CORE:
        return (f"the load generator is saturated (kvgate used {own} of one core, other "
                f"processes {other} of the CPU)")
    return (f"the load generator's event loop was held up, not busy (kvgate used {own} of one "
            f"core, other processes {other} of the CPU)")


def _busy(check: SelfCheck) -> str:
    if check.other_cpu_pct is None or check.other_cpu_pct <= OTHER_CPU_BUSY:
        return ""
    return f" (other processes used {check.other_cpu_pct:.0f} % of the CPU: the machine is busy)"


def judge_self_check(loop_lags: list[float], schedule_lags: list[float],
                     ttft_p50: float | None = None, cpu: CpuUse | None = None,
                     cores: int = 1) -> SelfCheck:
    """Mark a phase unfit for a gate when the generator's own lag could distort it."""
    check = SelfCheck(loop_lag_p99=percentile(loop_lags, 99) if loop_lags else 0.0,
                      loop_lag_max=max(loop_lags, default=0.0),
                      schedule_lag_p99=percentile(schedule_lags, 99) if schedule_lags else None,
                      other_cpu_pct=cpu.other_pct if cpu else None,
                      own_cpu_pct=cpu.own_pct * cores if cpu else None)
    budget = max(LOOP_LAG_P99_MAX, LOOP_LAG_SHARE_MAX * (ttft_p50 or 0.0))
    if check.loop_lag_p99 > budget:
        check.reasons.append(f"event-loop lag p99 {check.loop_lag_p99 * 1e3:.1f} ms > "
                             f"{budget * 1e3:.3g} ms (the larger of "
                             f"{LOOP_LAG_P99_MAX * 1e3:g} ms and {LOOP_LAG_SHARE_MAX:.0%} of "
                             f"TTFT p50): {_why(check)}")
    if check.schedule_lag_p99 is not None and check.schedule_lag_p99 > SCHEDULE_LAG_P99_MAX:
        check.reasons.append(f"schedule lag p99 {check.schedule_lag_p99 * 1e3:.1f} ms > "
                             f"{SCHEDULE_LAG_P99_MAX * 1e3:g} ms: requests left later than "
                             "planned" + _busy(check))
    check.fit = not check.reasons
    return check
