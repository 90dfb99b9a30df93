"""Issue #43: every G2/G3 rule accounts for all of its inputs (gates.core.verdicts.Coverage).

Before, a repetition, a pair, a KV file or a probed context that gave no figure was dropped and
the rule judged the rest: a level of 4 repetitions whose 2nd had no successful request PASSed
its CVs over the other 3, the recompute speed-ups were medians of whichever repetitions had a
figure, a file the engine removed before the read-back was left out of a PASS, and a context
only the recompute arm answered was never compared. Now each is "not read" with why, and a rule
short of any of its inputs is no PASS.
"""

import hashlib
import os

from gates.core.configuration import Decision, G2Limits, G3Limits
from gates.core.verdicts import Outcome
from gates.inference import Repetition, correctness, g2_measurements, g3_measurements, read_back
from gates.inference.kv_files import KvReadBack

PAIRS = 7  # the shipped plan's first look
C = 8


def rep(arm, i, ttft, tput, **extra):
    return Repetition(arm=arm, concurrency=C, repetition=i,
                      ttfts=[ttft * f for f in (0.9, 1.0, 1.1)], output_throughput=tput,
                      sent=3, errors=0, **{"storage_read_tokens": 1000,
                                           "expected_kv_tokens": 1000, "gpu_hit_tokens": 0.0,
                                           "restore_gbps": 1.5, **extra})


FAILED = {"ttfts": [], "output_throughput": None, "errors": 3,
          "error_text": "HTTP 500 from /v1/completions"}


def by_id(measurements):
    return {m.id: m for m in measurements}


def g3(base_changes=None, cand_changes=None, recompute=(), **extra):
    """A clear 40 % level of PAIRS pairs, the i-th repetition of an arm changed."""
    base = [rep("baseline", i, 10.0, 100.0 + i, **extra) for i in range(PAIRS)]
    cand = [rep("candidate", i, 6.0, 135.0 + i, **extra) for i in range(PAIRS)]
    for reps, changes in ((base, base_changes), (cand, cand_changes)):
        for i, update in (changes or {}).items():
            reps[i] = reps[i].model_copy(update=update)
    return by_id(g3_measurements({C: list(zip(base, cand, strict=True))}, list(recompute),
                                 G3Limits(), Decision()))


def test_a_cv_over_a_level_whose_second_repetition_gave_no_figure_is_an_error_naming_it():
    # Four repetitions (the plan added one), the 2nd with no successful request: the CVs
    # PASSed over the other three.
    reps = [rep("baseline", i, 10.0 + 0.001 * i, 100.0 - 0.01 * i) for i in range(4)]
    reps[1] = reps[1].model_copy(update=FAILED)
    ms = by_id(g2_measurements(reps, G2Limits()))
    for id in ("g2.ttft_p50_cv", "g2.throughput_cv", "g2.ttft_p50", "g2.ttft_p99",
               "g2.output_throughput"):
        m = ms[id]
        assert m.outcome is Outcome.ERROR, (id, m)
        assert (m.coverage.what, m.coverage.expected, m.coverage.read) == ("repetitions", 4, 3)
        assert m.coverage.missing[0].startswith("#2 ") and "HTTP 500" in m.coverage.missing[0]
        assert m.evidence[0] == m.coverage.describe()  # the coverage line leads the evidence
    assert "#2" in ms["g2.ttft_p50_cv"].note


def test_a_healthy_level_passes_g2_with_every_repetition_read():
    reps = [rep("baseline", i, 10.0 + 0.001 * i, 100.0 - 0.01 * i) for i in range(3)]
    ms = by_id(g2_measurements(reps, G2Limits()))
    for id in ("g2.request_errors", "g2.ttft_p50_cv", "g2.throughput_cv", "g2.loadgen_fit"):
        assert ms[id].outcome is Outcome.PASS and ms[id].coverage.complete, ms[id]
    assert ms["g2.ttft_p50"].outcome is Outcome.REPORTED and ms["g2.ttft_p50"].coverage.read == 3


def test_a_planned_repetition_that_never_ran_is_not_read():
    # The plan's first look is at g2.repetitions = 3; a level holding #1 and #3 only (a stored
    # record) lacks #2, whatever the others say.
    reps = [rep("baseline", i, 10.0, 100.0) for i in (0, 2)]
    m = by_id(g2_measurements(reps, G2Limits()))["g2.request_errors"]
    assert m.outcome is Outcome.ERROR and m.coverage.missing[0].startswith("#2 not run"), m


def test_a_pair_without_a_figure_is_named_with_why():
    ms = g3(cand_changes={1: FAILED})
    for id in ("g3.ttft_p50_reduction", "g3.throughput_gain"):
        m = ms[id]
        assert m.outcome is Outcome.ERROR and m.coverage.what == "pairs", m
        assert (m.coverage.expected, m.coverage.read) == (PAIRS, PAIRS - 1)
        assert m.coverage.missing[0].startswith("#2 the candidate gave no ") and \
            "HTTP 500" in m.coverage.missing[0], m.coverage


def test_recompute_speedups_need_every_repetition_of_both_arms():
    rec = [rep("recompute", 0, 149.5, 4.1)]
    ms = g3(cand_changes={1: FAILED}, recompute=rec)
    for id in ("g3.ttft_speedup_vs_recompute", "g3.throughput_speedup_vs_recompute"):
        m = ms[id]
        assert m.outcome is Outcome.ERROR, m  # was a PASS over the other six
        assert m.coverage.what == "repetitions" and m.coverage.expected == PAIRS + 1
        assert m.coverage.missing[0].startswith("candidate #2"), m.coverage
    ok = g3(recompute=rec)["g3.ttft_speedup_vs_recompute"]
    assert ok.outcome is Outcome.PASS and ok.coverage.complete


def test_request_errors_and_fit_cover_both_arms_and_a_repetition_that_sent_nothing():
    ms = g3(base_changes={2: {"sent": 0}})
    m = ms["g3.request_errors"]
    assert m.outcome is Outcome.ERROR, m  # 0 errors counted, but the control sent nothing
    assert (m.coverage.expected, m.coverage.read) == (2 * PAIRS, 2 * PAIRS - 1)
    assert m.coverage.missing == ["baseline #3 sent no request"]
    fit = ms["g3.loadgen_fit"]
    assert fit.coverage.what == "repetitions" and fit.coverage.expected == 2 * PAIRS


def test_a_kv_file_the_engine_removed_before_the_read_back_is_not_read(tmp_path):
    # The real read-back over real files: one of four removed between store and read-back.
    stored = {}
    for i in range(4):
        data = os.urandom(4096 + i)
        (tmp_path / f"c{i}.kv").write_bytes(data)
        stored[f"c{i}.kv"] = hashlib.sha256(data).hexdigest()
    (tmp_path / "c3.kv").unlink()
    found = read_back(tmp_path, stored)
    assert (found.files, found.vanished, found.gone) == (3, 1, ["c3.kv"])
    ms = g3(kv_read_back=found)
    m = ms["g3.kv_read_back"]
    assert m.outcome is Outcome.ERROR, m  # was a PASS over the files still there
    assert m.coverage.what == "files" and (m.coverage.expected, m.coverage.read) == (28, 21)
    assert m.coverage.missing[0] == ("repetition #1 c3.kv removed by the engine before the "
                                     "read-back"), m.coverage
    healthy = g3(kv_read_back=KvReadBack(files=4, bytes=4096))["g3.kv_read_back"]
    assert healthy.outcome is Outcome.PASS and healthy.coverage.complete


def test_a_context_only_one_arm_answered_is_not_read():
    ids = {"probe-ctx-0000": [1, 2, 3], "probe-ctx-0001": [4, 5, 6]}
    cand = rep("candidate", 0, 1, 1, outputs={"probe-ctx-0000": [1, 2, 3]})
    ref = rep("recompute", 0, 1, 1, outputs=ids)
    m = correctness(cand, ref, 3)
    assert m.outcome is Outcome.ERROR, m  # was a PASS: the context was never compared
    assert m.coverage.what == "contexts" and m.coverage.missing == [
        "probe-ctx-0001 the candidate's probe has no such request"]
    empty = rep("recompute", 0, 1, 1, outputs={**ids, "probe-ctx-0001": []})
    m = correctness(rep("candidate", 0, 1, 1, outputs=ids), empty, 3)
    assert m.outcome is Outcome.ERROR and m.coverage.missing == [
        "probe-ctx-0001 the recompute arm returned no output token ids"], m
    same = correctness(rep("candidate", 0, 1, 1, outputs=ids), ref, 3)
    assert same.outcome is Outcome.PASS and same.coverage.complete


def test_every_g2_and_g3_rule_gives_its_coverage():
    reps = [rep("baseline", i, 10.0 + 0.001 * i, 100.0 - 0.01 * i) for i in range(3)]
    assert all(m.outcome in (Outcome.PASS, Outcome.REPORTED)
               for m in g2_measurements(reps, G2Limits()))
    outputs = {"outputs": {"probe-ctx-0000": [1, 2, 3]}}
    ms = g3(recompute=[rep("recompute", 0, 149.5, 4.1, **outputs)],
            kv_read_back=KvReadBack(files=4, bytes=4096), **outputs)
    mine = ("g3.request_errors", "g3.ttft_p50_reduction", "g3.throughput_gain",
            "g3.kv_read_back", "g3.ttft_speedup_vs_recompute",
            "g3.throughput_speedup_vs_recompute", "g3.loadgen_fit")
    for id in mine:
        assert ms[id].outcome is Outcome.PASS and ms[id].coverage.complete, ms[id]
    cand = rep("candidate", 0, 1, 1, **outputs)
    m = correctness(cand, rep("recompute", 0, 1, 1, **outputs), 3)
    assert m.outcome is Outcome.PASS and m.coverage.what == "contexts"


def test_an_unfit_repetition_stays_an_error_with_its_coverage():
    fit = g3(base_changes={3: {"fit": False, "unfit_reasons": ["loop lag"]}})["g3.loadgen_fit"]
    assert fit.outcome is Outcome.ERROR and fit.coverage.expected == 2 * PAIRS
