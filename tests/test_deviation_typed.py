"""Issue #43: a deviation's effect on ACCEPT is its typed Cause, never how its text begins.

Before, every reader (summary, waivers, the chain's simulated/shortened marks, the session's
FORCED flag, compare) classified a deviation by the first words of its text: a blocking finding
reworded to begin "shortened" became an unwaivable rehearsal mark and no longer blocked, and a
real shortened soak reworded lost its mark. Records written before deviations were typed carry
bare text: they still load with the causes they had, and still hash as they were sealed.
"""

import json
from pathlib import Path

import pytest
from _chain import SITE, add_gate, full_chain
from jsonschema import Draft202012Validator

from gates.cli import main, record_schema
from gates.core.verdicts import Cause, Deviation, Effect, GateRecord
from gates.core.verdicts.deviation import CAUSES, causes_table
from gates.options import RunOptions
from gates.report import build_summary, write_summary
from gates.report.record_check import EXTRA_KEYS, record_digest
from gates.report.summary import ACCEPT, NOT_READY
from gates.report.verification import verify
from gates.report.waivers import WaiverRefused, choose_deviation
from gates.session import GateSession
from gates.store import Store

DATA = Path(__file__).resolve().parent / "data"
# A G3 record as kvgate wrote it before deviations were typed (tests/data/golden/g3_record.json
# at f650b15): its one deviation is bare text, "FORCED: run despite the upstream gate: …".
OLD_RECORD = DATA / "records" / "g3_untyped_deviations.json"


def chain_with(store, run_id="r1", **deviations):
    """A passing G1→G4 chain in one run; deviations={gate: [Deviation, …]} on those records."""
    full_chain(store, run_id, gates=("g1",))
    below = store.record(run_id, "g1")
    for gate in ("g2", "g3", "g4"):
        below = add_gate(store, run_id, gate, cites=below, deviations=deviations.get(gate, []))


# ---- rewording does not change the effect -------------------------------------------------

def test_a_blocking_finding_worded_like_a_shortened_soak_still_blocks(tmp_path):
    reworded = Deviation(cause=Cause.LIMITS_CHANGED,
                         text="shortened note: thresholds.toml's SHA-256 differs from G2's")
    with Store(tmp_path / "out") as store:
        chain_with(store, g3=[reworded])
        summary = build_summary(store, SITE, "r1")
        assert summary.recommendation.status == NOT_READY
        assert [r.split(":")[0] for r in summary.recommendation.reasons] == [
            "open deviation (G3, run r1)"]
        assert not summary.chain[2].shortened
        [found] = summary.deviations
        assert found.open and found.kind == Effect.BLOCKING
        assert choose_deviation(summary.deviations, "shortened note") is found


def test_a_shortened_soak_in_any_words_is_a_rehearsal_mark_nobody_can_waive(tmp_path):
    reworded = Deviation(cause=Cause.SHORTENED, text="this soak ran 2 h of the 72 h sign-off")
    with Store(tmp_path / "out") as store:
        chain_with(store, g4=[reworded])
        summary = build_summary(store, SITE, "r1")
    assert summary.chain[3].shortened
    assert summary.recommendation.reasons == ["shortened rehearsal: G4"]
    assert not summary.deviations[0].open and summary.deviations[0].kind == Effect.REHEARSAL
    with pytest.raises(WaiverRefused, match="is a rehearsal mark"):
        choose_deviation(summary.deviations, "this soak ran")


def test_a_simulated_engine_in_other_words_is_still_simulated(tmp_path):
    sim = Deviation(cause=Cause.SIMULATED_ENGINE, text="the arms ran kvgate's own model server")
    with Store(tmp_path / "out") as store:
        chain_with(store, g2=[sim], g3=[sim])
        summary = build_summary(store, SITE, "r1")
    assert [link.simulated for link in summary.chain] == [False, True, True, False]
    assert summary.recommendation.reasons == ["simulated engine: G2, G3"]


def test_a_note_worded_like_a_blocking_finding_does_not_block(tmp_path):
    note = Deviation(cause=Cause.NO_PREDICTION, text="limits changed since G1? no: unknown model")
    with Store(tmp_path / "out") as store:
        chain_with(store, g2=[note])
        assert build_summary(store, SITE, "r1").recommendation.status == ACCEPT


SESSION_SITE = """
[site]
name = "Typed site"

[target]
directory = "target"
create = true

[fio]
file_size = "1GiB"
"""


def test_the_forced_flag_is_the_cause_not_the_words(tmp_path):
    (tmp_path / "site.toml").write_text(SESSION_SITE)
    session = GateSession.open(RunOptions(site=tmp_path / "site.toml", out=tmp_path / "out",
                                          run_id="r1"))
    try:
        session.deviate("g1", Deviation(cause=Cause.FORCED, text="ran although G0 was red"))
        session.deviate("g1", Deviation(cause=Cause.OTHER_IO, text="FORCED: words, no force"))
        session.started["g1"] = "2026-12-06T08:00:00Z"
        session.finish_gate("g1")
        record = session.finished["g1"][0]
    finally:
        session.finish()
    assert record.forced
    assert [d.cause for d in record.deviations] == [Cause.FORCED, Cause.OTHER_IO]
    body = json.loads((tmp_path / "out" / "r1" / "g1.json").read_text())
    assert body["deviations"][0] == {"cause": "forced past upstream",
                                     "text": "ran although G0 was red"}
    assert record_digest(body) == body["record_sha256"] == record.sha256()


# ---- older records ----------------------------------------------------------------------------

def test_an_older_record_s_bare_text_loads_with_the_cause_it_had_and_still_verifies(tmp_path):
    body = json.loads(OLD_RECORD.read_text())
    assert body["deviations"] == ["FORCED: run despite the upstream gate: G2 ran on a Sunday"]
    record = GateRecord.model_validate({k: v for k, v in body.items() if k not in EXTRA_KEYS})
    [found] = record.deviations
    assert (found.cause, found.effect) == (Cause.FORCED, Effect.REHEARSAL)
    # Read back and written again, it is the record that was sealed: same text, same SHA-256.
    assert json.loads(record.canonical_json())["deviations"] == body["deviations"]
    assert record.sha256() == body["record_sha256"] == record_digest(body)


def test_an_older_record_with_every_legacy_class_keeps_its_causes():
    texts = {"simulated engine: the arms baseline run kvgate's reference": Cause.SIMULATED_ENGINE,
             "shortened: not a 72-hour sign-off; planned 2 min": Cause.SHORTENED,
             "limits changed since G2 (run r0): thresholds SHA-256": Cause.LIMITS_CHANGED,
             "no pre-flight prediction: unknown model": Cause.NO_PREDICTION,
             "anything nobody classified": Cause.OTHER}
    record = GateRecord(gate="g4", run_id="r", site="s", started="t", deviations=list(texts))
    assert [d.cause for d in record.deviations] == list(texts.values())
    again = GateRecord.model_validate_json(record.model_dump_json())
    assert again.deviations == record.deviations and again.sha256() == record.sha256()


def test_old_and_typed_deviations_both_validate_against_the_record_schema():
    body = json.loads(OLD_RECORD.read_text())
    typed = {**body, "deviations": [{"cause": "shortened soak", "text": "2 h of 72 h"}]}
    validator = Draft202012Validator(record_schema())
    assert [e.message for e in validator.iter_errors(body)] == []
    assert [e.message for e in validator.iter_errors(typed)] == []
    wrong = {**body, "deviations": [{"cause": "a cause nobody declared", "text": "x"}]}
    assert list(validator.iter_errors(wrong))


def test_a_typed_deviation_is_waived_by_its_whole_text_and_the_waiver_verifies(tmp_path, key):
    out = tmp_path / "out"
    text = "site changed since G2 (run r0): arms.candidate: kv_dir was '/a', is '/b'"
    with Store(out) as store:
        chain_with(store, g3=[Deviation(cause=Cause.SITE_CHANGED, text=text)])
        write_summary(store, SITE, "r1")
    assert main(["waive", "r1", "kv_dir was", "--reason", "same array, renamed mount",
                 "--by", "J. Reviewer", "--out", str(out)]) == 2  # not how it begins
    assert main(["waive", "r1", text, "--reason", "same array, renamed mount",
                 "--by", "J. Reviewer", "--out", str(out)]) == 0
    after = json.loads((out / "r1" / "summary.json").read_text())
    assert after["recommendation"]["status"] == ACCEPT
    assert after["deviations"][0]["waiver"]["waiver"]["deviation"] == text
    assert verify(out / "r1")[1] == []


def test_the_table_of_causes_is_one_row_per_cause_with_its_effect_in_words():
    lines = causes_table().split("\n")
    assert lines[:2] == ["| cause | effect on ACCEPT | what it is |", "|---|---|---|"]
    assert lines[2] == ("| `simulated engine` | **rehearsal**: never ACCEPT, cannot be waived | "
                        "the arms ran kvgate's simulator, not a real engine |")
    assert ("| `no pre-flight prediction` | **note**: does not block | G1 could not predict "
            "G3's gain for the sized model |") in lines
    assert lines[-2:] == ["| `other` | **blocking**: until re-run or waived | any other "
                          "finding that can change what a verdict means |", ""]
    assert len(lines) == 2 + len(CAUSES) + 1  # the table ends with its line's end


def test_a_bar_in_a_cause_s_words_does_not_split_its_table_cell(monkeypatch):
    monkeypatch.setitem(CAUSES, Cause.OTHER, (Effect.BLOCKING, "read | written"))
    assert causes_table().split("\n")[-2] == ("| `other` | **blocking**: until re-run or "
                                              "waived | read / written |")
