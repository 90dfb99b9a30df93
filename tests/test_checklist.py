"""The checklist file and answers files: parsing, validation errors, and the answers check."""

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gates.checklist.items import (
    AnswersFile,
    answer_problems,
    load_answers,
    load_checklist,
    parse_gates,
    tally,
)
from gates.core.configuration import ConfigError
from gates.core.verdicts import GATES, ChecklistAnswer

ANSWERS = Path(__file__).parent / "data" / "checklist"
ITEM = '[meta]\nrevision = "1"\n\n[[g1]]\nid = "serials-match-po"\nquestion = "Serials?"\n'


@pytest.fixture
def shipped(repo):
    return load_checklist(repo / "checklist.toml")[0]


def _error(tmp_path, text: str, name: str = "checklist.toml") -> str:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_checklist(path)
    assert str(path) in str(caught.value)
    return str(caught.value)


def test_shipped_checklist_has_a_few_items_per_gate_with_unique_ids(shipped):
    for gate in GATES:
        assert 3 <= len(shipped.items(gate)) <= 5, gate
    ids = shipped.item_ids()
    assert len(ids) == len(set(ids)) and "g1.serials-match-po" in ids
    assert all(item.question.endswith("?") and item.hint for g in GATES
               for item in shipped.items(g))


def test_misspelt_item_key_is_named_with_a_suggestion(tmp_path):
    message = _error(tmp_path, ITEM.replace("question", "questoin"))
    assert "unknown key 'g1[0].questoin' — did you mean 'question'?" in message
    assert "missing key 'g1[0].question'" in message


def test_unknown_gate_table_is_named(tmp_path):
    assert "unknown key 'g5'" in _error(tmp_path, ITEM.replace("[[g1]]", "[[g5]]"))


def test_bad_item_id_names_key_and_value(tmp_path):
    message = _error(tmp_path, ITEM.replace('"serials-match-po"', '"Serials match"'))
    assert "key 'g1[0].id'" in message and "'Serials match'" in message


def test_duplicate_item_id_in_a_gate_is_refused(tmp_path):
    message = _error(tmp_path, ITEM + ITEM.split("\n\n", 1)[1])
    assert "key 'g1'" in message and "'serials-match-po' used more than once" in message


def test_note_on_fail_must_be_a_boolean(tmp_path):
    message = _error(tmp_path, ITEM + 'note_on_fail = "sometimes"\n')
    assert "key 'g1[0].note_on_fail'" in message and "'sometimes'" in message


def test_missing_revision_and_broken_toml(tmp_path):
    assert "missing key 'meta.revision'" in _error(tmp_path, ITEM.replace('revision = "1"', ""))
    assert "not valid TOML" in _error(tmp_path, ITEM + "question = \n")
    with pytest.raises(ConfigError, match="file not found"):
        load_checklist(tmp_path / "absent.toml")


def test_answers_file_in_toml_and_json_with_the_shorthand():
    toml = load_answers(ANSWERS / "answers-all.toml")
    assert toml.operator == "A. Engineer" and len(toml.answers) == 15
    assert toml.answers["g1.firmware-recorded"].answer == "pass"
    assert toml.answers["g1.ports-match-order"].answer == "n.a."
    assert toml.answers["g1.ports-match-order"].note == "local disk rehearsal: no storage NICs"
    json_file = load_answers(ANSWERS / "answers-g1.json")
    assert json_file.operator == "B. Field-Engineer"
    assert json_file.answers["g1.layout-matches-order"].answer == "n.a."


def test_answers_file_errors_name_file_key_and_value(tmp_path):
    path = tmp_path / "answers.json"
    path.write_text(json.dumps({"operator": " ", "answers": {"g1.a": {"answer": "yes"}},
                                "operater": "x"}))
    with pytest.raises(ConfigError) as caught:
        load_answers(path)
    message = str(caught.value)
    assert str(path) in message and "unknown key 'operater' — did you mean 'operator'?" in message
    assert "key 'answers.g1.a.answer'" in message and "'yes'" in message
    assert "key 'operator'" in message and "blank" in message
    path.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="must hold an object"):
        load_answers(path)


def test_answer_problems_name_missing_unknown_and_unexplained_fails(shipped):
    problems = answer_problems(shipped, load_answers(ANSWERS / "answers-typos.toml"), ["g1"],
                               set())
    assert problems == [
        "no answer for g1.serials-match-po, g1.layout-matches-order, g1.ports-match-order "
        "(every item of the gates g1 needs one)",
        "unknown item id 'g1.serial-matches-po' in [answers] — did you mean "
        "'g1.serials-match-po'?",
        "key 'answers.g1.cabling-photographed': answered fail without a note; this item "
        "needs one"]


def test_answer_problems_skip_items_answered_earlier_and_other_gates(shipped):
    given = AnswersFile(operator="x", answers={"g2.gpu-recorded": {"answer": "pass"}})
    done = {i for i in shipped.item_ids(["g1"])}
    assert answer_problems(shipped, given, ["g1"], done) == []
    assert answer_problems(shipped, load_answers(ANSWERS / "answers-all.toml"),
                           list(GATES), set()) == []


def test_parse_gates_orders_and_suggests():
    assert parse_gates("g3, G1") == ["g1", "g3"]
    with pytest.raises(ValueError, match="unknown gate 'g11' — did you mean 'g1'"):
        parse_gates("g1,g11")
    with pytest.raises(ValueError, match="at least one"):
        parse_gates(" , ")


@given(st.text(max_size=30))
def test_parse_gates_never_crashes(text):
    try:
        gates = parse_gates(text)
    except ValueError:
        return
    assert gates and all(g in GATES for g in gates) and gates == sorted(set(gates))


@given(st.binary(max_size=200))
def test_answers_loader_turns_any_bytes_into_answers_or_a_config_error(tmp_path_factory, raw):
    path = tmp_path_factory.mktemp("answers") / "answers.toml"
    path.write_bytes(raw)
    try:
        assert isinstance(load_answers(path), AnswersFile)
    except ConfigError as exc:
        assert str(path) in str(exc)


def test_tally_counts_each_answer():
    def answer(a):
        return ChecklistAnswer(gate="g1", item_id=f"g1.{a}", text="?", answer=a, operator="x",
                               answered_at="2026-11-29T17:00:00+00:00")
    assert tally([answer("pass"), answer("pass"), answer("n.a.")]) == "2 pass, 1 n.a."
    assert tally([]) == "none"
