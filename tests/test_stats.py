"""gates.core.stats: percentiles, CV and the decision rule, on hand-made data."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gates.core.configuration import CvPlan, G2Limits
from gates.core.statistics import above_claimed_band, median, percentile, speedup
from gates.core.statistics.stats import (
    Comparison,
    CvInterval,
    _mckay,
    cv_interval,
    cv_percent,
    decide,
)
from gates.core.verdicts import Limit, Outcome

approx = pytest.approx


# ---- coefficient of variation --------------------------------------------------------------

@pytest.mark.parametrize(("values", "expected"), [
    ([10, 10, 10], 0.0),
    ([9, 10, 11], 10.0),  # sample std 1, mean 10
    ([2, 4], 100 * math.sqrt(2) / 3),  # sample std sqrt(2), mean 3
    ([-9, -10, -11], 10.0),  # against |mean|: a spread is never negative
    ([100.0, 102.0, 98.0, 100.0], 100 * math.sqrt(8 / 3) / 100),
])
def test_cv_hand_computed(values, expected):
    assert cv_percent(values) == approx(expected)


@pytest.mark.parametrize("values", [[], [5.0], [-1.0, 1.0], [0.0, 0.0]])
def test_cv_unmeasurable_is_none(values):
    assert cv_percent(values) is None


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_cv_rejects_non_finite(bad):
    with pytest.raises(ValueError, match="non-finite"):
        cv_percent([1.0, bad])


@given(st.lists(st.floats(0.1, 1e6), min_size=2, max_size=20), st.floats(0.01, 100))
def test_cv_is_scale_free(values, k):
    assert cv_percent([k * v for v in values]) == approx(cv_percent(values), rel=1e-6, abs=1e-9)


# ---- the CV's confidence bounds (Vangel 1996) -----------------------------------------------

def test_a_small_cv_is_bounded_as_the_chi_square_bound_on_its_sd():
    # For a small CV, Vangel's modified McKay bound tends to s * sqrt((n-1) / chi2(n-1, p)):
    # three values, CV 1 %: chi-square(2) quantiles -2 ln(0.95) and -2 ln(0.05).
    iv = cv_interval([99.0, 100.0, 101.0], 0.05)
    assert iv.point == approx(1.0)
    assert iv.hi == approx(math.sqrt(2 / (-2 * math.log(0.95))), rel=1e-3)
    assert iv.lo == approx(math.sqrt(2 / (-2 * math.log(0.05))), rel=1e-3)
    assert iv.text() == "CV 1.0 % [0.6, 4.4] over 3"


def test_more_values_narrow_the_interval():
    few = cv_interval([95.0, 100.0, 105.0], 0.05)
    many = cv_interval([95.0, 100.0, 105.0] * 4, 0.05)
    assert many.hi < few.hi and many.lo > few.lo


def test_a_bound_the_data_cannot_give_is_infinite_and_said_so():
    iv = cv_interval([1.0, 2.0, 3.0], 0.01)  # CV 50 % from three values
    assert math.isinf(iv.hi) and "∞" in iv.text()


@given(st.lists(st.floats(1.0, 1e6), min_size=2, max_size=30)
       .filter(lambda xs: (cv_percent(xs) or 0) < 100),
       st.floats(0.001, 0.2))
def test_the_bounds_hold_the_point_cv_between_them(values, miss):
    iv = cv_interval(values, miss)
    assert iv.lo <= iv.point <= iv.hi


def test_a_cv_interval_needs_a_miss_rate_under_one_half():
    with pytest.raises(ValueError, match="between 0 and 0.5"):
        cv_interval([1.0, 2.0], 0.5)
    # A bound that never misses is no bound either: refused by name, not left to the model.
    with pytest.raises(ValueError, match=r"^a bound's miss rate must be between 0 and 0.5, "
                                         r"not 0.0$"):
        cv_interval([1.0, 2.0], 0.0)


def test_the_mckay_bound_is_unbounded_where_its_denominator_vanishes():
    # K = 0.5, n = 5, u = 0.5: ((u + 2)/n - 1) K^2 + u/(n - 1) = -0.125 + 0.125, exactly 0.
    assert _mckay(0.5, 5, 0.5) == math.inf
    assert _mckay(0.5, 5, 0.6) < math.inf  # just past it, a figure again


# ---- G2's stability plan ---------------------------------------------------------------------

PLAN = CvPlan(G2Limits())


def test_a_cv_exactly_at_the_limit_over_three_repetitions_does_not_pass():
    iv = PLAN.interval([9.5, 10.0, 10.5])
    assert iv.point == approx(5.0) and iv.hi > 5.0
    assert PLAN.decided(iv) == "undecided"


def _cv(lo, hi):
    return CvInterval(point=(lo + hi) / 2, lo=lo, hi=hi, n=3, miss=0.01)


def test_a_cv_bounded_at_the_limit_passes_and_one_bounded_from_it_is_undecided():
    # cv_max is an "at most": an upper bound exactly on it is credibly within it; a lower
    # bound exactly on it is not credibly over it.
    assert PLAN.decided(_cv(2.0, 5.0)) == "pass"
    assert PLAN.decided(_cv(2.0, 5.01)) == "undecided"
    assert PLAN.decided(_cv(5.0, 9.0)) == "undecided"
    assert PLAN.decided(_cv(5.01, 9.0)) == "fail"


def test_the_plan_looks_after_every_repetition_up_to_its_budget():
    assert list(PLAN.looks) == [3, 4, 5, 6, 7, 8]
    assert PLAN.look_miss == approx(0.05 / 6)
    wobbly = [[10.0, 10.6, 9.4], [100.0, 100.0, 100.0]]  # TTFT CV 6 %: undecided at 3
    assert PLAN.needs_more([[10.0, 10.6]] * 2)  # below the first look
    assert PLAN.needs_more(wobbly)
    assert not PLAN.needs_more([xs * 3 for xs in wobbly])  # 9 repetitions: past the budget
    assert not PLAN.needs_more([[8.0, 10.0, 12.0], [9.4, 10.0, 10.6]])  # one failed: stop
    assert not PLAN.needs_more([[10.0, None, 10.0], [1.0, 1.0, 1.0]])  # a missing figure
    assert not PLAN.needs_more([[10.0, 10.001, 10.0], [1.0, 1.0001, 1.0]])  # both decided


def test_the_risk_at_the_limit_is_at_most_the_declared_one():
    # Seeded: true CV exactly 5 %, the whole plan (3 repetitions, then one more at a time up
    # to 8): P(PASS) and P(FAIL) each at most cv_risk (5 %) by the plan's design.
    import random
    rng = random.Random(43)
    passed = failed = 0
    trials = 3000
    for _ in range(trials):
        xs = [rng.gauss(100, 5) for _ in range(8)]
        for n in PLAN.looks:
            at = PLAN.decided(PLAN.interval(xs[:n]))
            if at != "undecided":
                passed += at == "pass"
                failed += at == "fail"
                break
    assert passed / trials <= 0.05 and failed / trials <= 0.05, (passed, failed)


def test_a_budget_below_the_first_look_is_refused():
    with pytest.raises(ValueError, match="repetitions_max 2 is below g2.repetitions 3"):
        G2Limits(repetitions=3, repetitions_max=2)


# ---- medians of percentiles -----------------------------------------------------------------

def test_median_interpolates():
    assert median([3, 1, 2]) == 2
    assert median([4, 1, 3, 2]) == 2.5
    with pytest.raises(ValueError, match="^cannot take the median of no values$"):
        median([])


def test_percentiles_run_from_the_least_value_at_0_to_the_greatest_at_100():
    xs = [3.0, 1.0, 2.0]
    assert [percentile(xs, p) for p in (0, 0.5, 50, 75, 99.5, 100)] == approx([
        1.0, 1.01, 2.0, 2.5, 2.99, 3.0])
    assert percentile([], 50) is None
    for p in (-0.5, 100.5):
        with pytest.raises(ValueError) as refused:
            percentile(xs, p)
        assert str(refused.value) == f"percentile {p} is not between 0 and 100"
    with pytest.raises(ValueError, match="^cannot take a percentile of NaN$"):
        percentile([1.0, math.nan], 50)


def test_an_unbounded_value_interpolates_to_itself_and_leaves_the_others_alone():
    # inf - inf is NaN: neighbours that are equal, or a point on one of them, are not blended.
    assert percentile([1.0, math.inf, math.inf], 75) == math.inf
    assert percentile([1.0, math.inf], 0) == 1.0
    assert percentile([-math.inf, 1.0], 100) == 1.0


# ---- the decision rule ----------------------------------------------------------------------

def comp(point, lo, hi) -> Comparison:
    return Comparison(point=point, lo=lo, hi=hi, confidence=0.95, n_baseline=3,
                      n_candidate=3, statistic_text="test")


AT_LEAST_25 = Limit.at_least(25.0, "%", key="g3.ttft_p50_reduction_min")
RULES = ["point", "lower_confidence_bound"]


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize(("c", "expected"), [
    (comp(30, 27, 33), Outcome.PASS),  # point and bound pass
    (comp(25, 25, 28), Outcome.PASS),  # inclusive limit: exactly on it passes
    (comp(30, 20, 40), Outcome.MARGINAL),  # point passes, lower bound does not
    (comp(20, 15, 26), Outcome.FAIL),  # point fails
    (comp(24, 26, 30), Outcome.FAIL),  # a percentile CI that misses the point: still FAIL
    (comp(math.nan, 26, 30), Outcome.FAIL),
])
def test_decide_branches_shared_by_both_rules(rule, c, expected):
    assert decide(c, AT_LEAST_25, rule) == expected


def test_decide_holds_the_point_to_the_guard_band_unless_told_otherwise():
    banded = Limit.at_least(25.0, "%", marginal=0.1)  # band 22.5..27.5
    assert decide(comp(30, 26, 34), banded) == Outcome.PASS  # the point rule's answer


def test_decide_rules_differ_on_the_guard_band():
    banded = Limit.at_least(25.0, "%", marginal=0.1)  # band 22.5..27.5
    clear = comp(30, 26, 34)  # point outside the band, lower bound inside it
    assert decide(clear, banded, "point") == Outcome.PASS
    assert decide(clear, banded, "lower_confidence_bound") == Outcome.MARGINAL
    both_clear = comp(32, 28, 36)
    assert decide(both_clear, banded, "point") == Outcome.PASS
    assert decide(both_clear, banded, "lower_confidence_bound") == Outcome.PASS
    near = comp(26, 25.5, 30)
    assert decide(near, banded, "point") == Outcome.MARGINAL
    assert decide(near, banded, "lower_confidence_bound") == Outcome.MARGINAL


@pytest.mark.parametrize("rule", RULES)
def test_decide_upper_limits_use_the_upper_end(rule):
    at_most_5 = Limit.at_most(5.0, "%")
    assert decide(comp(3, 1, 4), at_most_5, rule) == Outcome.PASS
    assert decide(comp(3, -10, 4), at_most_5, rule) == Outcome.PASS  # lower end irrelevant
    assert decide(comp(3, 1, 6), at_most_5, rule) == Outcome.MARGINAL
    assert decide(comp(6, 1, 7), at_most_5, rule) == Outcome.FAIL
    two_sided = Limit(lo=0.0, hi=10.0)
    assert decide(comp(5, -1, 8), two_sided, rule) == Outcome.MARGINAL
    assert decide(comp(5, 1, 11), two_sided, rule) == Outcome.MARGINAL
    assert decide(comp(5, 1, 9), two_sided, rule) == Outcome.PASS


def test_decide_rejects_unknown_rule():
    with pytest.raises(ValueError) as refused:
        decide(comp(30, 27, 33), AT_LEAST_25, "mean")
    assert str(refused.value) == ("unknown decision statistic 'mean': 'point' or "
                                  "'lower_confidence_bound'")


def test_comparison_interval_ordered():
    with pytest.raises(ValueError, match="above its upper end"):
        comp(30, 33, 27)


def test_above_claimed_band():
    assert above_claimed_band(41.0, 40.0)
    assert not above_claimed_band(40.0, 40.0)
    assert not above_claimed_band(35.0, 40.0)
    assert not above_claimed_band(math.nan, 40.0)


# ---- reference ratios: the seed's recompute comparison ----------------------------------------

def test_speedup_seed_figures():
    assert round(speedup(149.5, 11.85, better="lower"), 1) == 12.6  # TTFT p50, s
    assert round(speedup(4.1, 74.9, better="higher"), 1) == 18.3  # output throughput, tok/s
    assert speedup(2.0, 4.0, better="lower") == 0.5  # a slowdown reads below 1


@pytest.mark.parametrize(("args", "kw"), [
    ((0.0, 1.0), {"better": "lower"}),
    ((1.0, math.inf), {"better": "higher"}),
    ((1.0, 1.0), {"better": "faster"}),
])
def test_speedup_rejects_bad_input(args, kw):
    with pytest.raises(ValueError, match="speedup|better"):
        speedup(*args, **kw)


def test_the_plan_stops_at_its_budget_and_on_a_series_it_cannot_judge():
    wobbly = [10.0, 10.6, 9.4, 10.0, 10.6, 9.4, 10.0, 10.6]  # CV 5 %: still undecided at 8
    assert PLAN.decided(PLAN.interval(wobbly)) == "undecided"
    assert PLAN.needs_more([wobbly[:7], [100.0] * 7])  # undecided, budget not spent
    assert not PLAN.needs_more([wobbly, [100.0] * 8])  # the 8th repetition spent the budget
    # A series a repetition short of the others is a figure missing, whatever the CVs say.
    assert not PLAN.needs_more([wobbly[:3], [100.0, 100.0]])
    # A series with no CV (a zero mean) cannot be judged by more repetitions either.
    assert not PLAN.needs_more([wobbly[:3], [2.0, -1.0, -1.0]])
    assert PLAN.needs_more([])  # nothing run yet: below the first look


def test_speedup_of_figures_below_one_and_of_a_zero_figure():
    assert speedup(0.5, 0.25, better="lower") == 2.0  # TTFT p50 in seconds, under one
    assert speedup(0.2, 0.8, better="higher") == 4.0
    for baseline, candidate in ((1.0, 0.0), (0.0, 1.0), (1.0, -2.0)):
        with pytest.raises(ValueError, match="finite figures > 0"):
            speedup(baseline, candidate, better="higher")
