"""gates.inference.comparison: G3's pairs turned into decisions, stated risks and tables."""


import pytest

from gates.core.configuration import Decision, G2Limits, G3Limits
from gates.core.verdicts import Cause, Outcome
from gates.inference import (
    Repetition,
    baseline_shift,
    design_text,
    level_done,
    level_looks,
    level_tables,
    look_plan,
)
from gates.inference.comparison import comparison

# A plan of 28 pairs (the shipped one looks at 84): the undecided cases below stay short.
LIMITS, DECISION = G3Limits(pair_looks=[7, 14, 28]), Decision()


def rep(arm, i, p50, tput, c=8):
    return Repetition(arm=arm, concurrency=c, repetition=i, ttfts=[p50], sent=1, errors=0,
                      output_throughput=tput)


def pairs(ratios_ttft, ratios_tput, c=8):
    """Pairs whose candidate/baseline ratios are given: baseline 2 s, 100 tok/s."""
    return [(rep("baseline", i, 2.0, 100.0, c), rep("candidate", i, 2.0 * a, 100.0 * b, c))
            for i, (a, b) in enumerate(zip(ratios_ttft, ratios_tput, strict=True))]


def by_id(ms):
    return {m.id: m for m in ms}


CLEAR = pairs([0.5, 0.52, 0.49, 0.51, 0.5, 0.48, 0.53],
              [1.6, 1.62, 1.58, 1.61, 1.6, 1.63, 1.59])


def test_a_clear_level_is_decided_at_the_first_look_with_its_risk_stated():
    assert not level_done(level_looks(8, CLEAR[:6], LIMITS, DECISION))  # no look before 7
    assert level_done(level_looks(8, CLEAR, LIMITS, DECISION))
    ms = by_id(comparison(8, CLEAR, LIMITS, DECISION))
    ttft = ms["g3.ttft_p50_reduction"]
    assert ttft.outcome is Outcome.PASS and ttft.value == pytest.approx(50.0)  # median 0.5
    assert ttft.interval == pytest.approx((47.0, 52.0))  # the extremes at 7 pairs
    assert "median of candidate / baseline over 7 ABBA pairs" in ttft.note
    assert "look 1 of 3 at [7, 14, 28] pairs" in ttft.note
    assert "P(PASS)" in ttft.note and "if the true figure were the limit 25 %" in ttft.note


def test_the_stated_risk_is_for_the_pairs_the_time_budget_holds_at_their_pace():
    noisy = pairs([0.5, 0.9, 0.45, 0.7, 0.55, 0.8, 0.6], [1.6] * 7)
    whole = by_id(comparison(8, noisy, LIMITS, DECISION))["g3.ttft_p50_reduction"].note
    assert "pace" not in whole
    # 7 pairs in half the budget: 14 would fit, the plan's 28 would not.
    slow = by_id(comparison(8, noisy, LIMITS, DECISION,
                            seconds=LIMITS.comparison_budget / 2))["g3.ttft_p50_reduction"]
    assert "at most 14 pairs in g3.comparison_budget at the pace these pairs ran" in slow.note
    fast = comparison(8, noisy, LIMITS, DECISION, seconds=LIMITS.comparison_budget / 100)
    assert "pace" not in by_id(fast)["g3.ttft_p50_reduction"].note


def test_a_fail_on_one_figure_stops_the_level_and_the_other_says_why():
    level = pairs([1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0],  # no TTFT gain
                  [1.6, 1.2, 2.1, 1.1, 1.9, 1.25, 1.3])  # throughput noisy about the limit
    assert level_done(level_looks(8, level, LIMITS, DECISION))
    ms = by_id(comparison(8, level, LIMITS, DECISION))
    assert ms["g3.ttft_p50_reduction"].outcome is Outcome.FAIL
    gain = ms["g3.throughput_gain"]
    assert gain.outcome is Outcome.MARGINAL
    assert "not decided (the level stopped when the TTFT p50 reduction failed)" in gain.note


# Half the pairs at 35 %, half at 20 %: a median between them, and no majority either side.
UNDECIDED = [0.65, 0.8] * 14


def test_an_undecided_level_goes_on_until_the_budget_then_says_so():
    level = pairs(UNDECIDED, [1.6] * 28)
    for n in (7, 14):
        assert not level_done(level_looks(8, level[:n], LIMITS, DECISION)), n
    ttft = by_id(comparison(8, level, LIMITS, DECISION))["g3.ttft_p50_reduction"]
    assert ttft.outcome is Outcome.MARGINAL and 20 < ttft.value < 35
    assert "not decided at the plan's last look (28 pairs): as many pairs fall on either side " \
        "of the limit" in ttft.note


def test_a_majority_beyond_the_limit_says_how_many_more_pairs_would_decide():
    level = pairs([0.65, 0.65, 0.8] * 9 + [0.65], [1.6] * 28)  # two thirds at 35 %
    ttft = by_id(comparison(8, level, LIMITS, DECISION))["g3.ttft_p50_reduction"]
    # 19 of 28 beyond: P(X >= 19) = 4.4 % under a median at the limit, above 0.83 % a look;
    # at the same share, 40 pairs (28 beyond: P = 0.83 %) would be the first to decide.
    assert ttft.outcome is Outcome.MARGINAL and ttft.value == pytest.approx(35.0)
    assert "about 12 more pairs with this share of pairs beyond the limit would decide it" \
        in ttft.note


def test_a_spent_time_budget_looks_once_more_at_the_pairs_that_ran_then_is_marginal():
    ms = by_id(comparison(8, pairs(UNDECIDED[:10], [1.6] * 10), LIMITS, DECISION,
                          time_spent=True))
    ttft = ms["g3.ttft_p50_reduction"]
    assert ttft.outcome is Outcome.MARGINAL and "g3.comparison_budget" in ttft.note
    cut = look_plan(LIMITS, DECISION).cut_short(10)
    assert (f"a last look at the 10 pairs that ran when the time budget cut the plan at "
            f"[7, 14, 28] pairs short; the plan's chance of wrongly clearing a limit at any "
            f"look, counted exactly: {100 * cut.risk:.3g} %") in ttft.note
    # The report's table of looks shows that last look at its own level (it was a crash).
    table = level_tables(8, pairs(UNDECIDED[:10], [1.6] * 10), LIMITS, DECISION)[
        "Sequential looks @ concurrency 8"]
    assert [row[1] for row in table.rows] == ["7", "10"]
    assert table.rows[-1][-1] == f"{100 * cut.level(10):.4g} %"


def test_fewer_pairs_than_the_first_look_are_an_error_saying_so():
    ttft = by_id(comparison(8, CLEAR[:5], LIMITS, DECISION))["g3.ttft_p50_reduction"]
    assert ttft.outcome is Outcome.ERROR
    assert ttft.note == ("no look was made: the plan's first look is at 7 pairs (5 pairs ran, "
                         "fewer than the plan's 28)")


def test_a_claimed_band_overshoot_is_flagged():
    gain = by_id(comparison(8, pairs([0.5] * 7, [2.0, 2.02, 1.98, 2.0, 2.01, 1.99, 2.0]),
                            LIMITS, DECISION))["g3.throughput_gain"]
    assert gain.outcome is Outcome.PASS and "above the claimed band" in gain.note


def test_the_tables_show_every_pair_and_look():
    tables = level_tables(8, CLEAR, LIMITS, DECISION)
    assert tables["Pairs @ concurrency 8 (ABBA)"].rows[1][1] == "candidate, baseline"
    looks = tables["Sequential looks @ concurrency 8"]
    # 7 pairs at the first look's rank 1: the extremes, a 1 - 2/128 interval.
    assert looks.rows[0][:2] == ["1", "7"] and "→ PASS" in looks.rows[0][2]
    assert looks.columns[-1] == "interval's level" and looks.rows[0][-1] == "98.44 %"


def test_the_design_states_its_false_accept_bound():
    text = design_text(LIMITS, DECISION)
    assert "not independent draws" in text and "at most 2.5 %" in text


def test_a_moved_baseline_is_a_deviation_naming_both_figures():
    g2 = [rep("baseline", i, 2.0, 100.0) for i in range(3)]
    g3 = [rep("baseline", i, 2.5, 100.0) for i in range(3)]
    [found] = baseline_shift(8, g2, g3, LIMITS, G2Limits())
    assert found.cause is Cause.BASELINE_MOVED and found.blocks
    assert found.text.startswith("G3's baseline moved from G2's at concurrency 8: TTFT p50 2.5 s "
                                 "in G3 against 2 s in G2 (+25.0 %, g3.baseline_shift_max 10 %)")
    assert baseline_shift(8, g2, g2, LIMITS, G2Limits()) == []


def test_the_g3_report_states_the_design_in_its_decision_rule():
    from gates.core.verdicts import GateRecord
    from gates.report.report import decision_rule

    record = GateRecord(gate="g3", run_id="r", site="s", started="t",
                        facts={"comparison design": design_text(LIMITS, DECISION)})
    rule = decision_rule(record, "point", 0.95, 0.0)
    assert "Comparison (G3): Requests queued behind each other" in rule
    assert "at most 2.5 %" in rule
    assert "Comparison" not in decision_rule(record.model_copy(update={"facts": {}}),
                                             "point", 0.95, 0.0)
