"""Candidates ranked by their intervals (gates.model.ranking) and priced per point (model.cost)."""

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from gates.core.statistics.paired import LookPlan, sequential, to_log
from gates.core.verdicts import Limit
from gates.model.cost import price_per_point
from gates.model.ranking import (
    NOT_DISTINGUISHABLE,
    Estimate,
    rank_by_interval,
    ranking_lines,
    wrong_order_risk,
)


def est(name, point, half=3.0, miss=0.025):
    return Estimate(name=name, point=point, lo=point - half, hi=point + half, miss=miss)


def test_a_faster_tier_is_ranked_first_when_the_intervals_part():
    ranked = rank_by_interval([est("FX100", 31.0), est("FX300", 52.0)])
    assert [(r.name, r.rank) for r in ranked] == [("FX300", 1), ("FX100", 2)]
    assert ranked[0].ahead_of == ["FX100"] and ranked[1].not_distinguishable_from == []


def test_two_equal_candidates_are_not_distinguishable_and_share_the_rank():
    ranked = rank_by_interval([est("A", 30.0), est("B", 31.0)])
    assert [r.rank for r in ranked] == [1, 1]
    assert ranked[0].name == "B"  # shown by point, but not ranked by it
    lines = ranking_lines(ranked)
    assert lines[0].startswith("1. B: 31.0 % [28.0, 34.0] (misses at most 2.5 % per side)")
    assert f"{NOT_DISTINGUISHABLE} from A" in lines[0]
    assert f"{NOT_DISTINGUISHABLE} from B" in lines[1]


def test_an_order_that_does_not_chain_is_not_made_to():
    # A is clearly above C, but B overlaps both: B cannot be placed against either.
    ranked = {r.name: r for r in rank_by_interval([est("A", 40.0), est("B", 35.0),
                                                   est("C", 30.0)])}
    assert (ranked["A"].rank, ranked["B"].rank, ranked["C"].rank) == (1, 1, 2)
    assert ranked["A"].ahead_of == ["C"]
    assert sorted(ranked["B"].not_distinguishable_from) == ["A", "C"]


def test_for_a_latency_lower_is_better():
    ranked = rank_by_interval([est("slow", 2.0, 0.1), est("fast", 1.0, 0.1)],
                              higher_is_better=False)
    assert [r.name for r in ranked] == ["fast", "slow"]


@pytest.mark.parametrize("bad", [
    dict(name="X", point=1.0, lo=2.0, hi=3.0, miss=0.025),  # point outside
    dict(name="X", point=1.0, lo=math.nan, hi=3.0, miss=0.025),
    dict(name="X", point=1.0, lo=0.0, hi=math.inf, miss=0.025),
    dict(name="X", point=1.0, lo=0.0, hi=2.0, miss=0.0),
    dict(name="X", point=1.0, lo=0.0, hi=2.0, miss=0.5),
    dict(name="", point=1.0, lo=0.0, hi=2.0, miss=0.025),
])
def test_an_estimate_that_is_no_interval_is_refused(bad):
    with pytest.raises(ValidationError):
        Estimate(**bad)


def test_a_candidate_named_twice_is_refused():
    with pytest.raises(ValueError, match="named twice: A"):
        rank_by_interval([est("A", 1.0), est("A", 9.0)])


estimates = st.lists(
    st.tuples(st.floats(-50, 80), st.floats(0, 20), st.floats(0, 20)), min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(estimates)
def test_ranks_agree_with_the_pairwise_relations(rows):
    items = [Estimate(name=f"c{i}", point=p, lo=p - a, hi=p + b, miss=0.025)
             for i, (p, a, b) in enumerate(rows)]
    ranked = rank_by_interval(items)
    by = {r.name: r for r in ranked}
    assert sorted(by) == sorted(e.name for e in items)
    for r in ranked:
        assert r.rank == 1 + sum(r.name in o.ahead_of for o in ranked)
        # every other candidate is exactly one of: beaten, beating, not distinguishable
        beating = {o.name for o in ranked if r.name in o.ahead_of}
        assert set(r.ahead_of) | beating | set(r.not_distinguishable_from) == set(by) - {r.name}
        assert not set(r.ahead_of) & beating
        for other in r.ahead_of:  # an order is only ever read from intervals that part
            assert r.estimate.lo > by[other].estimate.hi
    assert [r.rank for r in ranked] == sorted(r.rank for r in ranked)


def test_the_wrong_order_risk_of_g3s_sequential_intervals_is_measured_within_its_bound():
    # What the review found: the stopping look's own level understates how often a sequential
    # interval misses, since the plan stops where an interval clears the limit. Two arrays
    # with the same true gain, at the limit where stopping bites hardest, each measured by the
    # shipped plan: how often one is ranked above the other must stay under the stated bound.
    plan = LookPlan(looks=(7, 14, 84), alpha=0.025)
    limit = Limit.at_least(25.0, "%")
    truth = to_log("reduction", 25.0)
    rng = random.Random(28)

    def measured(name):
        d = [truth + rng.gauss(0.0, 0.13) for _ in range(plan.budget)]
        final = sequential(d, "reduction", limit, plan).final
        return Estimate(name=name, point=final.point, lo=final.lo, hi=final.hi, miss=plan.risk)

    trials, wrong = 4000, 0
    for _ in range(trials):
        ranked = rank_by_interval([measured("A"), measured("B")])
        wrong += ranked[0].rank != ranked[1].rank
    bound = wrong_order_risk(measured("A"), measured("B"))
    assert bound == pytest.approx(2 * plan.risk) and bound < 0.05
    # measured: 0.7 % against the bound 4.46 % (the reviewer's near-tie with almost no spread
    # reached 2.2 %, over the stopping look's own levels but within this bound)
    assert wrong / trials <= bound, f"{wrong} of {trials} orders wrong, bound {bound:.4f}"


def test_price_per_point_spans_the_interval():
    p = price_per_point(331_200, 25.0, 40.0, 50.0)
    assert (p.point, p.low, p.high) == (pytest.approx(8280), pytest.approx(6624),
                                        pytest.approx(13248))
    assert p.note == ""


def test_a_gain_whose_interval_reaches_zero_has_no_upper_price():
    p = price_per_point(371_200, -2.0, 10.0, 20.0)
    assert p.high is None and p.low == pytest.approx(18560) and "no upper bound" in p.note
    none = price_per_point(371_200, -9.0, -3.0, -1.0)
    assert none.point is None and none.low is None and "no gain" in none.note


@pytest.mark.parametrize("args", [(0, 1, 2, 3), (-5, 1, 2, 3), (math.inf, 1, 2, 3),
                                  (100, 1, math.nan, 3), (100, 3, 2, 1)])
def test_a_price_per_point_of_nonsense_is_refused(args):
    with pytest.raises(ValueError):
        price_per_point(*args)
