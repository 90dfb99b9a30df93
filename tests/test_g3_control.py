"""Issue #43 case 4: G3's control baseline is judged like the candidate.

Before the fix g3.request_errors and g3.loadgen_fit looked at the candidate's repetitions only:
a kept pair whose baseline repetition had an unfit load generator (its TTFT inflated by kvgate's
own lag, which inflates the reduction: the direction that favours PASS) left the level PASS,
and the baseline's failed requests were counted nowhere.
"""

from gates.core.configuration import Decision, G3Limits
from gates.core.verdicts import G2, Coverage, Limit, Outcome
from gates.inference import Repetition, g3_measurements
from gates.inference.control import g3_request_errors, recompute_reference, self_check, unfit_by_arm

PAIRS = 7  # the shipped plan's first look
FIT = "Load generator fit for a gate @ concurrency 8"
ERRORS = "Candidate request errors @ concurrency 8"


def rep(arm, i, ttft, tput, errors=0, **extra):
    return Repetition(arm=arm, concurrency=8, repetition=i,
                      ttfts=[ttft * f for f in (0.9, 1.0, 1.1)], output_throughput=tput,
                      sent=3, errors=errors, **extra)


def level(base_changes=None, cand_changes=None):
    """A clear 40 % level of PAIRS pairs, with the i-th repetition of an arm changed."""
    base = [rep("baseline", i, 10.0, 100.0 + i) for i in range(PAIRS)]
    cand = [rep("candidate", i, 6.0, 135.0 + i) for i in range(PAIRS)]
    for reps, changes in ((base, base_changes), (cand, cand_changes)):
        for i, update in (changes or {}).items():
            reps[i] = reps[i].model_copy(update=update)
    pairs = {8: list(zip(base, cand, strict=True))}
    return {m.name: m for m in g3_measurements(pairs, [], G3Limits(), Decision())}


def test_a_kept_pair_whose_baseline_was_unfit_makes_the_level_inconclusive():
    lag = "schedule lag p99 40.2 ms > 5 ms"
    ms = level(base_changes={3: {"fit": False, "unfit_reasons": [lag]}})
    fit = ms[FIT]
    assert fit.outcome is Outcome.ERROR, fit
    assert fit.note.startswith("INCONCLUSIVE: the load generator was unfit in 1 of 14 "
                               "repetitions (the control baseline's 1 of 7, the candidate's 0 "
                               "of 7)"), fit.note
    assert lag in fit.note
    # The figures are still shown; the level's verdict is the fit's ERROR.
    assert ms["TTFT p50 reduction @ concurrency 8"].outcome is Outcome.PASS


def test_a_fit_level_counts_both_arms():
    fit = level()[FIT]
    assert fit.outcome is Outcome.PASS and fit.value == 0, fit


def test_the_control_baseline_s_request_errors_are_counted():
    ms = level(base_changes={2: {"errors": 2, "error_text": "HTTP 503 from /v1/completions"}})
    m = ms[ERRORS]
    # Not the candidate's failure, but a control with failed requests is no control: a failed
    # request is left out of the baseline's figures, which then say nothing fair.
    assert m.outcome is Outcome.ERROR, m
    assert m.note.startswith("INCONCLUSIVE: the control baseline had 2 request errors in its "
                             "7 kept repetitions (21 requests sent)"), m.note
    assert "HTTP 503 from /v1/completions" in m.note


def test_candidate_errors_still_fail_and_the_baseline_s_are_said_beside_them():
    ms = level(base_changes={2: {"errors": 1, "error_text": "baseline: stream dropped"}},
               cand_changes={5: {"errors": 3, "error_text": "candidate: HTTP 500"}})
    m = ms[ERRORS]
    assert m.outcome is Outcome.FAIL and m.value == 3, m
    assert "candidate: HTTP 500" in m.note
    assert "the control baseline had 1 request error" in m.note and \
        "baseline: stream dropped" in m.note, m.note


# --- The rules' own words and limits, read as a user reads them (#43, mutants) --------------

NO_ERRORS = Limit.at_most(0, "requests")
NO_UNFIT = Limit.at_most(0, "repetitions")


def pairs(base_changes=None, cand_changes=None, n=PAIRS):
    """n kept (baseline, candidate) pairs, the i-th repetition of an arm changed."""
    base = [rep("baseline", i, 10.0, 100.0) for i in range(n)]
    cand = [rep("candidate", i, 6.0, 135.0) for i in range(n)]
    for reps, changes in ((base, base_changes), (cand, cand_changes)):
        for i, update in (changes or {}).items():
            reps[i] = reps[i].model_copy(update=update)
    return list(zip(base, cand, strict=True))


def test_a_clean_level_s_request_errors_say_only_what_was_sent():
    m = g3_request_errors(8, pairs())
    assert m.outcome is Outcome.PASS and m.value == 0, m
    assert m.note == "21 requests sent"  # no word of a control that had no error
    assert m.limit == NO_ERRORS and m.unit == "requests"
    assert m.name == ERRORS and m.at == 8


def test_one_failed_candidate_request_fails_the_level():
    m = g3_request_errors(8, pairs(cand_changes={0: {"errors": 1}}))
    assert m.outcome is Outcome.FAIL and m.value == 1, m


def test_the_control_s_single_error_is_said_in_the_singular_and_in_full():
    m = g3_request_errors(8, pairs(base_changes={4: {"errors": 1}}))
    assert m.outcome is Outcome.ERROR and m.limit == NO_ERRORS, m
    assert m.note == ("INCONCLUSIVE: the control baseline had 1 request error in its 7 kept "
                      "repetitions (21 requests sent); a failed request is left out of the "
                      "baseline's figures, which then are no fair control (the candidate had "
                      "none)")
    assert m.name == ERRORS and m.at == 8


def test_every_failed_request_s_words_are_said_one_after_the_other():
    m = g3_request_errors(8, pairs(
        base_changes={1: {"errors": 1, "error_text": "HTTP 503"},
                      2: {"errors": 1, "error_text": "stream dropped"}},
        cand_changes={3: {"errors": 1, "error_text": "HTTP 500"},
                      5: {"errors": 2, "error_text": "timed out"}}))
    assert m.outcome is Outcome.FAIL and m.value == 3, m
    assert m.note == ("HTTP 500; timed out; the control baseline had 2 request errors in its 7 "
                      "kept repetitions (21 requests sent): HTTP 503; stream dropped")


def test_a_candidate_repetition_that_sent_nothing_is_named_not_read():
    m = g3_request_errors(8, pairs(cand_changes={2: {"sent": 0, "ttfts": []}}))
    assert m.outcome is Outcome.ERROR, m
    assert m.coverage.missing == ["candidate #3 sent no request"]


def test_unfit_by_arm_counts_each_arm_over_its_own_repetitions():
    reps = [rep("baseline", i, 10.0, 100.0) for i in range(2)] + \
        [rep("candidate", i, 6.0, 135.0, fit=i == 0) for i in range(3)]
    assert unfit_by_arm(reps) == " (the control baseline's 0 of 2, the candidate's 2 of 3)"
    # An arm G3 has no words for is named as the record names it.
    rec = [rep("recompute", 0, 150.0, 4.0, fit=False), rep("candidate", 0, 6.0, 135.0)]
    assert unfit_by_arm(rec) == " (the candidate's 0 of 1, recompute 1 of 1)"
    assert unfit_by_arm(reps[:2]) == ""  # one arm: nothing to split


def test_a_fit_level_s_self_check_note_and_limit():
    m = self_check(G2["g2.loadgen_fit"], 8, Coverage([1, 2], [1, 2], what="repetitions"),
                   [rep("baseline", i, 10.0, 100.0) for i in range(2)])
    assert m.outcome is Outcome.PASS and m.value == 0, m
    assert m.note == "event-loop and schedule lag within limits"
    assert m.limit == NO_UNFIT and m.unit == "repetitions"


def test_one_arm_s_unfit_repetitions_are_said_with_every_reason_once():
    reps = [rep("baseline", i, 10.0, 100.0, fit=False, unfit_reasons=[why])
            for i, why in enumerate(["loop lag 9 ms", "schedule lag 12 ms", "loop lag 9 ms"])]
    m = self_check(G2["g2.loadgen_fit"], 8, Coverage([1, 2, 3], [1, 2, 3], what="repetitions"),
                   reps)
    assert m.outcome is Outcome.ERROR and m.limit == NO_UNFIT, m
    assert m.note == ("INCONCLUSIVE: the load generator was unfit in 3 of 3 repetitions, so "
                      "their timings carry its own delay and say nothing of the storage (re-run "
                      "with nothing else on the machine): loop lag 9 ms; schedule lag 12 ms")


def test_an_unfit_repetition_without_reasons_ends_at_the_advice():
    reps = [rep("baseline", 0, 10.0, 100.0, fit=False)]
    m = self_check(G2["g2.loadgen_fit"], 8, Coverage([1], [1], what="repetitions"), reps)
    assert m.note.endswith("(re-run with nothing else on the machine)"), m.note


def recompute_level(cand_changes=None, rec_changes=None, cand_ttft=6.0, rec_ttft=60.0):
    cand = [rep("candidate", i, cand_ttft, 135.0) for i in range(3)]
    rec = [rep("recompute", i, rec_ttft, 27.0) for i in range(3)]
    for reps, changes in ((cand, cand_changes), (rec, rec_changes)):
        for i, update in (changes or {}).items():
            reps[i] = reps[i].model_copy(update=update)
    return {m.id: m for m in recompute_reference(8, cand, rec)}


def test_the_recompute_speed_ups_are_held_above_one_times_the_recompute_arm():
    ms = recompute_level()
    ttft, tput = ms["g3.ttft_speedup_vs_recompute"], ms["g3.throughput_speedup_vs_recompute"]
    assert ttft.outcome is Outcome.PASS and round(ttft.value, 6) == 10.0, ttft
    assert tput.outcome is Outcome.PASS and round(tput.value, 6) == 5.0, tput
    assert str(ttft.limit) == "x > 1 x (relative to the recompute arm)"
    assert ttft.limit == tput.limit and ttft.unit == "x"


def test_a_candidate_no_faster_than_recomputing_fails_and_a_little_faster_passes():
    # Exactly as fast is no speed-up: the bound is strict.
    assert recompute_level(rec_ttft=6.0)["g3.ttft_speedup_vs_recompute"].outcome is Outcome.FAIL
    assert recompute_level(rec_ttft=9.0)["g3.ttft_speedup_vs_recompute"].outcome is Outcome.PASS


def test_a_recompute_repetition_without_a_ttft_makes_the_speed_up_an_error_naming_it():
    ms = recompute_level(rec_changes={1: {"ttfts": [], "output_throughput": None}})
    for id, what in (("g3.ttft_speedup_vs_recompute", "TTFT p50"),
                     ("g3.throughput_speedup_vs_recompute", "output throughput")):
        m = ms[id]
        assert m.outcome is Outcome.ERROR and m.value is None, m
        assert m.note == f"1 of 6 repetitions of the two arms gave no {what}"
        assert m.coverage.missing == [f"recompute #2 no {what}: no successful request"]
        assert m.limit == ms["g3.ttft_speedup_vs_recompute"].limit and m.limit.lo == 1.0
        assert m.at == 8 and m.name.endswith(" @ concurrency 8")
