"""The generator's own health: is it, rather than the server, the bottleneck? (DESIGN §5)."""

from __future__ import annotations

import asyncio
import time

from pydantic import BaseModel

from ..core import percentile

# Lag beyond these means our timestamps carry our own delay, not the server's. For slow
# responses the loop-lag budget grows with them: 7 ms is noise on a 2-second TTFT.
LOOP_LAG_P99_MAX = 0.005
LOOP_LAG_SHARE_MAX = 0.02  # of the phase's TTFT p50
SCHEDULE_LAG_P99_MAX = 0.010


class SelfCheck(BaseModel):
    """Event-loop and schedule lag of a phase, and whether its numbers are fit for a gate."""

    loop_lag_p99: float = 0.0
    loop_lag_max: float = 0.0
    schedule_lag_p99: float | None = None
    fit: bool = True
    reasons: list[str] = []


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


def judge_self_check(loop_lags: list[float], schedule_lags: list[float],
                     ttft_p50: float | None = None) -> SelfCheck:
    """Mark a phase unfit for a gate when the generator's own lag could distort it."""
    check = SelfCheck(loop_lag_p99=percentile(loop_lags, 99) if loop_lags else 0.0,
                      loop_lag_max=max(loop_lags, default=0.0),
                      schedule_lag_p99=percentile(schedule_lags, 99) if schedule_lags else None)
    budget = max(LOOP_LAG_P99_MAX, LOOP_LAG_SHARE_MAX * (ttft_p50 or 0.0))
    if check.loop_lag_p99 > budget:
        check.reasons.append(f"event-loop lag p99 {check.loop_lag_p99 * 1e3:.1f} ms > "
                             f"{budget * 1e3:.3g} ms (the larger of "
                             f"{LOOP_LAG_P99_MAX * 1e3:g} ms and {LOOP_LAG_SHARE_MAX:.0%} of "
                             "TTFT p50): the load generator is saturated")
    if check.schedule_lag_p99 is not None and check.schedule_lag_p99 > SCHEDULE_LAG_P99_MAX:
        check.reasons.append(f"schedule lag p99 {check.schedule_lag_p99 * 1e3:.1f} ms > "
                             f"{SCHEDULE_LAG_P99_MAX * 1e3:g} ms: requests left later than "
                             "planned")
    check.fit = not check.reasons
    return check
