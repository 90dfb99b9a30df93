"""The checklist's answers in the run store: one row per answered item, never overwritten."""

from __future__ import annotations

from ._record import ChecklistAnswer
from ._store import Store

SCHEMA = """
CREATE TABLE IF NOT EXISTS checklist_answers (
    id INTEGER PRIMARY KEY, checklist_id TEXT NOT NULL, gate TEXT NOT NULL,
    item_id TEXT NOT NULL, body TEXT NOT NULL, UNIQUE (checklist_id, item_id));
"""


class ChecklistStore:
    """Checklist answers keyed by the checklist run's id, in a Store's SQLite file."""

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
