"""The G4 soak runner: windows of load plus health readings, each committed before the next.

Seams: a Clock (real or fake, gates.soak.clock), a LoadDriver (gates.soak.load), health
Collectors (gates.soak.health and its siblings). Each window is committed to the soak's
tables (gates.soak.store) as it ends, with the runner's heartbeat; a resume reads them back,
and refuses to start while the soak's earlier runner is still alive (gates.soak.liveness).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from pydantic import BaseModel

from ..core.configuration import G4Limits
from ..core.verdicts import Measurement, RequestOutcome, RequestRecord
from ..loadgen import stats, ttft
from ..store import Store
from .clock import Clock, RealClock
from .health import Collector, WindowContext
from .liveness import is_me, judge, this_runner
from .load import LoadDriver
from .load_rules import soak_measurements
from .rules import HealthReading, SoakDeviation, SoakPlan, WindowRecord, gap
from .store import SoakStore

# ---- one window ---------------------------------------------------------------------------

def window_record(index: int, start: float, end: float, records: Sequence[RequestRecord],
                  health: dict[str, HealthReading]) -> WindowRecord:
    """A window's load figures from its request records. Pure."""
    done = [r for r in records if r.ok]
    tokens = sum(r.output_tokens for r in done)
    first = stats(ttft(r) for r in done)
    seconds = end - start
    return WindowRecord(index=index, start=start, end=end, requests=len(records),
                        errors=len(records) - len(done),
                        timeouts=sum(r.outcome is RequestOutcome.TIMEOUT for r in records),
                        output_tokens=tokens, throughput=tokens / seconds if seconds > 0
                        else None, ttft_p50=first.p50, ttft_p99=first.p99, health=health)


class SoakStatus(BaseModel):
    """Where a soak stands: for ``kvgate soak status`` and the periodic log line."""

    run_id: str
    committed: int
    planned: int
    effective_s: float
    gap_s: float
    eta_s: float
    shortened: bool
    health: dict[str, str]  # collector -> status of the last window ("ok", "alert"...)

    def line(self) -> str:
        """One log line."""
        alerts = [k for k, v in self.health.items() if v in ("alert", "error")]
        return (f"G4 {self.run_id}: window {self.committed}/{self.planned}, "
                f"{self.effective_s / 3600:.2f} h under load, gaps {self.gap_s:.0f} s, "
                f"ETA {self.eta_s / 3600:.2f} h" + (f", ALERT {', '.join(alerts)}" if alerts
                                                     else "") +
                (" (shortened)" if self.shortened else ""))


def status(plan: SoakPlan, windows: list[WindowRecord],
           deviations: list[SoakDeviation]) -> SoakStatus:
    """Progress, ETA and the last window's health. Pure."""
    effective = sum(w.seconds for w in windows)
    return SoakStatus(run_id=plan.run_id, committed=len(windows), planned=plan.windows,
                      effective_s=effective,
                      gap_s=sum(d.seconds for d in deviations if d.kind == "gap"),
                      eta_s=max(0.0, plan.duration - effective), shortened=plan.shortened,
                      health={k: r.status for k, r in windows[-1].health.items()}
                      if windows else {})


class SoakBusy(ValueError):
    """A resume refused: the soak's earlier runner is still alive and may write windows."""


class SoakRunner:
    """Runs (or resumes) a soak's remaining windows; every window is committed when it ends."""

    def __init__(self, store: Store, run_id: str, load: LoadDriver,
                 collectors: Sequence[Collector] = (), clock: Clock | None = None,
                 on_window: Callable[[WindowRecord, SoakStatus], None] | None = None):
        self.soak, self.run_id = SoakStore(store), run_id
        self.load, self.collectors = load, list(collectors)
        self.clock, self.on_window = clock or RealClock(), on_window
        plan = self.soak.plan(run_id)
        if plan is None:
            raise ValueError(f"run {run_id} has no soak plan: start it first")
        self.plan = plan
        # Kept in memory as they are committed: status() per window must not re-read them all.
        self.committed = self.soak.windows(run_id)

    @classmethod
    def start(cls, store: Store, plan: SoakPlan, load: LoadDriver, **kw) -> SoakRunner:
        """A new soak: store its plan, then run it with run()."""
        clock = kw.get("clock") or RealClock()
        SoakStore(store).save_plan(plan.model_copy(update={"started": clock.now()}))
        runner = cls(store, plan.run_id, load, **kw)
        runner.soak.mark_runner(plan.run_id, this_runner())
        return runner

    @classmethod
    def resume(cls, store: Store, run_id: str, load: LoadDriver, **kw) -> SoakRunner:
        """Continue after a crash: the gap since the last committed window is a deviation."""
        runner = cls(store, run_id, load, **kw)
        finished = len(runner.committed) >= runner.plan.windows
        mark = runner.soak.runner(run_id)
        if mark is not None and not is_me(mark):
            found = judge(mark, runner.plan.window, finished, f"kvgate soak resume {run_id}")
            if found.busy:
                raise SoakBusy(f"soak {run_id} cannot be resumed while its runner may still "
                               f"write windows: {found.text}")
        if finished:
            return runner  # finished: nothing to resume, no gap
        runner.soak.mark_runner(run_id, this_runner())
        # From the last committed window, or the last resume if none was committed since
        # (a second crash must not count the first gap twice).
        marks = [d.end for d in runner.soak.deviations(run_id) if d.kind == "gap" and d.end]
        marks += [w.end for w in runner.committed[-1:]] + [runner.plan.started or 0.0]
        runner.soak.add_deviation(run_id, gap(max(marks), runner.clock.now()))
        return runner

    def status(self) -> SoakStatus:
        """Progress and health now."""
        return status(self.plan, self.committed, self.soak.deviations(self.run_id))

    def measurements(self, limits: G4Limits, **kw) -> list[Measurement]:
        """Every G4 rule over what is committed (see gates.soak.rules.soak_measurements)."""
        return soak_measurements(self.committed, self.soak.deviations(self.run_id), self.plan,
                                 limits, **kw)

    def run(self, max_windows: int | None = None) -> SoakStatus:
        """Run the remaining windows (at most max_windows of them) and return the status."""
        committed = self.committed
        if len(committed) >= self.plan.windows:
            return self.status()  # finished: the runner mark stays as the last runner left it
        self.soak.mark_runner(self.run_id, this_runner())
        reason = ""
        try:
            # The kernel log is read from here on: after a crash, the gap is read too.
            since = committed[-1].end if committed else self.plan.started
            now = self.clock.now()
            for collector in self.collectors:
                # A failing baseline is not fatal: the collector's first reading says why.
                with contextlib.suppress(Exception):
                    collector.prime(now)
            with ThreadPoolExecutor(max_workers=max(1, len(self.collectors))) as pool:
                first = len(committed)
                for index in range(first, self.plan.windows):
                    if max_windows is not None and index - first >= max_windows:
                        break
                    window = self._one(index, since, pool)
                    since = window.end
        except BaseException as exc:
            reason = f"{type(exc).__name__}: {exc}".rstrip(": ")
            raise
        finally:  # a kill -9 never gets here: its mark stays "running" for status to judge
            done = len(self.committed) >= self.plan.windows
            with contextlib.suppress(Exception):  # never hide the exception that ended it
                self.soak.end_runner(self.run_id, "finished" if done else "stopped",
                                     time.time(), reason)
        return self.status()

    def _one(self, index: int, since: float | None, pool: ThreadPoolExecutor) -> WindowRecord:
        seconds = min(self.plan.window, self.plan.duration - index * self.plan.window)
        start = self.clock.now()
        ctx = WindowContext(index=index, start=start, end=start + seconds,
                            since=start if since is None else since)
        # fio's verify pass runs alongside the load: the storage is exercised under load.
        running: dict[str, Future] = {c.name: pool.submit(c.collect, ctx)
                                      for c in self.collectors if c.concurrent}
        records = self.load.run(index, seconds)
        end = self.clock.now()  # the load's end: a slow fio pass must not dilute throughput
        health = {name: _result(f) for name, f in running.items()}
        ctx = ctx.model_copy(update={"end": end})
        for collector in self.collectors:
            if not collector.concurrent:
                health[collector.name] = _guarded(collector, ctx)
        window = window_record(index, start, end, records,
                               {c.name: health[c.name] for c in self.collectors})
        self.soak.commit_window(self.run_id, window, records, heartbeat=time.time())
        self.committed.append(window)
        if self.on_window:
            self.on_window(window, self.status())
        return window


def _guarded(collector: Collector, ctx: WindowContext) -> HealthReading:
    # One broken collector must not lose the window: its failure is that window's reading.
    try:
        return collector.collect(ctx)
    except Exception as exc:  # noqa: BLE001 - any collector bug becomes an ERROR reading
        return HealthReading.failed(f"{type(exc).__name__}: {exc}")


def _result(future: Future) -> HealthReading:
    try:
        return future.result()
    except Exception as exc:  # noqa: BLE001 - as _guarded, for a collector run in a thread
        return HealthReading.failed(f"{type(exc).__name__}: {exc}")
