"""G3's paired comparison: the pairs of one level turned into decisions, looks and risks. Pure.

gates.core.paired holds the statistics; this module knows repetitions, limits and the words a
report needs: which figures form a pair, when a level may stop, the table of looks, the risk
stated for the observed spread, and the deviation when G3's own baseline moved from G2's.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from ..core.configuration import Decision, G2Limits, G3Limits
from ..core.statistics import (
    LookPlan,
    Sequential,
    above_claimed_band,
    log_ratios,
    median,
    pairs_needed,
    pass_probability,
    sequential,
)
from ..core.verdicts import G3, Cause, Coverage, Deviation, Limit, Measurement, Outcome
from .machine import device_variation, speed_variation
from .repetitions import Repetition
from .units import pair_coverage, throughput, ttft_p50

Pair = tuple[Repetition, Repetition]  # (baseline, candidate), run back to back
# ABBA: pair i runs its arms in ORDERS[i % 2], so a drift over two pairs hits both arms alike.
ORDERS = (("baseline", "candidate"), ("candidate", "baseline"))
# A pair in which the load generator was unfit (its own lag, gates.loadgen.selfcheck) measured
# kvgate, not the storage: it is set aside and measured again, at most this often per level.
# Whether a pair is set aside depends on the generator's lag alone, never on either arm's
# figures, so it cannot pick pairs that favour an arm; a level whose kept pairs hold an unfit
# repetition of either arm is INCONCLUSIVE (gates.inference.self_check, given both arms'), and
# every set-aside pair is in the evidence.
REMEASURES = 2

WHY_PAIRS = ("Requests queued behind each other in one repetition are not independent draws "
             "(their spread is their queue position), so each repetition is summarised by its "
             "TTFT p50 and throughput and the interval comes from pairs of whole repetitions, "
             "baseline and candidate run back to back, where independence holds: the figure is "
             "the median pair ratio, its interval the sign test's, which assumes nothing about "
             "the shape of the pairs' noise.")
POWER_POINTS = 10.0  # the power target: P(PASS) at the limit + 10 points
METRICS = (("g3.ttft_p50_reduction", "reduction", "TTFT p50 reduction"),
           ("g3.throughput_gain", "gain", "output-throughput gain"))


def measured_pair(measure: Callable[[int], Pair], aside: list[Pair],
                  spent: Callable[[], bool]) -> Pair:
    """A pair, measured again (measure(k), k = 1, 2 …) while the load generator was unfit in
    it, at most REMEASURES times per level (aside holds the level's set-aside pairs)."""
    pair = measure(0)
    while not all(r.fit for r in pair) and len(aside) < REMEASURES and not spent():
        aside.append(pair)
        pair = measure(len(aside))
    return pair


def look_plan(limits: G3Limits, decision: Decision) -> LookPlan:
    """The schedule of looks and the risk it spends: (1 - confidence) / 2 per side."""
    return LookPlan(looks=tuple(limits.pair_looks), alpha=(1 - decision.confidence) / 2)


def limits_of(c: int, limits: G3Limits, decision: Decision) -> dict[str, Limit]:
    """The two limits a level's comparison is held against, by measurement id, with the
    site's guard band ([decision] marginal_band): a pass whose deciding figure (the point, or
    the interval's end under lower_confidence_bound) lies within it of a bound is MARGINAL."""
    band = decision.marginal_band / 100
    return {
        "g3.ttft_p50_reduction": Limit.at_least(
            limits.ttft_p50_reduction_min, "%", key="g3.ttft_p50_reduction_min", marginal=band,
            relative_to=f"the baseline's TTFT p50 @ concurrency {c}, paired"),
        "g3.throughput_gain": Limit.at_least(
            limits.throughput_gain_min, "%", key="g3.throughput_gain_min", marginal=band,
            relative_to=f"the baseline's output throughput @ concurrency {c}, paired")}


def _pick(id: str) -> Callable[[Repetition], float | None]:
    return ttft_p50 if id == "g3.ttft_p50_reduction" else throughput


def pairs_read(pairs: Sequence[Pair], id: str) -> Coverage:
    """Which of the level's kept pairs have both arms' figure for one measurement; the others
    with the arm that gave none and why (gates.inference.units)."""
    return pair_coverage(pairs, _pick(id), "TTFT p50" if id == "g3.ttft_p50_reduction"
                         else "output throughput")


def figures(pairs: Sequence[Pair], id: str) -> tuple[list[float], list[float]]:
    """(baseline, candidate) figures of every pair for one measurement; ValueError naming each
    pair without both (a missing figure is never a 0 the ratio would refuse unnamed)."""
    cov = pairs_read(pairs, id)
    if not cov.complete:
        raise ValueError(cov.describe())
    pick = _pick(id)
    return [pick(b) or 0.0 for b, _ in pairs], [pick(c) or 0.0 for _, c in pairs]


def level_looks(c: int, pairs: Sequence[Pair], limits: G3Limits, decision: Decision,
                spent: bool = False) -> dict[str, Sequential]:
    """Every look the plan has made at this level's pairs, per measurement id.

    ValueError when a pair has no figure (a repetition without a successful probe).
    """
    rule, by_id = look_plan(limits, decision), limits_of(c, limits, decision)
    return {id: sequential(log_ratios(*figures(pairs, id)), metric, by_id[id], rule,
                           decision.statistic, spent=spent)
            for id, metric, _ in METRICS}


def level_done(looks: dict[str, Sequential]) -> bool:
    """Whether a level may stop: a FAIL anywhere, or every measurement decided or final."""
    finals = [s.final for s in looks.values()]
    if any(f is not None and f.outcome == "FAIL" for f in finals):
        return True
    return all(f is not None and f.outcome in ("PASS", "MARGINAL") for f in finals)


def reachable(ran: int, seconds: float, budget_s: float) -> int | None:
    """Pairs a level could run in the comparison's time budget at the pace its pairs ran
    (they go round the levels, so a pair's time holds every open level's); None: unknown."""
    if ran < 1 or not 0 < seconds < float("inf"):
        return None
    return int(ran * budget_s / seconds)


def _risk(rule: LookPlan, metric: str, limit: Limit, d: list[float],
          statistic: str, cap: int | None) -> str:
    sd = statistics.stdev(d) if len(d) > 1 else 0.0
    if sd == 0:
        return "decision risk: the pairs show no spread to state it for"
    at_limit = pass_probability(rule, metric, limit, limit.lo, sd, statistic, cap=cap)
    above = pass_probability(rule, metric, limit, limit.lo + POWER_POINTS, sd, statistic,
                             cap=cap)
    # The time budget, not only the plan's pairs, bounds the power of a slow engine.
    pace = (f", at most {cap} pairs in g3.comparison_budget at the pace these pairs ran"
            if cap is not None and cap < rule.budget else "")
    return (f"decision risk for this plan at the observed spread (sd of ln ratio {sd:.3f}, "
            f"normal pairs{pace}): P(PASS) {100 * at_limit:.1f} % if the true figure were the "
            f"limit {limit.lo:g} %, {100 * above:.1f} % at {limit.lo + POWER_POINTS:g} %")


def _note(s: Sequential, rule: LookPlan, d: list[float], limit: Limit, statistic: str,
          why_stopped: str, cap: int | None = None) -> str:
    final = s.final
    which = f"look {len(s.looks)} of {len(rule.looks)} at {list(rule.looks)} pairs"
    if s.plan.planned:  # the time budget ended the plan between two looks
        which = (f"look {len(s.looks)}, a last look at the {final.pairs} pairs that ran when "
                 f"the time budget cut the plan at {list(rule.looks)} pairs short")
    said = [f"median of candidate / baseline over {final.pairs} ABBA pairs, "
            f"{100 * final.level:.4g} % sign-test interval ({which}; the plan's chance of "
            f"wrongly clearing a limit at any look, counted exactly: {100 * s.plan.risk:.3g} %)",
            _risk(rule, s.metric, limit, d, statistic, cap)]
    if final.outcome in ("MARGINAL", "continue"):
        said.append(f"not decided{why_stopped}: " + _more_pairs(s, rule, d, limit, statistic))
    return "; ".join(said)


def _more_pairs(s: Sequential, rule: LookPlan, d: list[float], limit: Limit,
                statistic: str) -> str:
    """What more pairs like these would do to an undecided look."""
    final = s.final
    if limit.in_guard_band(final.point):
        # More pairs narrow the interval around a median that stays in the band: MARGINAL.
        return (f"the median lies within the site's guard band ({100 * limit.marginal:g} % of "
                "the limit, [decision] marginal_band): no number of pairs like these would "
                "clear it")
    # A median past the band under lower_confidence_bound: the interval's end must clear the
    # band's edge, not the limit alone (G3's limits are lower bounds: limits_of). A median short
    # of the limit is decided (FAIL) against the limit under either statistic.
    banded = (statistic == "lower_confidence_bound" and limit.marginal > 0
              and final.point > limit.lo)
    edge = limit.model_copy(update={"lo": limit.lo + limit.marginal * abs(limit.lo)}) \
        if banded else limit
    bound = "the guard band's edge" if banded else "the limit"
    more = pairs_needed(d, s.metric, edge, rule)
    if more is None:
        return (f"as many pairs fall on either side of {bound}; no number of pairs like these "
                "would decide it")
    return f"about {more - final.pairs} more pairs with this share of pairs beyond {bound} " \
           "would decide it"


_OUTCOME = {"PASS": Outcome.PASS, "FAIL": Outcome.FAIL, "MARGINAL": Outcome.MARGINAL,
            "continue": Outcome.MARGINAL}


def _why_stopped(looks: dict[str, Sequential], rule: LookPlan, limits: G3Limits,
                 time_spent: bool, ran: int) -> str:
    failed = [title for id, _, title in METRICS
              if (f := looks[id].final) is not None and f.outcome == "FAIL"]
    if failed:
        return f" (the level stopped when the {failed[0]} failed)"
    if time_spent:
        return (f" (g3.comparison_budget {limits.comparison_budget:g} s was spent before the "
                f"plan's last look at {rule.budget} pairs)")
    if ran < rule.budget:
        return f" ({ran} pairs ran, fewer than the plan's {rule.budget})"
    return f" at the plan's last look ({rule.budget} pairs)"


def comparison(c: int, pairs: Sequence[Pair], limits: G3Limits, decision: Decision,
               time_spent: bool = False, seconds: float = 0.0) -> list[Measurement]:
    """The level's TTFT p50 reduction and throughput gain, decided by the plan's looks.

    Called once the level's pairs are over: a measurement no look decided is MARGINAL, with
    why the pairs stopped and how many more pairs like these would need. ``seconds``: how
    long the comparison's pairs ran (every level), for the risk under the time budget.
    """
    cap = reachable(len(pairs), seconds, limits.comparison_budget)
    by_id, rule = limits_of(c, limits, decision), look_plan(limits, decision)
    covs = {id: pairs_read(pairs, id) for id, _, _ in METRICS}
    if gaps := [id for id in covs if not covs[id].complete]:
        # The plan's looks and their risk hold for the pairs as they ran: a look over the pairs
        # that have figures would be a plan nobody ran. Both figures are ERROR, each naming
        # its own pairs without one (a pair without either figure fails both).
        return [covs[id].judge(G3[id].error(
            f"{len(covs[id].missing)} of {len(pairs)} pairs have no figure"
            if id in gaps else f"the level's other figure has pairs without one "
            f"({', '.join(gaps)}): no look is made at its pairs", by_id[id], at=c))
            for id, _, _ in METRICS]
    try:
        looks = level_looks(c, pairs, limits, decision, spent=True)
    except ValueError as exc:
        return [covs[id].judge(G3[id].error(f"{len(pairs)} pairs: {exc}", by_id[id], at=c))
                for id, _, _ in METRICS]
    why = _why_stopped(looks, rule, limits, time_spent, len(pairs))
    out = []
    for id, _, _ in METRICS:
        s = looks[id]
        if s.final is None:
            out.append(covs[id].judge(G3[id].error(
                f"no look was made: the plan's first look is at {rule.looks[0]} pairs{why}",
                by_id[id], at=c)))
            continue
        d, final = log_ratios(*figures(pairs[:s.final.pairs], id)), s.final
        note = _note(s, rule, d, by_id[id], decision.statistic, why, cap)
        if id == "g3.throughput_gain" and above_claimed_band(
                final.point, limits.throughput_gain_claimed_max):
            # The deviation that blocks ACCEPT: gates.engines.fairness, on both arms' storage.
            note += (f"; above the claimed band (+{limits.throughput_gain_min:g}…"
                     f"+{limits.throughput_gain_claimed_max:g} %): check that the baseline "
                     "was configured fairly (a gain both arms' storage does not explain is a "
                     "deviation)")
        out.append(G3[id].stamp(covs[id].judge(Measurement(
            name="", value=final.point, unit="%", limit=by_id[id],
            outcome=_OUTCOME[final.outcome], interval=(final.lo, final.hi),
            interval_miss=s.plan.risk, note=note)), c))
    return out


def design_text(limits: G3Limits, decision: Decision) -> str:
    """The comparison's design and its false-accept bound, in words for the report."""
    rule = look_plan(limits, decision)
    return (f"{WHY_PAIRS} Looks after {list(rule.looks)} pairs per concurrency level, at "
            f"{rule.levels} intervals, their ranks chosen so that the chance that any look "
            f"passes a candidate exactly at a limit, counted exactly over the sign test's "
            f"outcomes, is {100 * rule.risk:.3g} % (at most {100 * rule.alpha:.3g} %, also "
            f"when time cuts the plan short and the pairs that ran get a last look); pairs "
            f"stop when a level is decided or after {limits.comparison_budget / 60:g} min "
            "(g3.comparison_budget).")


def baseline_shift(c: int, g2: Sequence[Repetition], g3: Sequence[Repetition],
                   limits: G3Limits, g2_limits: G2Limits) -> list[Deviation]:
    """Deviations when G3's own baseline moved from G2's record by more than the limit."""
    out = []
    for what, pick, unit in (("TTFT p50", lambda r: r.ttft_p50, "s"),
                             ("output throughput", lambda r: r.output_throughput, "tok/s")):
        a, b = [x for x in map(pick, g2) if x], [x for x in map(pick, g3) if x]
        if not a or not b:
            continue
        shift = 100 * (median(b) / median(a) - 1)
        if abs(shift) > limits.baseline_shift_max:
            speed = speed_variation([x for r in (*g2, *g3) for x in r.machine])
            device = device_variation([x for r in (*g2, *g3) for x in r.device])
            machine = "" if speed is None else (
                f"; the machine's CPU speed varied by {speed:.0f} % over G2's and G3's "
                f"repetitions (g2.cpu_speed_variation_max {g2_limits.cpu_speed_variation_max:g}"
                " %)")
            machine += "" if device is None else (
                f"; the KV device's read speed by {device:.0f} % (g2.device_speed_variation_max"
                f" {g2_limits.device_speed_variation_max:g} %)")
            out.append(Deviation(cause=Cause.BASELINE_MOVED, text=(
                f"G3's baseline moved from G2's at concurrency {c}: {what} {median(b):.4g} "
                f"{unit} in G3 against {median(a):.4g} {unit} in G2 ({shift:+.1f} %, "
                f"g3.baseline_shift_max {limits.baseline_shift_max:g} %){machine}")))
    return out
