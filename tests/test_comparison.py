"""gates.inference.comparison: G3's pairs turned into decisions, stated risks and tables."""


import pytest

from gates.core.configuration import Decision, G2Limits, G3Limits
from gates.core.verdicts import Cause, Limit, Outcome
from gates.inference import (
    Repetition,
    baseline_shift,
    design_text,
    level_done,
    level_looks,
    level_tables,
    look_plan,
)
from gates.inference.comparison import comparison, figures, limits_of, pairs_read, reachable
from gates.inference.machine import CpuReference, DeviceReference

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


def test_the_guard_band_is_claimed_only_by_the_gates_whose_limits_carry_it():
    from gates.core.verdicts import GateRecord
    from gates.report.report import decision_rule

    said = "a pass within 5 % of a bound is MARGINAL; "
    for gate, claims in (("g1", True), ("g2", False), ("g3", True), ("g4", False)):
        record = GateRecord(gate=gate, run_id="r", site="s", started="t")
        assert (said in decision_rule(record, "point", 0.95, 5.0)) is claims, gate
        assert said not in decision_rule(record, "point", 0.95, 0.0)


# --- Each rule's words and limits as the report shows them (#43, mutants) -------------------

NOISY = pairs([0.5, 0.9, 0.45, 0.7, 0.55, 0.8, 0.6], [1.6] * 7)
LOOK_1 = ("median of candidate / baseline over 7 ABBA pairs, 98.44 % sign-test interval (look 1 "
          "of 3 at [7, 14, 28] pairs; the plan's chance of wrongly clearing a limit at any look, "
          "counted exactly: 1.7 %); ")
BAND = ("; above the claimed band (+29…+40 %): check that the baseline was configured fairly (a "
        "gain both arms' storage does not explain is a deviation)")


def without(level, k, **gone):
    """The level with the k-th pair's candidate (from 0) lacking the figures named."""
    b, c = level[k]
    return [*level[:k], (b, c.model_copy(update=gone)), *level[k + 1:]]


def test_each_figure_is_held_against_its_own_limit_relative_to_the_level():
    assert limits_of(16, LIMITS, DECISION) == {
        "g3.ttft_p50_reduction": Limit.at_least(
            25.0, "%", key="g3.ttft_p50_reduction_min",
            relative_to="the baseline's TTFT p50 @ concurrency 16, paired"),
        "g3.throughput_gain": Limit.at_least(
            29.0, "%", key="g3.throughput_gain_min",
            relative_to="the baseline's output throughput @ concurrency 16, paired")}


def test_the_sites_guard_band_makes_a_pass_near_the_limit_marginal():
    """[decision] marginal_band holds for G3 as the report's decision rule says: a reduction of
    25.5 % in [25.4, 25.6] against 25 % is within 5 % of the bound, MARGINAL; it PASSes only
    without the band. Under lower_confidence_bound the interval's end is held to it."""
    near = pairs([0.745, 0.746, 0.744, 0.745, 0.745, 0.746, 0.744], [1.6] * 7)
    for statistic in ("point", "lower_confidence_bound"):
        banded = Decision(statistic=statistic, marginal_band=5.0)
        assert {id: limit.marginal for id, limit in limits_of(8, LIMITS, banded).items()} == {
            "g3.ttft_p50_reduction": 0.05, "g3.throughput_gain": 0.05}
        got = by_id(comparison(8, near, LIMITS, banded))["g3.ttft_p50_reduction"]
        assert got.outcome is Outcome.MARGINAL, (statistic, got)
        plain = by_id(comparison(8, near, LIMITS, Decision(statistic=statistic)))
        assert plain["g3.ttft_p50_reduction"].outcome is Outcome.PASS


# Reductions 26-40 % (median 34), gains 30-50 % (median 40): with a 10 % band (27.5 % and
# 31.9 %) the medians clear it, the intervals' lower ends do not.
SPREAD = pairs([0.62, 0.70, 0.66, 0.74, 0.60, 0.68, 0.64],
               [1.45, 1.30, 1.40, 1.35, 1.50, 1.38, 1.42])


def test_under_lower_confidence_bound_the_interval_s_end_is_held_to_the_band():
    """The decision statistic reaches the looks and the stated risk: a median beyond the band
    PASSes under "point"; under "lower_confidence_bound" the interval's end, inside the band,
    keeps it MARGINAL, and P(PASS) is that rule's."""
    point, bound = (Decision(statistic=s, marginal_band=10.0)
                    for s in ("point", "lower_confidence_bound"))
    assert {id: s.final.outcome for id, s in level_looks(8, SPREAD, LIMITS, point,
                                                           spent=True).items()} == {
        "g3.ttft_p50_reduction": "PASS", "g3.throughput_gain": "PASS"}
    assert {id: s.final.outcome for id, s in level_looks(8, SPREAD, LIMITS, bound,
                                                           spent=True).items()} == {
        "g3.ttft_p50_reduction": "MARGINAL", "g3.throughput_gain": "MARGINAL"}
    risk = ("decision risk for this plan at the observed spread (sd of ln ratio 0.047, normal "
            "pairs): P(PASS) {} if the true figure were the limit 29 %, {} at 39 %")
    as_point = by_id(comparison(8, SPREAD, LIMITS, point))["g3.throughput_gain"]
    assert as_point.outcome is Outcome.PASS
    assert as_point.note.endswith(risk.format("1.2 %", "100.0 %")), as_point.note
    as_bound = by_id(comparison(8, SPREAD, LIMITS, bound))["g3.throughput_gain"]
    assert as_bound.outcome is Outcome.MARGINAL
    assert as_bound.note.endswith(risk.format("0.1 %", "97.5 %") + (
        "; not decided (7 pairs ran, fewer than the plan's 28): about 4 more pairs with this "
        "share of pairs beyond the guard band's edge would decide it")), as_bound.note


def test_a_median_within_the_guard_band_says_no_number_of_pairs_would_clear_it():
    """A median within the band stays MARGINAL however many pairs run: the note once said
    "about 0 more pairs ... would decide it" (the sign test's count against the bare limit)."""
    near = pairs([0.745, 0.746, 0.744, 0.745, 0.745, 0.746, 0.744], [1.6] * 7)
    for statistic in ("point", "lower_confidence_bound"):
        got = by_id(comparison(8, near, LIMITS, Decision(statistic=statistic,
                                                          marginal_band=5.0)))
        assert got["g3.ttft_p50_reduction"].note.endswith(
            "not decided (7 pairs ran, fewer than the plan's 28): the median lies within the "
            "site's guard band (5 % of the limit, [decision] marginal_band): no number of "
            "pairs like these would clear it"), (statistic, got)


def test_more_pairs_are_counted_to_the_figure_the_decision_statistic_holds_to():
    """Gains 22-50 % (median 40): undecided under both statistics. "point" holds the median to
    the band and the interval to the limit, so the pairs that would decide are counted to the
    limit; "lower_confidence_bound" holds the interval's end to the band's edge (31.9 % with a
    10 % band), which takes many more pairs like these; without a band both count to the limit."""
    spread = pairs([0.62, 0.70, 0.66, 0.78, 0.60, 0.68, 0.64],
                   [1.45, 1.30, 1.40, 1.22, 1.50, 1.38, 1.42])
    said = "not decided (7 pairs ran, fewer than the plan's 28): about {} more pairs with this " \
           "share of pairs beyond {} would decide it"
    for statistic, band, more, bound in (("point", 10.0, 4, "the limit"),
                                         ("lower_confidence_bound", 10.0, 23,
                                          "the guard band's edge"),
                                         ("lower_confidence_bound", 0.0, 4, "the limit")):
        got = by_id(comparison(8, spread, LIMITS, Decision(statistic=statistic,
                                                            marginal_band=band)))
        gain = got["g3.throughput_gain"]
        assert gain.outcome is Outcome.MARGINAL
        assert gain.note.endswith(said.format(more, bound)), (statistic, band, gain.note)
    # A median short of the limit is decided against the limit (a FAIL) under either statistic:
    # the band's edge would count pairs towards nothing the rule decides ("about 0 more").
    short = pairs([0.78, 0.70, 0.85, 0.76, 0.80, 0.72, 0.78], [1.4] * 7)  # reductions 15-30 %
    for statistic in ("point", "lower_confidence_bound"):
        got = by_id(comparison(8, short, LIMITS, Decision(statistic=statistic,
                                                           marginal_band=5.0)))
        reduction = got["g3.ttft_p50_reduction"]
        assert reduction.outcome is Outcome.MARGINAL
        assert reduction.note.endswith(said.format(23, "the limit")), (statistic, reduction.note)
    # A median a hair short of the limit is not "within the band" (in_guard_band is blind to
    # the side): more pairs like these would decide it, a FAIL.
    hair = pairs([0.76, 0.70, 0.82, 0.755, 0.78, 0.72, 0.755], [1.4] * 7)  # median 24.5 %
    for statistic in ("point", "lower_confidence_bound"):
        got = by_id(comparison(8, hair, LIMITS, Decision(statistic=statistic,
                                                          marginal_band=5.0)))
        reduction = got["g3.ttft_p50_reduction"]
        assert reduction.value == pytest.approx(24.5) and "guard band" not in reduction.note
        assert reduction.note.endswith("beyond the limit would decide it"), reduction.note
    # A median exactly at a limit of 0 % (a band of 5 % of 0 is none) is held to the limit.
    level = pairs([1.0, 0.9, 1.1, 1.0, 0.95, 1.05, 1.0], [1.4] * 7)
    zero = G3Limits(pair_looks=[7, 14, 28], ttft_p50_reduction_min=0.0)
    got = by_id(comparison(8, level, zero, Decision(statistic="lower_confidence_bound",
                                                     marginal_band=5.0)))
    assert got["g3.ttft_p50_reduction"].note.endswith(
        ": as many pairs fall on either side of the limit; no number of pairs like these would "
        "decide it"), got["g3.ttft_p50_reduction"].note


def test_the_plan_spends_half_the_unconfident_share_per_side():
    plan = look_plan(LIMITS, DECISION)
    assert plan.looks == (7, 14, 28) and plan.alpha == pytest.approx(0.025)
    assert look_plan(LIMITS, Decision(confidence=0.9)).alpha == pytest.approx(0.05)


def test_a_decided_level_s_measurements_carry_figure_interval_limit_and_risk():
    at_16 = [(b.model_copy(update={"concurrency": 16}), x.model_copy(update={"concurrency": 16}))
             for b, x in CLEAR]
    ms = by_id(comparison(16, at_16, LIMITS, DECISION))
    risk = look_plan(LIMITS, DECISION).risk
    for id, name in (("g3.ttft_p50_reduction", "TTFT p50 reduction @ concurrency 16"),
                     ("g3.throughput_gain", "Output-throughput gain @ concurrency 16")):
        m = ms[id]
        assert m.name == name and m.at == 16 and m.unit == "%", m
        assert m.limit == limits_of(16, LIMITS, DECISION)[id]
        assert m.interval_miss == pytest.approx(risk) and m.interval is not None
        assert m.coverage.read == 7 and m.evidence == ["pairs read 7 of 7"]


def test_a_decided_level_s_notes_word_for_word():
    ms = by_id(comparison(8, CLEAR, LIMITS, DECISION))
    assert ms["g3.ttft_p50_reduction"].note == LOOK_1 + (
        "decision risk for this plan at the observed spread (sd of ln ratio 0.034, normal "
        "pairs): P(PASS) 2.2 % if the true figure were the limit 25 %, 100.0 % at 35 %")
    # The claimed band is the throughput gain's alone: a 50 % TTFT reduction is not above it.
    assert ms["g3.throughput_gain"].note == LOOK_1 + (
        "decision risk for this plan at the observed spread (sd of ln ratio 0.011, normal "
        "pairs): P(PASS) 1.8 % if the true figure were the limit 29 %, 100.0 % at 39 %") + BAND


def test_pairs_without_spread_state_no_risk():
    ms = by_id(comparison(8, pairs([0.5] * 7, [1.35] * 7), LIMITS, DECISION))
    assert ms["g3.ttft_p50_reduction"].note == (
        LOOK_1 + "decision risk: the pairs show no spread to state it for")
    assert ms["g3.throughput_gain"].note == (
        LOOK_1 + "decision risk: the pairs show no spread to state it for")


def test_a_slow_level_s_undecided_note_word_for_word():
    ms = by_id(comparison(8, NOISY, LIMITS, DECISION, seconds=LIMITS.comparison_budget / 2))
    assert ms["g3.ttft_p50_reduction"].outcome is Outcome.MARGINAL
    assert ms["g3.ttft_p50_reduction"].note == LOOK_1 + (
        "decision risk for this plan at the observed spread (sd of ln ratio 0.252, normal pairs, "
        "at most 14 pairs in g3.comparison_budget at the pace these pairs ran): P(PASS) 1.6 % if "
        "the true figure were the limit 25 %, 22.5 % at 35 %; not decided (7 pairs ran, fewer "
        "than the plan's 28): about 23 more pairs with this share of pairs beyond the limit "
        "would decide it")


def test_the_pace_is_said_only_where_the_budget_holds_fewer_pairs_than_the_plan():
    exact = comparison(8, NOISY, LIMITS, DECISION, seconds=LIMITS.comparison_budget / 4)
    assert "pace" not in by_id(exact)["g3.ttft_p50_reduction"].note  # 28 pairs fit: the plan's
    # Unknown seconds (the default) say nothing of the pace, however short the budget.
    short = G3Limits(pair_looks=[7, 14, 28], comparison_budget=1.0)
    assert "pace" not in by_id(comparison(8, NOISY, short, DECISION))[
        "g3.ttft_p50_reduction"].note


def test_a_level_undecided_at_the_plan_s_last_look_says_no_number_of_pairs_would_decide():
    ms = by_id(comparison(8, pairs(UNDECIDED, [1.6] * 28), LIMITS, DECISION))
    assert ms["g3.ttft_p50_reduction"].note == (
        "median of candidate / baseline over 28 ABBA pairs, 98.75 % sign-test interval (look 3 "
        "of 3 at [7, 14, 28] pairs; the plan's chance of wrongly clearing a limit at any look, "
        "counted exactly: 1.7 %); decision risk for this plan at the observed spread (sd of ln "
        "ratio 0.106, normal pairs): P(PASS) 2.2 % if the true figure were the limit 25 %, "
        "99.8 % at 35 %; not decided at the plan's last look (28 pairs): as many pairs fall on "
        "either side of the limit; no number of pairs like these would decide it")


def test_a_level_cut_by_the_time_budget_says_so_word_for_word():
    ms = by_id(comparison(8, pairs(UNDECIDED[:10], [1.6] * 10), LIMITS, DECISION,
                          time_spent=True))
    assert ms["g3.ttft_p50_reduction"].note == (
        "median of candidate / baseline over 10 ABBA pairs, 97.85 % sign-test interval (look 2, "
        "a last look at the 10 pairs that ran when the time budget cut the plan at [7, 14, 28] "
        "pairs short; the plan's chance of wrongly clearing a limit at any look, counted "
        "exactly: 1.46 %); decision risk for this plan at the observed spread (sd of ln ratio "
        "0.109, normal pairs): P(PASS) 2.2 % if the true figure were the limit 25 %, 99.8 % at "
        "35 %; not decided (g3.comparison_budget 4500 s was spent before the plan's last look "
        "at 28 pairs): as many pairs fall on either side of the limit; no number of pairs like "
        "these would decide it")


def test_a_level_stopped_by_the_other_figure_s_fail_says_which_word_for_word():
    level = pairs([1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0], [1.6, 1.2, 2.1, 1.1, 1.9, 1.25, 1.3])
    gain = by_id(comparison(8, level, LIMITS, DECISION))["g3.throughput_gain"]
    assert gain.note == LOOK_1 + (
        "decision risk for this plan at the observed spread (sd of ln ratio 0.247, normal "
        "pairs): P(PASS) 1.8 % if the true figure were the limit 29 %, 15.3 % at 39 %; not "
        "decided (the level stopped when the TTFT p50 reduction failed): about 268 more pairs "
        "with this share of pairs beyond the limit would decide it")


def test_a_level_with_no_look_yet_makes_both_figures_an_error():
    ms = comparison(8, CLEAR[:5], LIMITS, DECISION)
    assert [m.id for m in ms] == ["g3.ttft_p50_reduction", "g3.throughput_gain"]
    for m in ms:
        assert m.outcome is Outcome.ERROR and m.at == 8 and m.name.endswith("@ concurrency 8")
        assert m.note.startswith("no look was made: the plan's first look is at 7 pairs")
        assert m.limit == limits_of(8, LIMITS, DECISION)[m.id]


def test_a_pair_without_one_figure_errs_that_figure_and_names_it_in_the_other():
    ms = by_id(comparison(8, without(CLEAR, 1, ttfts=[]), LIMITS, DECISION))
    ttft, gain = ms["g3.ttft_p50_reduction"], ms["g3.throughput_gain"]
    assert ttft.outcome is Outcome.ERROR and ttft.note == "1 of 7 pairs have no figure"
    assert ttft.coverage.missing == ["#2 the candidate gave no TTFT p50: no successful request"]
    assert gain.outcome is Outcome.ERROR and gain.note == (
        "the level's other figure has pairs without one (g3.ttft_p50_reduction): no look is "
        "made at its pairs")
    for m in (ttft, gain):
        assert m.at == 8 and m.name.endswith("@ concurrency 8") and m.value is None
        assert m.limit == limits_of(8, LIMITS, DECISION)[m.id]
    both = by_id(comparison(8, without(CLEAR, 1, ttfts=[], output_throughput=None), LIMITS,
                            DECISION))
    assert [m.note for m in both.values()] == ["1 of 7 pairs have no figure"] * 2
    assert both["g3.throughput_gain"].coverage.missing == [
        "#2 the candidate gave no output throughput: no successful request"]


def test_a_ratio_the_arithmetic_cannot_hold_is_an_error_not_a_crash():
    # Each figure is finite and > 0, but 1e-300 s / 1e300 s underflows to 0.
    level = [(rep("baseline", i, 1e300, 100.0), rep("candidate", i, 1e-300, 160.0))
             for i in range(7)]
    for m in comparison(8, level, LIMITS, DECISION):
        assert m.outcome is Outcome.ERROR and m.note == "7 pairs: math domain error", m
        assert m.at == 8 and m.name.endswith("@ concurrency 8")
        assert m.limit == limits_of(8, LIMITS, DECISION)[m.id]


def test_which_pairs_lack_a_figure_is_said_per_figure():
    level = without(CLEAR, 3, output_throughput=None)
    assert pairs_read(level, "g3.ttft_p50_reduction").complete
    assert pairs_read(level, "g3.throughput_gain").missing == {
        4: "the candidate gave no output throughput: no successful request"}
    with pytest.raises(ValueError) as raised:
        figures(level, "g3.throughput_gain")
    assert str(raised.value) == ("pairs read 6 of 7 (86%); not read: #4 the candidate gave no "
                                 "output throughput: no successful request")
    # Each figure asks for its own: a pair without a TTFT has no TTFT figure to give the sweep.
    with pytest.raises(ValueError, match="^pairs read 6 of 7 .*#4 the candidate gave no TTFT p50"):
        figures(without(CLEAR, 3, ttfts=[]), "g3.ttft_p50_reduction")
    base, cand = figures(CLEAR, "g3.throughput_gain")
    assert base == [100.0] * 7 and cand == pytest.approx([160, 162, 158, 161, 160, 163, 159])


def test_reachable_pairs_at_the_pace_they_ran():
    assert reachable(7, 3.0, 9.0) == 21
    assert reachable(1, 10.0, 100.0) == 10
    assert reachable(7, 0.5, 100.0) == 1400  # under a second a pair: still a pace
    for ran, seconds in ((0, 10.0), (7, 0.0), (7, -1.0), (7, float("inf"))):
        assert reachable(ran, seconds, 100.0) is None, (ran, seconds)


def test_a_level_cut_short_by_time_is_done_only_once_its_budget_is_spent():
    level = pairs(UNDECIDED, [1.6] * 28)
    assert not level_done(level_looks(8, level[:10], LIMITS, DECISION))  # more pairs may come
    assert level_done(level_looks(8, level[:10], LIMITS, DECISION, spent=True))
    # At the plan's last look an undecided figure is MARGINAL, and the level is done.
    assert level_done(level_looks(8, level, LIMITS, DECISION))


def test_the_design_states_its_looks_risk_and_budget_word_for_word():
    assert design_text(LIMITS, DECISION).endswith(
        " Looks after [7, 14, 28] pairs per concurrency level, at 98.44 / 98.71 / 98.75 % "
        "intervals, their ranks chosen so that the chance that any look passes a candidate "
        "exactly at a limit, counted exactly over the sign test's outcomes, is 1.7 % (at most "
        "2.5 %, also when time cuts the plan short and the pairs that ran get a last look); "
        "pairs stop when a level is decided or after 75 min (g3.comparison_budget).")


def shifted(ttft=2.0, tput=100.0, machine=(), device=()):
    """Three G3 baseline repetitions, each with the machine's readings given."""
    return [Repetition(arm="baseline", concurrency=8, repetition=i,
                       ttfts=[ttft] if ttft else [], sent=1, errors=0, output_throughput=tput,
                       machine=list(machine), device=list(device)) for i in range(3)]


def test_a_moved_throughput_is_a_deviation_even_where_no_ttft_was_read():
    [found] = baseline_shift(8, shifted(ttft=None), shifted(ttft=None, tput=125.0), LIMITS,
                             G2Limits())
    assert found.text == ("G3's baseline moved from G2's at concurrency 8: output throughput 125 "
                          "tok/s in G3 against 100 tok/s in G2 (+25.0 %, g3.baseline_shift_max "
                          "10 %)")
    # A G3 baseline with no figure at all is no shift to state (and no crash).
    assert baseline_shift(8, shifted(), shifted(ttft=None, tput=None), LIMITS, G2Limits()) == []


def test_a_shift_exactly_at_the_limit_is_no_deviation():
    at = G3Limits(pair_looks=[7, 14, 28], baseline_shift_max=25.0)
    assert baseline_shift(8, shifted(), shifted(ttft=2.5), at, G2Limits()) == []  # +25 % exactly
    assert len(baseline_shift(8, shifted(), shifted(ttft=2.52), at, G2Limits())) == 1


def test_a_moved_baseline_names_how_far_the_machine_and_its_kv_device_moved():
    cpu = [CpuReference(seconds={0: 0.010}), CpuReference(seconds={0: 0.0115})]
    dev = [DeviceReference(bytes_per_s=1e9), DeviceReference(bytes_per_s=1.3e9)]
    g2, moved = shifted(machine=cpu, device=dev), shifted(ttft=2.5)
    [found] = baseline_shift(8, g2, moved, LIMITS, G2Limits())
    assert found.text.endswith(
        "(+25.0 %, g3.baseline_shift_max 10 %); the machine's CPU speed varied by 15 % over G2's "
        "and G3's repetitions (g2.cpu_speed_variation_max 10 %); the KV device's read speed by "
        "30 % (g2.device_speed_variation_max 20 %)"), found.text
    [found] = baseline_shift(8, shifted(device=dev), moved, LIMITS, G2Limits())
    assert found.text.endswith("10 %); the KV device's read speed by 30 % "
                               "(g2.device_speed_variation_max 20 %)"), found.text
    [found] = baseline_shift(8, shifted(), moved, LIMITS, G2Limits())
    assert found.text.endswith("(+25.0 %, g3.baseline_shift_max 10 %)"), found.text
