"""The soak's own tables in the run's SQLite store: plan, windows, deviations, and samples.

Four tables of our own (plan, windows, deviations, the runner's mark) plus ``samples`` rows
per signal (gate "g4", series "g4.<signal>", t = window end) and the window's ``requests``,
all in one transaction with the runner's heartbeat: a window is in the store whole or not at
all. A resume reads them back; `kvgate soak status` reads the mark (gates.soak.liveness).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.verdicts import RequestRecord
from ..store import Store
from .liveness import RunnerMark
from .rules import GATE, SoakDeviation, SoakPlan, WindowRecord

SCHEMA = """
CREATE TABLE IF NOT EXISTS soak_plans (
    run_id TEXT PRIMARY KEY REFERENCES runs, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS soak_windows (
    run_id TEXT NOT NULL REFERENCES runs, idx INTEGER NOT NULL, start REAL NOT NULL,
    end REAL NOT NULL, body TEXT NOT NULL, PRIMARY KEY (run_id, idx));
CREATE TABLE IF NOT EXISTS soak_deviations (
    id INTEGER PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS soak_runners (
    run_id TEXT PRIMARY KEY REFERENCES runs, pid INTEGER NOT NULL, created REAL NOT NULL,
    host TEXT NOT NULL, heartbeat REAL NOT NULL, state TEXT NOT NULL, reason TEXT NOT NULL);
"""


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
        # A store opened to read (soak status) cannot create tables: one that has none has no
        # soak, and says so instead of failing on a missing table.
        self.present = store.has_table("soak_plans") if store.read_only else True
        if not store.read_only:
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
                              ).fetchone() if self.present else None
        return row["run_id"] if row else ""

    def plan(self, run_id: str) -> SoakPlan | None:
        """The stored plan of a run, or None."""
        row = self.db.execute("SELECT body FROM soak_plans WHERE run_id = ?",
                              (run_id,)).fetchone() if self.present else None
        return SoakPlan.model_validate_json(row["body"]) if row else None

    def mark_runner(self, run_id: str, mark: RunnerMark) -> None:
        """Record who runs the soak now (a start or a resume), replacing the earlier runner."""
        self.db.execute("INSERT OR REPLACE INTO soak_runners (run_id, pid, created, host, "
                        "heartbeat, state, reason) VALUES (?,?,?,?,?,?,?)",
                        (run_id, mark.pid, mark.created, mark.host, mark.heartbeat, mark.state,
                         mark.reason))

    def end_runner(self, run_id: str, state: str, heartbeat: float, reason: str = "") -> None:
        """The runner returned: finished, or stopped early (and why)."""
        self.db.execute("UPDATE soak_runners SET state = ?, heartbeat = ?, reason = ? "
                        "WHERE run_id = ?", (state, heartbeat, reason, run_id))

    def runner(self, run_id: str) -> RunnerMark | None:
        """The soak's runner mark, or None (a soak started before kvgate kept one)."""
        fields = ("pid", "created", "host", "heartbeat", "state", "reason")
        row = self.db.execute(f"SELECT {', '.join(fields)} FROM soak_runners WHERE run_id = ?",
                              (run_id,)).fetchone()
        return RunnerMark(**dict(zip(fields, row, strict=True))) if row else None

    def commit_window(self, run_id: str, window: WindowRecord,
                      records: Sequence[RequestRecord] = (),
                      heartbeat: float | None = None) -> None:
        """The window row, its samples, its requests and the runner's heartbeat, at once."""
        phase = f"{GATE}-window-{window.index:05d}"
        with self.store.transaction():
            if heartbeat is not None:
                self.db.execute("UPDATE soak_runners SET heartbeat = ? WHERE run_id = ?",
                                (heartbeat, run_id))
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

    def windows(self, run_id: str) -> list[WindowRecord]:
        """Committed windows in order."""
        rows = self.db.execute("SELECT body FROM soak_windows WHERE run_id = ? ORDER BY idx",
                               (run_id,))
        return [WindowRecord.model_validate_json(r["body"]) for r in rows]

    def add_deviation(self, run_id: str, deviation: SoakDeviation) -> None:
        """Record a deviation (a gap) the moment it is known."""
        self.db.execute("INSERT INTO soak_deviations (run_id, body) VALUES (?, ?)",
                        (run_id, deviation.model_dump_json()))

    def deviations(self, run_id: str) -> list[SoakDeviation]:
        """The plan's deviations (shortened, window) and every recorded gap, in order."""
        plan = self.plan(run_id)
        rows = self.db.execute("SELECT body FROM soak_deviations WHERE run_id = ? ORDER BY id",
                               (run_id,))
        return (plan.deviations() if plan else []) + [
            SoakDeviation.model_validate_json(r["body"]) for r in rows]
