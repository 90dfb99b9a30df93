"""The checklist run's engine: prompts from a fake stdin, answers stored at once, the gate seam."""

import io
import sys

import pytest
from rich.console import Console

from gates.checklist import ChecklistStore
from gates.checklist.items import ChecklistItem, load_checklist
from gates.checklist.run import (
    ChecklistFlow,
    GateRequest,
    PromptAsker,
    attempt_from_store,
    gate_argv,
)
from gates.checklist.store import ChecklistRun, GateAttempt
from gates.core.verdicts import Measurement, Outcome
from gates.store import Store

ITEM = ChecklistItem(id="serials-match-po", question="Serials [as ordered]?", hint="PO [4711]")


def asker(text: str) -> tuple[PromptAsker, io.StringIO]:
    shown = io.StringIO()
    return PromptAsker(Console(file=shown, width=120), io.StringIO(text)), shown


def test_prompt_takes_short_forms_and_asks_again_on_nonsense():
    ask, shown = asker("maybe\nNA\n\n")
    assert ask.answer("g1", ITEM) == ("n.a.", "")
    text = shown.getvalue()
    assert "answer pass, fail or n.a." in text
    assert "Serials [as ordered]?" in text and "where to look: PO [4711]" in text


def test_prompt_insists_on_a_note_for_a_fail():
    ask, shown = asker("f\n\n   \ndrive 3 not on the PO\n")
    assert ask.answer("g1", ITEM) == ("fail", "drive 3 not on the PO")
    assert shown.getvalue().count("note (required") == 3


def test_prompt_note_is_optional_when_the_item_says_so():
    ask, _ = asker("fail\n\n")
    assert ask.answer("g1", ITEM.model_copy(update={"note_on_fail": False})) == ("fail", "")


def test_end_of_input_is_eof_never_an_endless_loop():
    ask, _ = asker("pass\n")
    with pytest.raises(EOFError):
        ask.answer("g1", ITEM)  # the note's line is missing
    with pytest.raises(EOFError):
        asker("")[0].operator("")


def test_operator_is_asked_until_named_and_enter_keeps_the_earlier_one():
    assert asker("\n  \n A. Engineer \n")[0].operator("") == "A. Engineer"
    assert asker("\n")[0].operator("B. Earlier") == "B. Earlier"


@pytest.fixture
def flow_parts(tmp_path, repo):
    checklist, sha = load_checklist(repo / "checklist.toml")
    store = Store(tmp_path / "reports")
    answers = ChecklistStore(store)
    run = ChecklistRun(checklist_id="20261129T170000Z-aaaaaa", checklist="checklist.toml",
                       checklist_sha256=sha, checklist_revision="1", site="site.toml",
                       thresholds="thresholds.toml", gates=["g1", "g2"], operator="A. Engineer")
    answers.begin(run)
    yield checklist, answers, run, tmp_path / "reports"
    store.close()


def make_flow(parts, text: str, run_gate) -> ChecklistFlow:
    checklist, answers, run, out = parts
    ids = iter(["20261129T170001Z-000001", "20261129T170002Z-000002"])
    template = GateRequest("", "", run.checklist_id, "site.toml", "thresholds.toml", out,
                           ["-x"])
    return ChecklistFlow(checklist, answers, run, asker(text)[0], run_gate,
                         Console(file=io.StringIO()), template, operator="A. Engineer",
                         new_run_id=lambda: next(ids))


def test_answers_are_stored_before_the_suite_runs(flow_parts):
    _, answers, run, out = flow_parts
    seen = []

    def run_gate(request):
        seen.append((request, [a.item_id for a in answers.answers(run.checklist_id)]))
        return GateAttempt(gate=request.gate, run_id=request.run_id, verdict=Outcome.PASS,
                           exit_code=0, report="")
    flow = make_flow(flow_parts, "p\n\n" * 5 + "p\n\n" * 4, run_gate)
    assert flow.run_all(["g1", "g2"]) is None
    (g1, stored_g1), (g2, stored_g2) = seen
    assert (g1.gate, g1.run_id, g1.checklist_id, g1.out, g1.pytest_args) == (
        "g1", "20261129T170001Z-000001", run.checklist_id, out, ["-x"])
    assert len(stored_g1) == 5 and len(stored_g2) == 9 and g2.gate == "g2"
    first = answers.answers(run.checklist_id, "g1")[0]
    assert (first.operator, first.answer, first.text) == (
        "A. Engineer", "pass", "Do the array's and the drives' serial numbers match the "
        "purchase order and delivery note?")
    assert set(answers.passed(run.checklist_id)) == {"g1", "g2"}


def test_failed_manual_item_stops_before_the_suite(flow_parts):
    _, answers, run, _ = flow_parts

    def run_gate(request):
        raise AssertionError("the suite must not run after a failed manual item")
    stop = make_flow(flow_parts, "f\nserial missing\n" + "p\n\n" * 4, run_gate).run_all(["g1"])
    assert stop.gate == "g1" and stop.exit_code == 1 and stop.attempt is None
    assert [a.item_id for a in stop.failed] == ["g1.serials-match-po"]
    assert len(answers.answers(run.checklist_id, "g1")) == 5  # the gate's items all answered


def test_failed_suite_is_recorded_and_stops(flow_parts):
    _, answers, run, _ = flow_parts

    def run_gate(request):
        return GateAttempt(gate=request.gate, run_id=request.run_id, verdict=Outcome.BLOCKED,
                           exit_code=3, report="r/g1.html")
    stop = make_flow(flow_parts, "p\n\n" * 5, run_gate).run_all(["g1", "g2"])
    assert stop.gate == "g1" and stop.exit_code == 3 and stop.attempt.verdict is Outcome.BLOCKED
    assert [a.gate for a in answers.attempts(run.checklist_id)] == ["g1"]
    assert answers.answers(run.checklist_id, "g2") == []


def test_gate_argv_is_kvgate_run_with_the_checklist_id():
    request = GateRequest("g2", "RID", "CID", "s.toml", "t.toml", "out", ["-k", "x"])
    assert gate_argv(request) == [
        sys.executable, "-m", "gates.cli", "run", "g2", "--run-id", "RID", "--checklist-id",
        "CID", "--site", "s.toml", "--thresholds", "t.toml", "--out", "out", "--", "-k", "x"]
    assert "--" not in gate_argv(GateRequest("g1", "R", "C", "s", "t", "o"))


def test_attempt_is_read_from_the_gate_record(tmp_path):
    from gates.core.verdicts import GateRecord
    out = tmp_path / "reports"
    request = GateRequest("g1", "20261129T170000Z-bbbbbb", "CID", "s", "t", out)
    missing = attempt_from_store(request, -2)
    assert missing.verdict is Outcome.ERROR and missing.exit_code == -2
    assert "wrote no G1 record" in missing.note
    with Store(out) as store:
        store.begin_run(request.run_id, "site")
        store.save_record(GateRecord(gate="g1", run_id=request.run_id, site="site",
                                     started="t", measurements=[Measurement(
                                         name="m", value=1.0, unit="", outcome=Outcome.FAIL)]))
    found = attempt_from_store(request, 1)
    assert (found.verdict, found.exit_code, found.report) == (Outcome.FAIL, 1, "")
