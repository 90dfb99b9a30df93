"""The sweep's own tables in the run's SQLite store: its plan, and each point as it finished.

A point is committed whole before the next size starts, so a sweep killed mid-way loses at most
the size it was measuring; `kvgate sweep --resume RUN_ID` reads the plan back and measures the
sizes that have no point yet.
"""

from __future__ import annotations

from pydantic import BaseModel

from ..inference import SweepPoint
from ..model import SweepSize
from ..store import Store

SCHEMA = """
CREATE TABLE IF NOT EXISTS sweep_plans (
    run_id TEXT PRIMARY KEY REFERENCES runs, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sweep_points (
    run_id TEXT NOT NULL REFERENCES runs, idx INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (run_id, idx));
"""


class SweepPlan(BaseModel):
    """What a sweep was started with: read back by a resume, never recomputed."""

    run_id: str
    site_file: str
    thresholds_file: str
    sizes: list[SweepSize]
    pairs: int
    concurrency: int
    context_bytes: int
    engine: str = ""  # the engine chosen when it began: a resume must measure the same one
    # What it measures (gates.sweep.measures): site, target, arms, limits, workload; {} in a
    # plan written before kvgate kept them.
    measures: dict[str, str] = {}


class SweepStore:
    """The sweep's tables in a Store's SQLite file."""

    def __init__(self, store: Store):
        self.store, self.db = store, store.db
        if not store.read_only:  # one opened to read is asked has_table("sweep_plans") first
            self.db.executescript(SCHEMA)

    def save_plan(self, plan: SweepPlan) -> None:
        """Register the plan once; a second sweep under one run id is an error."""
        if self.plan(plan.run_id) is not None:
            raise FileExistsError(f"run {plan.run_id} already has a sweep; resume it instead")
        self.db.execute("INSERT INTO sweep_plans (run_id, body) VALUES (?, ?)",
                        (plan.run_id, plan.model_dump_json()))

    def plan(self, run_id: str) -> SweepPlan | None:
        """The stored plan of a run, or None."""
        row = self.db.execute("SELECT body FROM sweep_plans WHERE run_id = ?",
                              (run_id,)).fetchone()
        return SweepPlan.model_validate_json(row["body"]) if row else None

    def add_point(self, run_id: str, idx: int, point: SweepPoint) -> None:
        """Commit one size's point (once: a point is never replaced)."""
        with self.store.transaction():
            self.db.execute("INSERT INTO sweep_points (run_id, idx, body) VALUES (?, ?, ?)",
                            (run_id, idx, point.model_dump_json()))

    def points(self, run_id: str) -> dict[int, SweepPoint]:
        """Every committed point of a run, by its size's index in the plan."""
        rows = self.db.execute("SELECT idx, body FROM sweep_points WHERE run_id = ? "
                               "ORDER BY idx", (run_id,)).fetchall()
        return {row["idx"]: SweepPoint.model_validate_json(row["body"]) for row in rows}
