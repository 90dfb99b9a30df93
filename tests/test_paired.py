"""gates.core.paired: the pair-level interval, the schedule of looks, and the rule's risk.

Seeded and fast: the coverage and risk figures are Monte Carlo on synthetic pairs with a known
effect, so they say what the method does, not what this machine did today.
"""

import math
import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gates.core.configuration import Decision, G3Limits
from gates.core.statistics import LookPlan, log_ratios, pairs_needed, pass_probability, sequential
from gates.core.statistics.paired import (
    binomial_tail,
    coverage_of,
    fewest_pairs,
    look,
    looks_problem,
    sign_interval,
    to_log,
    to_percent,
)
from gates.core.statistics.spending import _extend, cut_short, spending_ranks, spent_risk
from gates.core.verdicts import Limit
from gates.engines import abba_pair
from gates.inference import Repetition, level_looks, look_plan

REDUCTION = Limit.at_least(25.0, "%", key="g3.ttft_p50_reduction_min")
GAIN = Limit.at_least(29.0, "%", key="g3.throughput_gain_min")
PLAN = LookPlan(looks=(7, 14, 28), alpha=0.025)


def pairs(n, reduction, sd, seed=0):
    """n (baseline, candidate) TTFT p50s whose true (median) reduction is ``reduction`` %."""
    rng = random.Random(seed)
    base, cand = [], []
    for _ in range(n):
        b = 2.0 * math.exp(rng.gauss(0, sd / 2))
        base.append(b)
        cand.append(b * (1 - reduction / 100) * math.exp(rng.gauss(0, sd)))
    return base, cand


QUEUE = 16  # requests queued behind each other in one repetition


class _Arm:
    """An arm whose repetition queues QUEUE requests (request q's TTFT: (0.36 + 0.11 q) s of
    service, scaled by the arm's speedup and the machine's slowness when the repetition ran)."""

    def __init__(self, name, speedup, machine, clock, sd, rng):
        self.name, self.speedup, self.machine, self.clock = name, speedup, machine, clock
        self.sd, self.rng = sd, rng

    def rep(self, c, i, again):
        t = len(self.clock)  # this repetition's place in the schedule, both arms counted
        self.clock.append(self.name)
        slow = self.machine(t) * math.exp(self.rng.gauss(0, self.sd))
        ttfts = [slow * self.speedup * (0.36 + 0.11 * q) for q in range(QUEUE)]
        return Repetition(arm=self.name, concurrency=c, repetition=i, ttfts=ttfts,
                          output_throughput=QUEUE * 64 / (slow * self.speedup * 4.0),
                          sent=QUEUE, errors=0)


def _run_pairs(n, machine, speedup, sd, rng):
    """n pairs as G3 runs them (gates.engines.abba_pair), and the order the arms ran in."""
    clock = []
    arms = {"baseline": _Arm("baseline", 1.0, machine, clock, sd, rng),
            "candidate": _Arm("candidate", speedup, machine, clock, sd, rng)}
    return [abba_pair(arms, 1, i, 0, lambda _: None, lambda: None) for i in range(n)], clock


# ---- the interval --------------------------------------------------------------------------

def test_sign_interval_hand_computed():
    # 7 pairs at the first look's level (rank 1, the extremes): P(miss) = 2/128.
    d = [0.3, -0.1, 0.2, 0.0, 0.5, -0.4, 0.1]
    median, lo, hi = sign_interval(d, PLAN.level(7))
    assert (median, lo, hi) == (0.1, -0.4, 0.5)
    assert coverage_of(7, PLAN.level(7)) == pytest.approx(1 - 2 / 128)
    # 20 pairs at 95 %: k = 6 (P(X <= 5) = 0.0207 <= 0.025, P(X <= 6) = 0.0577 > 0.025).
    d20 = [i / 10 for i in range(20)]
    assert sign_interval(d20, 0.95)[1:] == (0.5, 1.4)


def test_an_interval_of_no_pairs_is_refused_by_name():
    with pytest.raises(ValueError, match="^an interval needs at least one pair$"):
        sign_interval([], 0.95)


def test_too_few_pairs_give_an_unbounded_interval():
    median, lo, hi = sign_interval([0.1, 0.2, 0.3], PLAN.level(7))
    assert median == 0.2 and lo == -math.inf and hi == math.inf
    assert coverage_of(3, 0.95) == 1.0  # an unbounded interval always holds the median
    assert fewest_pairs(0.025 / 3) == 7 and fewest_pairs(0.025) == 6


def _noise(rng, shape, n, sd=0.1):
    if shape == "normal":
        return [rng.gauss(0, sd) for _ in range(n)]
    if shape == "heavy":  # Student t with 3 degrees of freedom
        return [sd * rng.gauss(0, 1) / math.sqrt(rng.gammavariate(1.5, 2) / 3)
                for _ in range(n)]
    # Lognormal, right-skewed (skewness 1.8), centred at its median: a slow repetition now
    # and then, the shape the recorded simulator pairs had.
    return [sd * (rng.lognormvariate(0, 0.5) - 1) for _ in range(n)]


def coverage(shape, n, level, trials=3000):
    """Share of intervals at ``level`` from n synthetic pairs that hold the true median."""
    rng, true_d, covered = random.Random(n), math.log(0.7), 0
    for _ in range(trials):
        _, lo, hi = sign_interval([true_d + e for e in _noise(rng, shape, n)], level)
        covered += lo <= true_d <= hi
    return covered / trials


@pytest.mark.parametrize("n", [7, 10, 14, 20, 28])
@pytest.mark.parametrize("shape", ["normal", "heavy", "skewed"])
def test_interval_coverage_on_synthetic_pairs(n, shape):
    """The nominal 95 % interval covers the true median at least 93 % of the time, at every
    pair count, whatever the noise's shape (the sign test's is exact, or above)."""
    assert coverage(shape, n, 0.95) >= max(0.93, coverage_of(n, 0.95) - 0.015), (n, shape)


def test_a_staircase_inside_a_repetition_does_not_widen_the_interval():
    """Queue position is not noise: 16 requests queued behind each other in each repetition
    (TTFTs 0.36 .. 2.01 s, a spread of 140 % of their median), slow states of the machine
    that each last one pair (30 % sd), 2 % noise of a repetition's own. Through the real
    path (Repetition -> ABBA pair -> G3's looks) the interval is the pairs' 2 %, not the queue's
    140 % nor the slow states' 30 %."""
    rng = random.Random(3)
    state = [math.exp(rng.gauss(0, 0.3)) for _ in range(14)]  # pair i's machine speed
    pairs_, _ = _run_pairs(14, lambda t: state[t // 2], speedup=0.5, sd=0.02, rng=rng)
    final = level_looks(1, pairs_, G3Limits(), Decision(), spent=True)[
        "g3.ttft_p50_reduction"].final
    assert final.pairs == 7 and final.outcome == "PASS"  # 7 of 7 beyond the limit
    assert final.lo <= 50.0 <= final.hi and final.hi - final.lo < 8.0, final


def test_log_ratios_refuse_what_is_not_a_pair():
    with pytest.raises(ValueError, match="^2 baseline but 1 candidate figures: a pair needs "
                                         "one of each$"):
        log_ratios([1.0, 2.0], [1.0])
    with pytest.raises(ValueError) as refused:  # the first three bad figures, not all
        log_ratios([0.0, -1.0, math.inf, 1.0], [1.0, 1.0, 1.0, -2.0])
    assert str(refused.value) == "a pair's figure is not finite and > 0: [0.0, -1.0, inf]"
    with pytest.raises(ValueError, match="not finite and > 0"):
        log_ratios([1.0, 0.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="not finite and > 0"):
        log_ratios([1.0, math.nan], [1.0, 1.0])


@given(st.floats(-99.0, 99.0))
def test_percent_and_log_are_inverse(percent):
    for metric in ("reduction", "gain"):
        assert to_percent(metric, to_log(metric, percent)) == pytest.approx(percent, abs=1e-9)


# ---- the plan ------------------------------------------------------------------------------

def test_a_ratio_too_large_for_a_float_is_an_unbounded_percentage():
    # e^709.9 overflows a float: the figure is unbounded, not an error.
    assert to_percent("gain", 709.9) == math.inf
    assert to_percent("reduction", 709.9) == -math.inf
    assert to_percent("gain", 708.0) == pytest.approx(100 * (math.exp(708.0) - 1))


def test_a_reduction_of_100_percent_or_more_has_no_ratio():
    for percent, words in ((100.0, "100"), (150.0, "150")):
        with pytest.raises(ValueError) as refused:
            to_log("reduction", percent)
        assert str(refused.value) == f"{words} % is not a reduction a ratio can have"


@pytest.mark.parametrize("looks", [(), (1, 8), (8, 8), (9, 8), (8, 2000), (3, 5, 8, 12)])
def test_a_plan_refuses_looks_it_cannot_make(looks):
    with pytest.raises(ValueError):
        LookPlan(looks=looks, alpha=0.025)


def test_a_schedule_s_problem_is_said_in_words():
    assert looks_problem([]) == "no looks: the rule needs at least one"
    assert looks_problem([7, 14, 2000]) == "[7, 14, 2000] goes up to 2000 pairs: at most 1000"
    assert looks_problem([7, 14, 1000]) == ""  # MAX_PAIRS itself is allowed
    assert looks_problem([7, 14, 14]) == "[7, 14, 14] must rise strictly from at least 2 pairs"
    assert looks_problem([2, 5]) == ""  # 2 pairs is a look (with no alpha to say it is early)


def test_a_first_look_the_sign_test_cannot_decide_is_named():
    assert looks_problem([3, 5, 8, 12], 0.025) == (
        "[3, 5, 8, 12]: a look at 3 pairs can never decide: at 0.625 % per side per look the "
        "sign test needs 8 pairs (start at 8, or make fewer looks)")
    assert looks_problem([7, 14, 28], 0.025) == ""


def test_a_28_pair_plan_spends_what_bonferroni_would_at_these_counts():
    # 7 pairs all beyond the limit (2^-7 = 0.78 %), then 3 and 8 of 14 and 28 below it: one
    # more at 28 would take the exact count over 2.5 %; an equal share each (0.83 %) gives
    # the same ranks, so the exact count only shows how much of alpha is left unspent.
    assert PLAN.ranks == (1, 3, 8) and PLAN.budget == 28
    assert PLAN.level(7) == pytest.approx(1 - 2 / 128)
    assert PLAN.risk == pytest.approx(0.016969, abs=1e-6) and PLAN.risk <= 0.025
    with pytest.raises(ValueError, match="not at 10"):
        PLAN.rank(10)


def test_what_an_early_look_leaves_unspent_passes_to_the_last():
    # The shipped plan (thresholds.toml, confidence 0.95): at 84 pairs Bonferroni (0.83 % per
    # look) allows 30 below; counted exactly, 31. The README and every report state 2.23 %.
    plan = look_plan(G3Limits(), Decision())
    assert plan.looks == (7, 14, 84) and plan.alpha == pytest.approx(0.025)
    assert plan.ranks == (1, 3, 32) and binomial_tail(84, 30) <= 0.025 / 3
    assert binomial_tail(84, 31) > 0.025 / 3 and f"{100 * plan.risk:.3g} %" == "2.23 %"
    assert plan.levels == "98.44 / 98.71 / 97.86 %"


def _crossing_by_enumeration(looks, ranks):
    """Share of all 2^n sign sequences on which some look has at most rank - 1 pairs below."""
    n, hit = looks[-1], 0
    for signs in range(2 ** n):
        below = [bin(signs & ((1 << m) - 1)).count("1") for m in looks]
        hit += any(b <= k - 1 for b, k in zip(below, ranks, strict=True))
    return hit / 2 ** n


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(2, 13), min_size=1, max_size=4, unique=True).map(sorted),
       st.floats(0.002, 0.3))
def test_the_counted_risk_is_every_sign_sequence_enumerated_and_within_alpha(looks, alpha):
    try:
        plan = LookPlan(looks=tuple(looks), alpha=alpha)
    except ValueError:
        return  # a first look that can never decide: refused, tested above
    assert plan.risk == pytest.approx(_crossing_by_enumeration(looks, plan.ranks))
    assert plan.risk <= alpha
    for j, (n, k) in enumerate(zip(plan.looks, plan.ranks, strict=True)):
        if k < n // 2:  # one rank more at this look would overspend its share
            more = plan.ranks[:j] + (k + 1,)
            assert _crossing_by_enumeration(plan.looks[:j + 1], more) > \
                alpha * (j + 1) / len(looks)


# ---- the sequential rule on constructed data -----------------------------------------------

def test_a_clear_gain_passes_at_the_first_look():
    base, cand = pairs(28, 60.0, 0.03)
    s = sequential(log_ratios(base, cand), "reduction", REDUCTION, PLAN)
    assert [x.pairs for x in s.looks] == [7] and s.final.outcome == "PASS"
    assert s.final.lo > 25.0


def test_no_gain_fails_early_and_never_passes():
    base, cand = pairs(28, 0.0, 0.03)
    s = sequential(log_ratios(base, cand), "reduction", REDUCTION, PLAN)
    assert s.final.outcome == "FAIL" and s.final.hi < 25.0 and len(s.looks) == 1


# Pairs scattered evenly about a reduction of exactly the limit: every look's median sits on it.
AT_LIMIT = [to_log("reduction", 25.0) + 0.05 * x
            for x in [1, -1, 0, 0.5, -0.5, 1, -1] * 4]


def test_a_gain_at_the_limit_runs_to_the_budget_and_is_marginal():
    s = sequential(AT_LIMIT, "reduction", REDUCTION, PLAN)
    assert [x.pairs for x in s.looks] == [7, 14, 28]
    assert [x.outcome for x in s.looks] == ["continue"] * 2 + ["MARGINAL"]
    assert s.final.point == pytest.approx(25.0)
    assert pairs_needed(AT_LIMIT, "reduction", REDUCTION, PLAN) is None  # no count decides it


def test_one_look_alone_continues_unless_told_it_is_the_last():
    # One look at 7 pairs about the limit: undecided, so "continue", MARGINAL only as the last.
    d = AT_LIMIT[:7]
    assert look(d, "reduction", REDUCTION, PLAN).outcome == "continue"
    assert look(d, "reduction", REDUCTION, PLAN, last=True).outcome == "MARGINAL"
    clear = [to_log("reduction", r) for r in (40, 45, 50, 55, 60, 65, 70)]
    assert look(clear, "reduction", REDUCTION, PLAN).outcome == "PASS"  # the point rule


def test_the_bound_rule_holds_the_interval_s_end_to_the_guard_band_at_every_look():
    # Point 35 %, lower end 26 %: inside the 25-27.5 % guard band. The point rule passes;
    # the bound rule cannot pass this look, and leaves the decision to the next.
    banded = Limit.at_least(25.0, "%", marginal=0.1)
    d = [to_log("reduction", r) for r in (26, 30, 33, 35, 37, 40, 45)]
    assert sequential(d, "reduction", banded, PLAN).final.outcome == "PASS"
    bound = sequential(d, "reduction", banded, PLAN, "lower_confidence_bound")
    assert [x.outcome for x in bound.looks] == ["continue"]
    assert look(d, "reduction", banded, PLAN, "lower_confidence_bound").outcome == "continue"


def test_looks_wait_for_their_pair_counts():
    s = sequential(AT_LIMIT[:20], "reduction", REDUCTION, PLAN)
    assert [x.pairs for x in s.looks] == [7, 14]
    assert s.final.outcome == "continue"
    spent = sequential(AT_LIMIT[:20], "reduction", REDUCTION, PLAN, spent=True)
    # Time spent at 20 pairs: the 6 after the look at 14 get a last look of their own.
    assert [x.pairs for x in spent.looks] == [7, 14, 20]
    assert [x.outcome for x in spent.looks] == ["continue", "continue", "MARGINAL"]
    at_a_look = sequential(AT_LIMIT[:14], "reduction", REDUCTION, PLAN, spent=True)
    assert [x.outcome for x in at_a_look.looks] == ["continue", "MARGINAL"]  # no cut needed
    assert spent.final.level == pytest.approx(PLAN.cut_short(20).level(20))


def test_a_plan_cut_short_keeps_its_ranks_and_spends_what_is_left_on_its_last_look():
    plan = look_plan(G3Limits(), Decision())  # the shipped (7, 14, 84)
    cut = plan.cut_short(40)
    assert cut.looks == (7, 14, 40) and cut.ranks[:2] == plan.ranks[:2]
    assert cut.risk <= 0.025  # the 84-pair look's share and what the others left
    # One rank more at 40 pairs would take the exact count over alpha.
    assert spent_risk_of(cut.looks, cut.ranks[:2] + (cut.ranks[2] + 1,)) > 0.025
    for pairs in (7, 14, 3, 84, 90):  # at a look, before the first, at or past the budget
        with pytest.raises(ValueError):
            plan.cut_short(pairs)
    # A cut plan is the plan's own looks, then one more in the next gap, or it is refused.
    for looks, planned in (((5, 10), (7, 14, 84)), ((7, 20), (7, 14, 84)),
                           ((2, 10), (2, 14, 84)), ((7, 14, 70), (7, 14, 84, 60))):
        with pytest.raises(ValueError):
            LookPlan(looks=looks, alpha=0.025, planned=planned)


def test_a_cut_is_refused_at_a_look_of_the_plan_naming_where():
    # A cut at one of the plan's own looks is no cut: that look is made as planned.
    plan = look_plan(G3Limits(), Decision())  # the shipped (7, 14, 84)
    with pytest.raises(ValueError, match=r"a plan at \[7, 14, 84\] pairs cut short after 1 "
                                         r"looks cannot make its last look at 14 pairs"):
        plan.cut_short(14)
    with pytest.raises(ValueError, match=r"^a plan at \[7, 14, 84\] pairs cut short after 1 "
                                         r"looks cannot make its last look at 7 pairs$"):
        cut_short((7, 14, 84), 0.025, 1, 7)
    assert cut_short((7, 14, 84), 0.025, 1, 8)[0] == plan.ranks[0]  # the next pair: a cut


def test_a_look_too_early_to_decide_gets_rank_0_and_spends_nothing():
    # 3 pairs all one side happen 12.5 % of the time: over a 5 % share, so the look's
    # interval stays unbounded (rank 0) and none of alpha is spent on it.
    assert spending_ranks((3,), 0.05) == (0,) and spent_risk((3,), 0.05) == 0.0
    # At 8 pairs every path is still counted: at most 1 of 8 below is 9/256 of them.
    assert spending_ranks((3, 8), 0.05) == (0, 2) and spent_risk((3, 8), 0.05) == 9 / 256


def test_a_look_may_spend_its_share_exactly():
    # 3 pairs, alpha 1/8: all three beyond is exactly alpha, which "at most alpha" allows.
    plan = LookPlan(looks=(3,), alpha=0.125)
    assert plan.ranks == (1,) and plan.risk == 0.125


def spent_risk_of(looks, ranks):
    """The exact count of sign sequences on which some look clears, for any ranks (a second
    count beside the module's, too many pairs here to enumerate every sequence)."""
    paths, done, crossing = {0: 1}, 0, Fraction(0)
    for n, k in zip(looks, ranks, strict=True):
        paths, done = _extend(paths, n - done), n
        crossing += Fraction(sum(c for b, c in paths.items() if b <= k - 1), 2 ** n)
        paths = {b: c for b, c in paths.items() if b >= k}
    return float(crossing)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(2, 13), min_size=2, max_size=4, unique=True).map(sorted),
       st.floats(0.002, 0.3), st.data())
def test_a_cut_short_plan_s_risk_is_every_sign_sequence_enumerated_and_within_alpha(
        looks, alpha, data):
    try:
        plan = LookPlan(looks=tuple(looks), alpha=alpha)
    except ValueError:
        return
    gaps = [n for n in range(looks[0] + 1, looks[-1]) if n not in looks]
    if not gaps:
        return
    cut = plan.cut_short(data.draw(st.sampled_from(gaps)))
    assert cut.ranks[:-1] == plan.ranks[:len(cut.looks) - 1]
    assert cut.risk == pytest.approx(_crossing_by_enumeration(cut.looks, cut.ranks))
    assert cut.risk <= alpha


def test_a_gain_passes_on_throughput_with_the_same_rule():
    base, _ = pairs(28, 0.0, 0.02)
    rng = random.Random(5)
    gains = [b * 1.6 * math.exp(rng.gauss(0, 0.02)) for b in base]  # 60 % more tok/s
    s = sequential(log_ratios(base, gains), "gain", GAIN, PLAN)
    assert s.final.outcome == "PASS" and s.final.point == pytest.approx(60.0, abs=5)  # 7 pairs


def test_aa_under_drift_does_not_pass(monkeypatch):
    """A/A on a machine that slows 5 % of its first speed with every repetition, the drift
    applied to each repetition at its place in the schedule (ABBA, gates.engines.abba_pair).
    ABBA alternates which arm runs second (and slower): the pairs straddle 0 and a limit of 2 %
    is not passed. The same schedule with the candidate always first reads the drift as a
    reduction of 2-5 % in every pair, and passes: the drift is strong enough to be seen."""
    low = G3Limits(ttft_p50_reduction_min=2.0, throughput_gain_min=2.0)

    def aa():
        pairs_, _ = _run_pairs(14, lambda t: 1 + 0.05 * t, speedup=1.0, sd=0.002,
                               rng=random.Random(8))
        return level_looks(1, pairs_, low, Decision(), spent=True)

    for s in aa().values():
        assert s.final.outcome != "PASS" and s.final.lo < 0 < s.final.hi, s.final
        assert abs(s.final.point) < 1.5, s.final
    monkeypatch.setattr("gates.engines.runner.ORDERS", (("candidate", "baseline"),) * 2)
    assert all(s.final.outcome == "PASS" and s.final.lo > 2.0 for s in aa().values())


def test_a_slow_repetition_now_and_then_does_not_move_the_decision():
    """Right skew (the recorded simulator pairs' shape): the median pair decides, not the
    outlier; a t interval on the mean passed such candidates at the limit 13-19 % of the time."""
    d = [to_log("reduction", 40.0)] * 7
    slow = d[:5] + [math.log(1.4) + d[0]] * 2  # two candidate repetitions 40 % slow
    assert sequential(d, "reduction", REDUCTION, PLAN).final.outcome == "PASS"
    assert sequential(slow, "reduction", REDUCTION, PLAN).final.point == \
        pytest.approx(40.0)


def test_pairs_needed_is_what_the_observed_share_would_take():
    # 7 pairs, 5 beyond the limit: the sign test at an equal share per look (0.83 % per side)
    # decides once the count beyond reaches its critical value at that share.
    beyond, short = to_log("reduction", 35.0), to_log("reduction", 20.0)
    d = [beyond] * 5 + [short] * 2
    n = pairs_needed(d, "reduction", REDUCTION, PLAN)
    assert n is not None and n > 7
    side = 0.025 / 3
    assert binomial_tail(n, n - math.ceil(5 / 7 * n)) <= side
    assert binomial_tail(n - 1, n - 1 - math.ceil(5 / 7 * (n - 1))) > side


BEYOND, SHORT = to_log("reduction", 35.0), to_log("reduction", 20.0)


def test_pairs_needed_has_no_number_without_pairs():
    assert pairs_needed([], "reduction", REDUCTION, PLAN) is None


def test_pairs_needed_never_answers_fewer_pairs_than_ran():
    # 7 pairs all beyond would already decide (2^-7 <= 0.83 %): 20 ran, so 20, not 7.
    assert pairs_needed([BEYOND] * 20, "reduction", REDUCTION, PLAN) == 20


def test_pairs_needed_holds_an_upper_limit_as_it_holds_a_lower_one():
    ceiling = Limit.at_most(10.0, "%")  # a gain of at most 10 %, seven pairs all at 20 %
    assert pairs_needed([to_log("gain", 20.0)] * 7, "gain", ceiling, PLAN) == 7
    assert pairs_needed([to_log("gain", 20.0)] * 6, "gain", ceiling, PLAN) == 7


def test_pairs_needed_decides_where_the_tail_is_exactly_the_look_s_share():
    plan = LookPlan(looks=(3,), alpha=0.125)  # one look, 1/8 a side
    assert pairs_needed([BEYOND], "reduction", REDUCTION, plan) == 3  # 2^-3 is exactly 1/8


def test_pairs_needed_counts_up_to_the_most_pairs_a_plan_may_have_and_no_further():
    # 536 of 997 pairs beyond: at the plan's 0.83 % a side, first decided at 999 pairs.
    d = [BEYOND] * 536 + [SHORT] * 461
    assert pairs_needed(d, "reduction", REDUCTION, PLAN) == 999
    # 530 of 986 beyond: 1,001 pairs would decide, more than any plan may have (MAX_PAIRS).
    d = [BEYOND] * 530 + [SHORT] * 456
    assert pairs_needed(d, "reduction", REDUCTION, PLAN) is None


# ---- the rule's risk -----------------------------------------------------------------------

def test_false_accept_at_the_limit_is_within_alpha():
    risk = pass_probability(PLAN, "reduction", REDUCTION, 25.0, 0.1, sims=3000, seed=7)
    assert risk <= 0.025 + 3 * math.sqrt(0.025 * 0.975 / 3000)


def test_the_stated_risk_is_2000_simulations_from_seed_0_unless_told_otherwise():
    one = LookPlan(looks=(7,), alpha=0.025)
    stated = pass_probability(one, "reduction", REDUCTION, 35.0, 0.1)
    assert stated == pass_probability(one, "reduction", REDUCTION, 35.0, 0.1, sims=2000, seed=0)
    assert 0.4 < stated < 0.7  # a power worth stating, neither 0 nor 1


def test_the_stated_risk_is_for_the_rule_the_gate_decides_by():
    banded = Limit.at_least(25.0, "%", marginal=0.1)
    one = LookPlan(looks=(7,), alpha=0.025)
    point = pass_probability(one, "reduction", banded, 35.0, 0.1, sims=400)
    bound = pass_probability(one, "reduction", banded, 35.0, 0.1, "lower_confidence_bound",
                             sims=400)
    assert bound < point - 0.1  # the bound must clear the band too: it passes less often


def test_pairs_a_time_budget_ran_past_a_look_get_a_look_of_their_own_in_the_risk():
    # 10 pairs: the look at 7, then the plan cut short at 10; 7 pairs: the look at 7 alone.
    at_7 = pass_probability(PLAN, "reduction", REDUCTION, 35.0, 0.15, sims=400, cap=7)
    at_10 = pass_probability(PLAN, "reduction", REDUCTION, 35.0, 0.15, sims=400, cap=10)
    assert at_10 > at_7 + 0.1


def test_power_ten_points_above_the_limit_at_a_modest_spread():
    assert pass_probability(PLAN, "reduction", REDUCTION, 35.0, 0.06, sims=600) >= 0.95


def test_the_time_budget_caps_the_pairs_the_stated_risk_is_for():
    # A slow engine whose budget holds fewer pairs than the plan: the risk is the plan cut
    # short where the gate would cut it, never the whole plan's power it cannot reach.
    whole = pass_probability(PLAN, "reduction", REDUCTION, 35.0, 0.15, sims=600)
    first = PLAN.looks[0]
    capped = pass_probability(PLAN, "reduction", REDUCTION, 35.0, 0.15, sims=600,
                              cap=first + 1)
    assert capped < whole
    assert pass_probability(PLAN, "reduction", REDUCTION, 60.0, 0.01, sims=50,
                            cap=first - 1) == 0.0  # no look can be made
    assert pass_probability(PLAN, "reduction", REDUCTION, 35.0, 0.15, sims=600,
                            cap=10 * PLAN.budget) == whole
    at_limit = pass_probability(PLAN, "reduction", REDUCTION, 25.0, 0.1, sims=3000, seed=7,
                                cap=first + 1)
    assert at_limit <= 0.025 + 3 * math.sqrt(0.025 * 0.975 / 3000)  # cut short: still <= alpha


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-2.0, 2.0), min_size=2, max_size=40))
def test_the_rule_never_passes_an_interval_that_touches_the_limit(d):
    s = sequential(d, "reduction", REDUCTION, PLAN, spent=True)
    for x in s.looks:
        assert x.lo <= x.point <= x.hi
        if x.outcome == "PASS":
            assert x.lo >= 25.0
        if x.outcome == "FAIL":
            assert x.hi < 25.0
    assert sum(x.outcome in ("PASS", "FAIL") for x in s.looks) <= 1


# ---- properties of the figures -------------------------------------------------------------

positive = st.floats(1e-3, 1e3, allow_nan=False)


@settings(max_examples=40, deadline=None)
@given(st.lists(positive, min_size=7, max_size=28))
def test_identical_arms_reduce_and_gain_by_nothing(base):
    d = log_ratios(base, base)
    for metric, limit in (("reduction", REDUCTION), ("gain", GAIN)):
        s = sequential(d, metric, limit, PLAN, spent=True)
        assert s.final.point == pytest.approx(0.0, abs=1e-9)
        assert s.final.outcome == "FAIL"  # an interval of zero width on 0 %


@settings(max_examples=40, deadline=None)
@given(st.lists(positive, min_size=7, max_size=28))
def test_halved_ttfts_are_a_50_percent_reduction_and_doubled_tok_s_a_100_percent_gain(base):
    half = sequential(log_ratios(base, [b / 2 for b in base]), "reduction", REDUCTION, PLAN)
    assert half.final.point == pytest.approx(50.0) and half.final.outcome == "PASS"
    double = sequential(log_ratios(base, [b * 2 for b in base]), "gain", GAIN, PLAN)
    assert double.final.point == pytest.approx(100.0) and double.final.outcome == "PASS"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(positive, positive), min_size=2, max_size=40),
       st.floats(0.001, 0.4))
def test_never_raises_on_valid_input_and_a_reduction_never_exceeds_100(pairs, alpha):
    first = fewest_pairs(alpha / 3)
    plan = LookPlan(looks=(first, first + 5, first + 9), alpha=alpha)
    d = log_ratios([b for b, _ in pairs], [c for _, c in pairs])
    s = sequential(d, "reduction", REDUCTION, plan, spent=True)
    for x in s.looks:  # an end may be unbounded (too few pairs at a tiny alpha)
        assert math.isfinite(x.point) and x.lo <= x.point <= x.hi <= 100  # float: 1 - e^-745
