"""gates.core.stats: CV, bootstrap CIs, arm comparisons and the decision rule, on hand-made data."""

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gates.core import (
    Comparison,
    Limit,
    Outcome,
    above_claimed_band,
    bootstrap_ci,
    cv_percent,
    decide,
    median,
    median_of_p50,
    speedup,
    throughput_gain,
    ttft_reduction,
)

approx = pytest.approx
FEW = 200  # resamples in tests: enough for the properties, fast enough for the suite


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


# ---- medians of percentiles -----------------------------------------------------------------

def test_median_interpolates():
    assert median([3, 1, 2]) == 2
    assert median([4, 1, 3, 2]) == 2.5
    with pytest.raises(ValueError, match="no values"):
        median([])


@pytest.mark.parametrize(("reps", "expected"), [
    ([[1, 2, 3], [4, 5, 6, 7], [10]], 5.5),  # p50s 2, 5.5, 10 -> median 5.5
    ([[1, 3], [5]], 3.5),  # p50s 2, 5 -> median of two is their mean
    ([[7]], 7),
    ([[10, 20, 30], [12, 22, 32], [8, 18]], 20),  # p50s 20, 22, 13
])
def test_median_of_p50(reps, expected):
    assert median_of_p50(reps) == approx(expected)


# ---- arm comparisons: point estimates -------------------------------------------------------

BASE = [[10, 20, 30], [12, 22, 32], [8, 18]]  # p50s 20, 22, 13: median 20
CAND = [[5, 15, 25], [6, 16], [7]]  # p50s 15, 11, 7: median 11


def test_ttft_reduction_point_hand_computed():
    c = ttft_reduction(BASE, CAND, resamples=FEW)
    assert c.point == approx(45.0)  # 1 - 11/20
    assert (c.n_baseline, c.n_candidate, c.confidence) == (3, 3, 0.95)


def test_ttft_reduction_slower_candidate_is_negative():
    c = ttft_reduction([[10.0]], [[12.5]], resamples=FEW)
    assert c.point == approx(-25.0)
    # One request per arm: nothing to resample, the interval is the point.
    assert c.interval == approx((-25.0, -25.0))


def test_throughput_gain_point_hand_computed():
    c = throughput_gain([100, 110, 90], [130, 125, 135], resamples=FEW)
    assert c.point == approx(30.0)  # 130 / 100 - 1
    assert throughput_gain([4.0, 4.0], [2.0, 6.0, 3.0], resamples=FEW).point == approx(-25.0)


def test_statistic_text_says_what_was_computed():
    c = ttft_reduction(BASE, CAND)
    assert c.statistic_text == ("p50 TTFT over requests, median over 3 repetitions, 95 % "
                                "bootstrap CI (2000 resamples of repetitions and requests "
                                "within them, seed 0)")
    c = ttft_reduction(BASE, CAND[:2], confidence=0.9, seed=7, resamples=50,
                       hierarchical=False)
    assert "3 (baseline) / 2 (candidate) repetitions" in c.statistic_text
    assert "90 % bootstrap CI (50 resamples of repetitions, seed 7)" in c.statistic_text
    c = throughput_gain([1, 2, 3], [2, 3, 4], resamples=10)
    assert c.statistic_text == ("output throughput per repetition, median over 3 repetitions, "
                                "95 % bootstrap CI (10 resamples of repetitions, seed 0)")


@pytest.mark.parametrize(("base", "cand", "match"), [
    ([], [[1.0]], "baseline arm has no repetitions"),
    ([[1.0]], [[1.0], []], "repetition 2 of the candidate arm has no values"),
    ([[1.0, 0.0]], [[1.0]], "not finite"),
    ([[1.0]], [[math.nan]], "not finite"),
    ([[1.0]], [[-1.0]], "not finite"),
])
def test_ttft_reduction_rejects_bad_arms(base, cand, match):
    with pytest.raises(ValueError, match=match):
        ttft_reduction(base, cand, resamples=FEW)


def test_throughput_gain_rejects_bad_arms():
    with pytest.raises(ValueError, match="baseline arm"):
        throughput_gain([0.0, 1.0], [1.0])  # a zero baseline would divide by zero
    with pytest.raises(ValueError, match="candidate arm has no"):
        throughput_gain([1.0], [])
    # A candidate that produced nothing is a measurable -100 %.
    assert throughput_gain([1.0], [0.0], resamples=FEW).point == approx(-100.0)


@pytest.mark.parametrize(("kw", "match"), [
    ({"confidence": 1.0}, "confidence"),
    ({"confidence": 0.0}, "confidence"),
    ({"resamples": 0}, "resamples"),
])
def test_bootstrap_settings_checked(kw, match):
    with pytest.raises(ValueError, match=match):
        ttft_reduction(BASE, CAND, **kw)
    with pytest.raises(ValueError, match=match):
        throughput_gain([1.0], [1.0], **kw)
    with pytest.raises(ValueError, match=match):
        bootstrap_ci(BASE, median_of_p50, **kw)


# ---- bootstrap ------------------------------------------------------------------------------

def _arm(rng: random.Random, reps: int, requests: int, scale: float = 1.0) -> list[list[float]]:
    # Log-normal-ish TTFTs with a per-repetition offset: run-to-run and request-level spread.
    out = []
    for _ in range(reps):
        offset = rng.gauss(0, 0.05)
        out.append([scale * math.exp(rng.gauss(offset, 0.3)) for _ in range(requests)])
    return out


def test_bootstrap_is_deterministic_with_a_seed():
    data = _arm(random.Random(1), 3, 30)
    first = bootstrap_ci(data, median_of_p50, 0.95, seed=3, resamples=FEW)
    assert bootstrap_ci(data, median_of_p50, 0.95, seed=3, resamples=FEW) == first
    assert bootstrap_ci(data, median_of_p50, 0.95, seed=4, resamples=FEW) != first
    base, cand = data, _arm(random.Random(2), 3, 30, scale=0.7)
    assert (ttft_reduction(base, cand, seed=5, resamples=FEW)
            == ttft_reduction(base, cand, seed=5, resamples=FEW))
    assert (throughput_gain([9, 10, 11], [12, 14, 13], seed=5, resamples=FEW)
            == throughput_gain([9, 10, 11], [12, 14, 13], seed=5, resamples=FEW))
    # The module never touches the global generator.
    random.seed(0)
    before = random.random()
    random.seed(0)
    ttft_reduction(base, cand, resamples=FEW)
    assert random.random() == before


def test_bootstrap_leaves_the_input_alone():
    data = [[3.0, 1.0, 2.0], [5.0, 4.0]]
    bootstrap_ci(data, median_of_p50, resamples=FEW)
    assert data == [[3.0, 1.0, 2.0], [5.0, 4.0]]


def test_ci_contains_the_point():
    rng = random.Random(11)
    base, cand = _arm(rng, 5, 40), _arm(rng, 5, 40, scale=0.7)
    c = ttft_reduction(base, cand, resamples=500)
    assert c.lo < c.point < c.hi
    assert 15 < c.point < 45  # about 30 %, by construction
    data = _arm(rng, 5, 40)
    lo, hi = bootstrap_ci(data, median_of_p50, resamples=500)
    assert lo < median_of_p50(data) < hi
    g = throughput_gain([98, 100, 103, 101, 99], [128, 131, 129, 133, 130], resamples=500)
    assert g.lo <= g.point <= g.hi and g.point == approx(30.0)


def test_ci_narrows_with_more_data():
    rng = random.Random(5)
    small, large = _arm(rng, 4, 20), _arm(rng, 40, 200)
    lo_s, hi_s = bootstrap_ci(small, median_of_p50, resamples=FEW)
    lo_l, hi_l = bootstrap_ci(large, median_of_p50, resamples=FEW)
    # 100x the requests and 10x the repetitions: expect ~1/3 of the width; ask only for less.
    assert hi_l - lo_l < 0.7 * (hi_s - lo_s)
    g_small = throughput_gain(*(_arm(rng, 2, 4)), resamples=FEW)
    g_large = throughput_gain(*(_arm(rng, 2, 40)), resamples=FEW)
    assert g_large.hi - g_large.lo < g_small.hi - g_small.lo


def test_wider_confidence_gives_wider_interval():
    data = _arm(random.Random(8), 4, 30)
    lo90, hi90 = bootstrap_ci(data, median_of_p50, 0.90, resamples=FEW)
    lo99, hi99 = bootstrap_ci(data, median_of_p50, 0.99, resamples=FEW)
    assert lo99 <= lo90 < hi90 <= hi99


def test_hierarchical_resamples_requests_too():
    one_rep = [[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]]
    # Over repetitions only, a single repetition cannot vary...
    assert bootstrap_ci(one_rep, median_of_p50, resamples=FEW, hierarchical=False) == (3.5, 3.5)
    # ...within it, its requests do.
    lo, hi = bootstrap_ci(one_rep, median_of_p50, resamples=FEW)
    assert lo < 3.5 < hi


def test_bootstrap_ci_takes_any_statistic():
    def worst_rep_mean(reps):
        return max(sum(r) / len(r) for r in reps)

    lo, hi = bootstrap_ci([[1.0, 1.0], [3.0, 3.0]], worst_rep_mean, resamples=FEW,
                          hierarchical=False)
    assert (lo, hi) == (1.0, 3.0)
    with pytest.raises(ValueError, match="without any repetition"):
        bootstrap_ci([], worst_rep_mean)


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
    with pytest.raises(ValueError, match="unknown decision statistic"):
        decide(comp(30, 27, 33), AT_LEAST_25, "mean")


def test_comparison_interval_ordered():
    with pytest.raises(ValueError, match="above its upper end"):
        comp(30, 33, 27)


def test_decide_on_a_measured_reduction():
    rng = random.Random(21)
    base = _arm(rng, 3, 40)
    assert decide(ttft_reduction(base, _arm(rng, 3, 40, scale=0.5), resamples=FEW),
                  AT_LEAST_25) == Outcome.PASS
    assert decide(ttft_reduction(base, _arm(rng, 3, 40, scale=0.95), resamples=FEW),
                  AT_LEAST_25) == Outcome.FAIL


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


# ---- properties -----------------------------------------------------------------------------

ttfts = st.floats(1e-3, 1e3, allow_nan=False)
arms = st.lists(st.lists(ttfts, min_size=1, max_size=8), min_size=1, max_size=4)
rates = st.lists(st.floats(1e-2, 1e5), min_size=1, max_size=6)


@settings(max_examples=40, deadline=None)
@given(arms, st.integers(0, 2**32), st.booleans())
def test_identical_arms_reduce_by_nothing(arm, seed, hierarchical):
    c = ttft_reduction(arm, arm, seed=seed, resamples=40, hierarchical=hierarchical)
    assert c.point == 0
    assert c.lo <= 0 <= c.hi


@settings(max_examples=40, deadline=None)
@given(rates, st.integers(0, 2**32))
def test_identical_throughputs_gain_nothing(rate, seed):
    c = throughput_gain(rate, rate, seed=seed, resamples=40)
    assert c.point == 0
    assert c.lo <= 0 <= c.hi


@settings(max_examples=40, deadline=None)
@given(arms)
def test_halved_ttfts_are_a_50_percent_reduction(arm):
    halved = [[t * 0.5 for t in rep] for rep in arm]
    assert ttft_reduction(arm, halved, resamples=5).point == approx(50.0)
    doubled = [[t * 2 for t in rep] for rep in arm]
    assert throughput_gain([median(r) for r in arm], [median(r) for r in doubled],
                           resamples=5).point == approx(100.0)


@settings(max_examples=40, deadline=None)
@given(arms, arms, st.floats(0.51, 0.999), st.integers(1, 30), st.booleans(),
       st.integers(0, 2**64))
def test_never_raises_on_valid_input(base, cand, confidence, resamples, hierarchical, seed):
    c = ttft_reduction(base, cand, confidence=confidence, resamples=resamples,
                       hierarchical=hierarchical, seed=seed)
    assert all(math.isfinite(v) for v in (c.point, c.lo, c.hi)) and c.lo <= c.hi
    assert c.point < 100 and c.hi < 100  # a TTFT > 0 cannot be reduced by 100 %
    g = throughput_gain([t for r in base for t in r], [t for r in cand for t in r],
                        confidence=confidence, resamples=resamples, seed=seed)
    assert all(math.isfinite(v) for v in (g.point, g.lo, g.hi)) and g.lo <= g.hi
    for rule in RULES:
        assert decide(c, AT_LEAST_25, rule) in (Outcome.PASS, Outcome.MARGINAL, Outcome.FAIL)
