"""The checklist's tables in the run store: runs, answers and gate attempts, never overwritten."""

import sqlite3

import pytest

from gates.checklist import ChecklistStore
from gates.checklist.store import ChecklistRun, GateAttempt
from gates.core.verdicts import ChecklistAnswer, Outcome
from gates.store import Store

CID = "20261129T170000Z-aaaaaa"


@pytest.fixture
def answers(tmp_path):
    with Store(tmp_path) as store:
        found = ChecklistStore(store)
        found.begin(ChecklistRun(checklist_id=CID, checklist="c.toml", checklist_sha256="0",
                                 checklist_revision="1", site="s.toml", thresholds="t.toml",
                                 gates=["g1", "g2"], operator="A. Engineer"))
        yield found


def attempt(gate: str, verdict: Outcome, run_id: str) -> GateAttempt:
    return GateAttempt(gate=gate, run_id=run_id, verdict=verdict, exit_code=0, report="")


def test_run_is_registered_once_and_read_back(answers, tmp_path):
    run = answers.run(CID)
    assert run.gates == ["g1", "g2"] and run.operator == "A. Engineer"
    with pytest.raises(ValueError, match=f"checklist {CID} is already in the store"):
        answers.begin(run)
    assert answers.run("20260101T000000Z-000000") is None
    with Store(tmp_path) as again:  # a second connection sees it: it was committed at once
        assert ChecklistStore(again).latest_ids() == [CID]


def test_an_item_is_answered_once(answers):
    given = ChecklistAnswer(gate="g1", item_id="g1.a", text="?", answer="pass", operator="x",
                            answered_at="2026-11-29T17:00:00+00:00")
    answers.save(CID, given)
    with pytest.raises(sqlite3.IntegrityError):
        answers.save(CID, given.model_copy(update={"answer": "fail"}))
    assert answers.answers(CID) == [given] and answers.answers(CID, "g2") == []


def test_passed_gates_are_those_with_a_passing_attempt(answers):
    answers.add_attempt(CID, attempt("g1", Outcome.PASS, "r1"))
    answers.add_attempt(CID, attempt("g2", Outcome.FAIL, "r2"))
    answers.add_attempt(CID, attempt("g2", Outcome.PASS, "r3"))
    assert [a.run_id for a in answers.attempts(CID)] == ["r1", "r2", "r3"]
    assert {g: a.run_id for g, a in answers.passed(CID).items()} == {"g1": "r1", "g2": "r3"}


def test_attempt_of_an_unknown_checklist_run_is_refused(answers):
    with pytest.raises(sqlite3.IntegrityError):
        answers.add_attempt("20260101T000000Z-000000", attempt("g1", Outcome.PASS, "r"))
