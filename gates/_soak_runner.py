"""The G4 soak runner: windows of load plus health readings, each committed before the next.

Seams: a Clock (real or fake), a LoadDriver (the real one drives endpoints with multi-turn
sessions), health Collectors (gates._health). Storage: three tables of our own in the run's
SQLite store (plan, windows, deviations) plus ``samples`` rows per signal (gate "g4",
series "g4.<signal>", t = window end) and the window's ``requests``, all in one transaction:
a window is in the store whole or not at all. A resume reads them back.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

import aiohttp
from pydantic import BaseModel

from ._health import Collector, WindowContext
from ._loadgen import READ_BUFFER, Endpoint, LoadSettings, send
from ._metrics import stats, ttft
from ._requests import RequestOutcome, RequestRecord
from ._settings import G4Limits
from ._soak import GATE, Deviation, HealthReading, SoakPlan, WindowRecord, gap, soak_measurements
from ._store import Store
from ._verdict import Measurement
from ._workloads import Plan, PlannedRequest

SCHEMA = """
CREATE TABLE IF NOT EXISTS soak_plans (
    run_id TEXT PRIMARY KEY REFERENCES runs, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS soak_windows (
    run_id TEXT NOT NULL REFERENCES runs, idx INTEGER NOT NULL, start REAL NOT NULL,
    end REAL NOT NULL, body TEXT NOT NULL, PRIMARY KEY (run_id, idx));
CREATE TABLE IF NOT EXISTS soak_deviations (
    id INTEGER PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs, body TEXT NOT NULL);
"""


class Clock(Protocol):
    """Seconds since the epoch, and a way to wait."""

    def now(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class RealClock:
    """The wall clock: epoch seconds, so windows line up with kernel log timestamps."""

    def now(self) -> float:
        """time.time()."""
        return time.time()

    def sleep(self, seconds: float) -> None:
        """time.sleep()."""
        time.sleep(seconds)


class FakeClock:
    """Test double: time moves only when someone sleeps or advances it."""

    def __init__(self, t: float = 1_800_000_000.0):
        self.t = t

    def now(self) -> float:
        """The fake time."""
        return self.t

    def sleep(self, seconds: float) -> None:
        """Advance the fake time."""
        self.t += max(0.0, seconds)


class LoadDriver(Protocol):
    """Keeps the operating point loaded for ``seconds``; returns every finished request."""

    def run(self, index: int, seconds: float) -> list[RequestRecord]: ...


# ---- the store ----------------------------------------------------------------------------

def _series(w: WindowRecord) -> dict[str, float]:
    """The window's figures as named samples; missing values are not stored (no fake zeros)."""
    out = {"requests": w.requests, "errors": w.errors, "timeouts": w.timeouts,
           "throughput": w.throughput, "ttft_p50": w.ttft_p50, "ttft_p99": w.ttft_p99}
    for name, reading in w.health.items():
        out.update({f"{name}.{k}": v for k, v in reading.values.items()})
    return {f"{GATE}.{k}": float(v) for k, v in out.items() if v is not None}


class SoakStore:
    """The soak's tables in a Store's SQLite file."""

    def __init__(self, store: Store):
        self.store, self.db = store, store.db
        self.db.executescript(SCHEMA)

    def save_plan(self, plan: SoakPlan) -> None:
        """Register the plan once; a second soak under one run id is an error."""
        if self.store.run(plan.run_id) is None:
            raise ValueError(f"run {plan.run_id} is not in the store: begin the run first")
        if self.plan(plan.run_id) is not None:
            raise FileExistsError(f"run {plan.run_id} already has a soak; resume it instead")
        self.db.execute("INSERT INTO soak_plans (run_id, body) VALUES (?, ?)",
                        (plan.run_id, plan.model_dump_json()))

    def latest(self) -> str:
        """The run id of the newest soak, or ""."""
        row = self.db.execute("SELECT run_id FROM soak_plans ORDER BY rowid DESC LIMIT 1"
                              ).fetchone()
        return row["run_id"] if row else ""

    def plan(self, run_id: str) -> SoakPlan | None:
        """The stored plan of a run, or None."""
        row = self.db.execute("SELECT body FROM soak_plans WHERE run_id = ?",
                              (run_id,)).fetchone()
        return SoakPlan.model_validate_json(row["body"]) if row else None

    def commit_window(self, run_id: str, window: WindowRecord,
                      records: Sequence[RequestRecord] = ()) -> None:
        """The window row, its samples and its requests, in one transaction."""
        phase = f"{GATE}-window-{window.index:05d}"
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute("INSERT INTO soak_windows (run_id, idx, start, end, body) "
                            "VALUES (?,?,?,?,?)", (run_id, window.index, window.start,
                                                   window.end, window.model_dump_json()))
            self.db.executemany(
                "INSERT INTO samples (run_id, gate, series, t, value) VALUES (?,?,?,?,?)",
                [(run_id, GATE, k, window.end, v) for k, v in _series(window).items()])
            self.db.executemany(
                "INSERT INTO requests (run_id, phase, outcome, body) VALUES (?,?,?,?)",
                [(run_id, phase, r.outcome.value, r.model_copy(update={"phase": phase})
                  .model_dump_json()) for r in records])
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def windows(self, run_id: str) -> list[WindowRecord]:
        """Committed windows in order."""
        rows = self.db.execute("SELECT body FROM soak_windows WHERE run_id = ? ORDER BY idx",
                               (run_id,))
        return [WindowRecord.model_validate_json(r["body"]) for r in rows]

    def add_deviation(self, run_id: str, deviation: Deviation) -> None:
        """Record a deviation (a gap) the moment it is known."""
        self.db.execute("INSERT INTO soak_deviations (run_id, body) VALUES (?, ?)",
                        (run_id, deviation.model_dump_json()))

    def deviations(self, run_id: str) -> list[Deviation]:
        """The plan's deviations (shortened, window) and every recorded gap, in order."""
        plan = self.plan(run_id)
        rows = self.db.execute("SELECT body FROM soak_deviations WHERE run_id = ? ORDER BY id",
                               (run_id,))
        return (plan.deviations() if plan else []) + [
            Deviation.model_validate_json(r["body"]) for r in rows]


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


def status(plan: SoakPlan, windows: list[WindowRecord], deviations: list[Deviation]) -> SoakStatus:
    """Progress, ETA and the last window's health. Pure."""
    effective = sum(w.seconds for w in windows)
    return SoakStatus(run_id=plan.run_id, committed=len(windows), planned=plan.windows,
                      effective_s=effective,
                      gap_s=sum(d.seconds for d in deviations if d.kind == "gap"),
                      eta_s=max(0.0, plan.duration - effective), shortened=plan.shortened,
                      health={k: r.status for k, r in windows[-1].health.items()}
                      if windows else {})


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
        return cls(store, plan.run_id, load, **kw)

    @classmethod
    def resume(cls, store: Store, run_id: str, load: LoadDriver, **kw) -> SoakRunner:
        """Continue after a crash: the gap since the last committed window is a deviation."""
        runner = cls(store, run_id, load, **kw)
        if len(runner.committed) >= runner.plan.windows:
            return runner  # finished: nothing to resume, no gap
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
        """Every G4 rule over what is committed (see gates._soak.soak_measurements)."""
        return soak_measurements(self.committed, self.soak.deviations(self.run_id), self.plan,
                                 limits, **kw)

    def run(self, max_windows: int | None = None) -> SoakStatus:
        """Run the remaining windows (at most max_windows of them) and return the status."""
        committed = self.committed
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
        self.soak.commit_window(self.run_id, window, records)
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


# ---- the real load: endpoints driven with multi-turn sessions -----------------------------

class EndpointLoad:
    """Closed loop at the operating point: ``concurrency`` workers, each sending one session's
    turns in order (turn n after turn n-1 finished), then the next session, until the window's
    time is up. ``plans(cycle)`` gives each pass over the sessions fresh prompts, so the KV tier
    keeps being written as well as read; a fixed Plan repeats (reads only, after the first)."""

    def __init__(self, endpoints: Sequence[Endpoint], plans: Plan | Callable[[int], Plan],
                 settings: LoadSettings):
        self.endpoints, self.settings = list(endpoints), settings
        self.plans = plans if callable(plans) else (lambda cycle: plans)
        self.cycle, self.queue = 0, []

    def _next_session(self) -> list[PlannedRequest]:
        if not self.queue:
            plan = self.plans(self.cycle)
            self.cycle += 1
            groups: dict[str, list[PlannedRequest]] = {}
            for r in plan.requests:
                groups.setdefault(r.session or r.request_id, []).append(r)
            self.queue = [sorted(g, key=lambda r: r.turn or 0) for g in groups.values()]
        return self.queue.pop(0)

    def run(self, index: int, seconds: float) -> list[RequestRecord]:
        """Requests until ``seconds`` have passed; in-flight ones are let finish."""
        return asyncio.run(self._window(seconds))

    async def _window(self, seconds: float) -> list[RequestRecord]:
        records: list[RequestRecord] = []
        deadline = time.monotonic() + seconds
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=60)
        async with aiohttp.ClientSession(connector=connector,
                                         read_bufsize=READ_BUFFER) as http:
            origin = time.perf_counter_ns()

            async def worker(k: int) -> None:
                while time.monotonic() < deadline:
                    for turn in self._next_session():
                        if time.monotonic() >= deadline:
                            return  # the rest of this session is abandoned, not half-sent
                        endpoint = self.endpoints[k % len(self.endpoints)]
                        records.append(await send(http, endpoint, turn, self.settings, origin))

            await asyncio.gather(*(worker(k) for k in range(self.settings.concurrency)))
        return records
