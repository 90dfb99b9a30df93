"""The checklist's state in the run store: its answers and its gate runs, never overwritten."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pydantic import BaseModel, Field

from ..core.verdicts import ChecklistAnswer, Outcome
from ..store import DB_NAME, Store, utc_now

SCHEMA = """
CREATE TABLE IF NOT EXISTS checklist_answers (
    id INTEGER PRIMARY KEY, checklist_id TEXT NOT NULL, gate TEXT NOT NULL,
    item_id TEXT NOT NULL, body TEXT NOT NULL, UNIQUE (checklist_id, item_id));
CREATE TABLE IF NOT EXISTS checklist_runs (
    checklist_id TEXT PRIMARY KEY, started TEXT NOT NULL, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS checklist_gates (
    id INTEGER PRIMARY KEY, checklist_id TEXT NOT NULL REFERENCES checklist_runs,
    gate TEXT NOT NULL, run_id TEXT NOT NULL, body TEXT NOT NULL, created TEXT NOT NULL);
"""


class ChecklistRun(BaseModel):
    """What a checklist run was started with, so `--resume` continues the same run."""

    checklist_id: str
    checklist: str  # the checklist file as given
    checklist_sha256: str
    checklist_revision: str
    site: str
    thresholds: str
    gates: list[str]
    operator: str = ""
    started: str = Field(default_factory=utc_now)


class GateAttempt(BaseModel):
    """One run of a gate's automated suite inside a checklist run, and how it ended."""

    gate: str
    run_id: str
    verdict: Outcome
    exit_code: int
    report: str  # the gate's HTML report, or "" when none was written
    note: str = ""  # why there is no record (an interrupted or crashed suite)


class ChecklistStore:
    """Checklist answers and gate runs keyed by the checklist run's id, in a Store's SQLite."""

    def __init__(self, store: Store):
        self.db = store.db
        self.db.executescript(SCHEMA)

    def save(self, checklist_id: str, answer: ChecklistAnswer) -> None:
        """Store one answer the moment it is given; answering an item twice is an error."""
        self.db.execute("INSERT INTO checklist_answers (checklist_id, gate, item_id, body) "
                        "VALUES (?,?,?,?)", (checklist_id, answer.gate, answer.item_id,
                                             answer.model_dump_json()))

    def answers(self, checklist_id: str, gate: str | None = None) -> list[ChecklistAnswer]:
        """The answers of a checklist run (of one gate, if given) in the order given."""
        query = "SELECT body FROM checklist_answers WHERE checklist_id = ?" + (
            " AND gate = ?" if gate else "") + " ORDER BY id"
        rows = self.db.execute(query, (checklist_id, gate) if gate else (checklist_id,))
        return [ChecklistAnswer.model_validate_json(r["body"]) for r in rows]

    def begin(self, run: ChecklistRun) -> None:
        """Register a new checklist run; an id already in the store is a ValueError."""
        try:
            self.db.execute("INSERT INTO checklist_runs (checklist_id, started, body) "
                            "VALUES (?,?,?)", (run.checklist_id, run.started,
                                               run.model_dump_json()))
        except sqlite3.IntegrityError:
            raise ValueError(f"checklist {run.checklist_id} is already in the store") from None

    def run(self, checklist_id: str) -> ChecklistRun | None:
        """A checklist run's starting facts, or None when the store does not know the id."""
        row = self.db.execute("SELECT body FROM checklist_runs WHERE checklist_id = ?",
                              (checklist_id,)).fetchone()
        return ChecklistRun.model_validate_json(row["body"]) if row else None

    def latest_ids(self, limit: int = 5) -> list[str]:
        """The newest checklist ids, newest first (to name them when an id is unknown)."""
        rows = self.db.execute("SELECT checklist_id FROM checklist_runs ORDER BY started DESC, "
                               "checklist_id DESC LIMIT ?", (limit,))
        return [r["checklist_id"] for r in rows]

    def add_attempt(self, checklist_id: str, attempt: GateAttempt) -> None:
        """Record how one gate run of the checklist ended."""
        self.db.execute("INSERT INTO checklist_gates (checklist_id, gate, run_id, body, created) "
                        "VALUES (?,?,?,?,?)", (checklist_id, attempt.gate, attempt.run_id,
                                               attempt.model_dump_json(), utc_now()))

    def attempts(self, checklist_id: str) -> list[GateAttempt]:
        """Every gate run of a checklist run, oldest first."""
        rows = self.db.execute("SELECT body FROM checklist_gates WHERE checklist_id = ? "
                               "ORDER BY id", (checklist_id,))
        return [GateAttempt.model_validate_json(r["body"]) for r in rows]

    def passed(self, checklist_id: str) -> dict[str, GateAttempt]:
        """The gates of a checklist run whose suite passed, with the passing run."""
        return {a.gate: a for a in self.attempts(checklist_id) if a.verdict is Outcome.PASS}


def unknown_checklist(out: Path, checklist_id: str) -> str:
    """Why --checklist-id names no checklist run in the store under out ("" when it names one):
    refused before any gate runs, as its reports would carry no answers and not say so."""
    db = Path(out) / DB_NAME
    if not db.is_file():
        return (f"--checklist-id {checklist_id}: there is no store {db} to hold its answers "
                "(give --out the folder of the checklist run)")
    with Store(out) as store:
        answers = ChecklistStore(store)
        if answers.run(checklist_id) is not None:
            return ""
        known = ", ".join(answers.latest_ids()) or "none"
    return f"--checklist-id {checklist_id}: no checklist run of that id in {db} (newest: {known})"
