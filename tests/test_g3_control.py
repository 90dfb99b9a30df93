"""Issue #43 case 4: G3's control baseline is judged like the candidate.

Before the fix g3.request_errors and g3.loadgen_fit looked at the candidate's repetitions only:
a kept pair whose baseline repetition had an unfit load generator (its TTFT inflated by kvgate's
own lag, which inflates the reduction: the direction that favours PASS) left the level PASS,
and the baseline's failed requests were counted nowhere.
"""

from gates.core.configuration import Decision, G3Limits
from gates.core.verdicts import Outcome
from gates.inference import Repetition, g3_measurements

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
