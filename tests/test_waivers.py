"""Issue #25 item 14: ACCEPT means nothing is open.

Before the fix the procurement summary recommended ACCEPT while listing "limits changed since
G2", "baseline may be starved", "site changed since G3" or "other I/O on the target's device".
Now each deviation that can change a verdict's meaning blocks ACCEPT until a named person
waives it (`kvgate waive`, signed like the records, shown in the summary, checked by verify).
"""

import json

import pytest
from _chain import SITE, add_gate, full_chain

from gates.binding import binding_deviations
from gates.cli import main
from gates.core.configuration import G2Limits
from gates.core.verdicts import SHORTENED, Cause, Deviation, Effect, GateRecord
from gates.inference import Repetition, starved
from gates.loadgen import CpuUse
from gates.report import KEY_DIR_ENV, build_summary, write_summary
from gates.report.summary import ACCEPT, NOT_READY, summary_digest
from gates.report.verification import verify
from gates.soak import SoakPlan
from gates.soak.rules import gap
from gates.store import Store

LIMITS = "limits changed since G2 (run r0): thresholds SHA-256 aaaa… then, bbbb… now"


def chain_with(store, run_id="r1", **deviations):
    """A passing G1→G4 chain in one run; deviations={gate: [text, …]} on those records."""
    full_chain(store, run_id, gates=("g1",))
    below = store.record(run_id, "g1")
    for gate in ("g2", "g3", "g4"):
        below = add_gate(store, run_id, gate, cites=below,
                         deviations=deviations.get(gate, []))


# ---- the classification, said once ----------------------------------------------------------

def test_each_producer_s_deviation_has_the_class_the_readme_lists():
    upstream = GateRecord(gate="g2", run_id="r0", site="s", started="t",
                          thresholds_sha256="a" * 64,
                          facts={"site binding": json.dumps({"target.directory": "/a"})})
    limits, site = binding_deviations(upstream, "b" * 64, {"target.directory": "/b"})
    busy = CpuUse(seconds=30, other_pct=61, engine_pct=35, own_pct=3)
    [hungry] = starved([Repetition(arm="baseline", concurrency=8, repetition=0, ttfts=[1.0],
                                   output_throughput=1.0, sent=1, errors=0, cpu=busy)],
                       G2Limits())
    plan = SoakPlan(run_id="r", duration=120, window=20, nominal_window=300)
    shortened, window = (d.text for d in plan.deviations())
    # Typed producers set the cause where they find it; the cause alone decides the effect.
    assert [(d.cause, d.effect) for d in (limits, site, hungry)] == [
        (Cause.LIMITS_CHANGED, Effect.BLOCKING), (Cause.SITE_CHANGED, Effect.BLOCKING),
        (Cause.BASELINE_STARVED, Effect.BLOCKING)]
    # Older records' bare text (and the soak's words, until its deviations are typed) is
    # classified by how it begins, as it was when those records were written.
    blocking, rehearsal = Effect.BLOCKING, Effect.REHEARSAL
    cases = {gap(0, 60).text: blocking, window: blocking, shortened: rehearsal,
             "other I/O on the target's device vda during 'x': 3 MiB": blocking,
             "simulated engine: the arms candidate run kvgate's reference": rehearsal,
             "FORCED: run despite the upstream gate: G1 did not pass": rehearsal,
             "no pre-flight prediction: unknown model": Effect.NOTE,
             "anything nobody classified yet": blocking}
    assert shortened.startswith(SHORTENED)
    assert {text: Deviation.model_validate(text).effect for text in cases} == cases


# ---- the recommendation ---------------------------------------------------------------------

@pytest.mark.parametrize("text", [LIMITS, "baseline may be starved: during repetition 2",
                                  "site changed since G3 (run r0): arms.candidate: kv_dir was",
                                  "other I/O on the target's device vda during 'Sequential read'"])
def test_an_open_deviation_keeps_an_all_pass_chain_from_accept(tmp_path, text):
    with Store(tmp_path / "out") as store:
        chain_with(store, g3=[text])
        summary = build_summary(store, SITE, "r1")
    assert summary.recommendation.status == NOT_READY
    [reason] = summary.recommendation.reasons
    assert reason.startswith(f"open deviation (G3, run r1): {text[:60]}")
    assert reason.endswith("re-run, or waive it (kvgate waive)")


def test_a_note_does_not_block_and_a_rehearsal_mark_is_its_own_reason(tmp_path):
    with Store(tmp_path / "out") as store:
        chain_with(store, g1=[], g2=["no pre-flight prediction: unknown model"])
        assert build_summary(store, SITE, "r1").recommendation.status == ACCEPT


# ---- kvgate waive ---------------------------------------------------------------------------

def waive(out, *argv):
    return main(["waive", "r1", *argv, "--out", str(out)])


def test_a_waiver_is_signed_shown_and_verified_and_the_summary_then_accepts(
        tmp_path, key, capsys):
    out = tmp_path / "out"
    with Store(out) as store:
        chain_with(store, g3=[LIMITS])
        write_summary(store, SITE, "r1")
    folder = out / "r1"
    before = json.loads((folder / "summary.json").read_text())
    assert before["recommendation"]["status"] == NOT_READY
    assert waive(out, "limits changed since G2", "--reason", "revision 7 fixed a comment only",
                 "--by", "J. Reviewer") == 0
    said = capsys.readouterr().out
    assert "waived: G3 (run r1): limits changed since G2" in said
    assert "summary revision 2: ACCEPT" in said
    after = json.loads((folder / "summary.json").read_text())
    assert after["recommendation"] == {"status": ACCEPT, "reasons": []}
    assert after["revision"] == 2 and after["supersedes"] == before["summary_sha256"]
    [deviation] = after["deviations"]
    waiver = deviation["waiver"]["waiver"]
    assert (waiver["by"], waiver["reason"], waiver["deviation"]) == (
        "J. Reviewer", "revision 7 fixed a comment only", LIMITS)
    html = (folder / "summary.html").read_text()
    assert "waived</b> by J. Reviewer" in html and "revision 7 fixed a comment only" in html
    assert verify(folder)[1] == []
    assert verify(out / "r1.r2.bundle.tar.gz")[1] == []
    with Store(out) as store:
        assert [w.waiver.by for w in store.waivers()] == ["J. Reviewer"]


def test_an_edited_waiver_or_a_recommendation_it_does_not_earn_is_named(tmp_path, key):
    out = tmp_path / "out"
    with Store(out) as store:
        chain_with(store, g3=[LIMITS, "baseline may be starved: during repetition 2"])
        write_summary(store, SITE, "r1")
    assert waive(out, "limits changed", "--reason", "fine", "--by", "J. Reviewer") == 0
    path = out / "r1" / "summary.json"
    body = json.loads(path.read_text())
    body["deviations"][0]["waiver"]["waiver"]["reason"] = "approved by the vendor"
    body["recommendation"] = {"status": ACCEPT, "reasons": []}  # the starved one is open
    body["summary_sha256"] = summary_digest(body)  # rehashed: the unkeyed hash holds again
    path.write_text(json.dumps(body, indent=2))
    problems = verify(out / "r1")[1]
    assert "summary.json: waiver 1 (G3, by J. Reviewer): the waiver was altered (its " \
           "SHA-256 no longer matches" in " ".join(problems)
    assert any(p.startswith("summary.json: it recommends ACCEPT, but its own chain and "
                            "deviations give NOT READY FOR SIGN-OFF: open deviation (G3")
               for p in problems), problems


def test_a_waiver_refuses_rehearsals_unknown_text_no_key_and_no_reason(
        tmp_path, key, monkeypatch, capsys):
    out = tmp_path / "out"
    with Store(out) as store:
        chain_with(store, g2=[LIMITS.replace("G2", "G1")], g3=[LIMITS],
                   g4=["simulated engine: the arms candidate run kvgate's reference engine"])
        write_summary(store, SITE, "r1")
    capsys.readouterr()
    assert waive(out, "simulated engine", "--reason", "r", "--by", "b") == 2
    assert "is a rehearsal mark: no waiver turns it into a sign-off" in capsys.readouterr().err
    assert waive(out, "no such thing", "--reason", "r", "--by", "b") == 2
    err = capsys.readouterr().err
    assert "no deviation reads 'no such thing'; open: G2 (run r1): 'limits changed since G1" \
        in err
    assert waive(out, "limits changed since", "--reason", "r", "--by", "b") == 2
    assert "names 2 open deviations: give more of the text, or --gate" in \
        capsys.readouterr().err
    assert waive(out, "limits changed since", "--gate", "g2", "--reason", " ", "--by", "b") == 2
    assert "a waiver needs a reason" in capsys.readouterr().err
    monkeypatch.setenv(KEY_DIR_ENV, str(tmp_path / "no-keys"))
    assert waive(out, "limits changed since", "--gate", "g2", "--reason", "r", "--by", "b") == 2
    assert "a waiver must be signed" in capsys.readouterr().err
    with Store(out) as store:
        assert store.waivers() == []  # nothing refused was kept
    assert json.loads((out / "r1" / "summary.json").read_text())["revision"] == 1
