"""G3's comparison: pairs of whole repetitions, looked at on a fixed schedule. Pure.

The unit is the pair: one baseline and one candidate repetition run back to back (ABBA order),
so that a drift of the machine hits both. Requests queued behind each other inside one
repetition are not independent draws (their spread is their queue position), so a repetition
is summarised by the seed's statistic (TTFT p50, output throughput) and the uncertainty comes
from the pairs alone: d_i = ln(candidate_i / baseline_i).

The figure is the median pair ratio (e^median(d)), its interval the sign test's: the order
statistics [d_(k), d_(n+1-k)], which hold the true median with probability at least the
level for ANY continuous distribution of the pairs. A t interval on mean(d) does not: measured
on this project's recorded simulator pairs, whose candidate now and then ran a repetition 40 %
slow (right skew), a t-interval rule passed a candidate at the limit 13-19 % of the time.

The rule looks at the pair counts of ``LookPlan.looks`` only. Each look's rank is chosen so
that the chance that ANY look wrongly clears the limit, counted exactly over the sign test's
paths (spending.py), is at most alpha, however early the rule stops. A look decides PASS when
the interval clears the limit, FAIL when it lies wholly on the wrong side; the last look (or a
spent budget) without a decision is MARGINAL.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..verdicts import Limit, Outcome
from .spending import cut_short, cut_short_risk, spending_ranks, spent_risk
from .stats import Comparison, DecisionStatistic, decide

Metric = Literal["reduction", "gain"]  # 100 (1 - ratio) for TTFT, 100 (ratio - 1) for tok/s
LookOutcome = Literal["PASS", "FAIL", "continue", "MARGINAL"]
MAX_PAIRS = 1000


def fewest_pairs(alpha: float) -> int:
    """The fewest pairs at which a sign test at ``alpha`` per side can decide: 0.5^n <= alpha."""
    return math.ceil(math.log2(1 / alpha))


def looks_problem(looks: Sequence[int], alpha: float | None = None) -> str:
    """Why a schedule of looks cannot be run ("" if it can); with alpha, also too-early looks."""
    if not looks:
        return "no looks: the rule needs at least one"
    if looks[0] < 2 or any(b <= a for a, b in zip(looks, looks[1:], strict=False)):
        return f"{list(looks)} must rise strictly from at least 2 pairs"
    if looks[-1] > MAX_PAIRS:
        return f"{list(looks)} goes up to {looks[-1]} pairs: at most {MAX_PAIRS}"
    if alpha is not None and looks[0] < (least := fewest_pairs(alpha / len(looks))):
        return (f"{list(looks)}: a look at {looks[0]} pairs can never decide: at "
                f"{100 * alpha / len(looks):.3g} % per side per look the sign test needs "
                f"{least} pairs (start at {least}, or make fewer looks)")
    return ""


class LookPlan(BaseModel):
    """The pair counts at which the rule looks, and the risk it spends over all of them."""

    model_config = ConfigDict(frozen=True)

    looks: tuple[int, ...]
    alpha: float = Field(gt=0, lt=0.5)  # one-sided, per direction, over the whole plan
    planned: tuple[int, ...] = ()  # cut short (cut_short): the looks it had planned

    @model_validator(mode="after")
    def _increasing(self) -> LookPlan:
        if self.planned:  # the looks made as planned, then the last at the pairs that ran
            made = self.planned[:len(self.looks) - 1]
            if self.looks[:-1] != made or looks_problem(self.planned, self.alpha):
                raise ValueError(f"looks {list(self.looks)} are not the plan at "
                                 f"{list(self.planned)} pairs cut short")
            self.ranks  # noqa: B018  (cut_short refuses a last look outside the next gap)
        elif problem := looks_problem(self.looks, self.alpha):
            raise ValueError(problem)
        return self

    @property
    def ranks(self) -> tuple[int, ...]:
        """Each look's sign-test rank, from the exact spending of alpha (spending.py)."""
        if self.planned:
            return cut_short(self.planned, self.alpha, len(self.looks) - 1, self.looks[-1])
        return spending_ranks(self.looks, self.alpha)

    @property
    def risk(self) -> float:
        """The plan's false accept at a limit, counted exactly: at most alpha."""
        if self.planned:
            return cut_short_risk(self.planned, self.alpha, len(self.looks) - 1, self.looks[-1])
        return spent_risk(self.looks, self.alpha)

    def cut_short(self, pairs: int) -> LookPlan:
        """This plan stopped at ``pairs`` pairs, between two of its looks, because its time
        budget was spent: the looks made so far, then a last one at the pairs that ran,
        spending what is left of alpha (ValueError if pairs lies before the first look)."""
        made = sum(n < pairs for n in self.looks)
        return LookPlan(looks=self.looks[:made] + (pairs,), alpha=self.alpha,
                        planned=self.looks)

    def rank(self, pairs: int) -> int:
        """The rank of the look at this pair count (ValueError: the plan makes no such look)."""
        if pairs not in self.looks:
            raise ValueError(f"the plan looks at {list(self.looks)} pairs, not at {pairs}")
        return self.ranks[self.looks.index(pairs)]

    def level(self, pairs: int) -> float:
        """Two-sided confidence of the look's interval at this pair count."""
        return rank_coverage(pairs, self.rank(pairs))

    @property
    def levels(self) -> str:
        """Every look's level, for a report: '98.44 / 98.71 / 97.86 %'."""
        return " / ".join(f"{100 * self.level(n):.4g}" for n in self.looks) + " %"

    @property
    def budget(self) -> int:
        """Pairs per level at most: the last look."""
        return self.looks[-1]


def log_ratios(baseline: Sequence[float], candidate: Sequence[float]) -> list[float]:
    """ln(candidate_i / baseline_i) of each pair; ValueError for a figure that is not > 0."""
    if len(baseline) != len(candidate):
        raise ValueError(f"{len(baseline)} baseline but {len(candidate)} candidate figures: "
                         "a pair needs one of each")
    bad = [v for v in (*baseline, *candidate) if not (math.isfinite(v) and v > 0)]
    if bad:
        raise ValueError(f"a pair's figure is not finite and > 0: {bad[:3]}")
    return [math.log(c / b) for b, c in zip(baseline, candidate, strict=True)]


def to_percent(metric: Metric, d: float) -> float:
    """A log ratio as the % figure the limit is written in (an unbounded end stays one)."""
    ratio = math.exp(d) if d < 709 else math.inf
    return 100 * (1 - ratio) if metric == "reduction" else 100 * (ratio - 1)


def to_log(metric: Metric, percent: float) -> float:
    """The % figure as a log ratio (the inverse of to_percent)."""
    ratio = 1 - percent / 100 if metric == "reduction" else 1 + percent / 100
    if ratio <= 0:
        raise ValueError(f"{percent:g} % is not a {metric} a ratio can have")
    return math.log(ratio)


@lru_cache(maxsize=4096)
def binomial_tail(n: int, k: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2), exactly."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n


@lru_cache(maxsize=4096)
def order_rank(n: int, level: float) -> int:
    """The k of the sign test's interval [d_(k), d_(n+1-k)] at ``level`` (0: none exists)."""
    tail = (1 - level) / 2
    k = 0  # P(X <= k - 1) <= tail: the interval misses the median at most 2 * tail
    while k + 1 <= n // 2 and binomial_tail(n, k) <= tail:
        k += 1
    return k


def sign_interval(d: Sequence[float], level: float) -> tuple[float, float, float]:
    """Median of d and the sign test's interval at ``level`` (log scale; ±inf: too few)."""
    if not d:
        raise ValueError("an interval needs at least one pair")
    return rank_interval(d, order_rank(len(d), level))


def rank_interval(d: Sequence[float], k: int) -> tuple[float, float, float]:
    """Median of d and its order statistics [d_(k), d_(n+1-k)] (k 0: ±inf, too few pairs)."""
    xs = sorted(d)
    if k == 0:
        return statistics.median(xs), -math.inf, math.inf
    return statistics.median(xs), xs[k - 1], xs[len(xs) - k]


def coverage_of(n: int, level: float) -> float:
    """The exact coverage of the sign test's interval at n pairs (at least ``level``)."""
    return rank_coverage(n, order_rank(n, level))


def rank_coverage(n: int, k: int) -> float:
    """The exact coverage of [d_(k), d_(n+1-k)] at n pairs (k 0: unbounded, 1)."""
    return 1.0 if k == 0 else 1 - 2 * binomial_tail(n, k - 1)


class Look(BaseModel):
    """One look of the rule at one metric: the figure, its interval, what it decided."""

    pairs: int
    point: float  # %
    lo: float  # %
    hi: float  # %
    level: float  # two-sided confidence of this look's interval
    outcome: LookOutcome


def look(d: Sequence[float], metric: Metric, limit: Limit, plan: LookPlan,
         statistic: DecisionStatistic = "point", last: bool = False) -> Look:
    """What the plan's look at these pairs decides for a >= or <= limit on the % figure."""
    median, lo_d, hi_d = rank_interval(d, plan.rank(len(d)))
    ends = sorted((to_percent(metric, lo_d), to_percent(metric, hi_d)))
    point = to_percent(metric, median)
    comparison = Comparison(point=point, lo=ends[0], hi=ends[1], confidence=plan.level(len(d)),
                            n_baseline=len(d), n_candidate=len(d), statistic_text="")
    if decide(comparison, limit, statistic) is Outcome.PASS:
        outcome: LookOutcome = "PASS"
    elif not any(limit.contains(v) for v in ends) and not limit.contains(point):
        outcome = "FAIL"  # the whole interval on the wrong side
    else:
        outcome = "MARGINAL" if last else "continue"
    return Look(pairs=len(d), point=point, lo=ends[0], hi=ends[1], level=plan.level(len(d)),
                outcome=outcome)


class Sequential(BaseModel):
    """Every look made at one metric of one level, and where the rule stopped."""

    metric: Metric
    looks: list[Look]
    plan: LookPlan  # the plan the looks were made under: the rule's, or the rule cut short

    @property
    def decided(self) -> Look | None:
        """The look that decided (PASS or FAIL), if one did."""
        return next((x for x in self.looks if x.outcome in ("PASS", "FAIL")), None)

    @property
    def final(self) -> Look | None:
        """The deciding look, else the last one made."""
        return self.decided or (self.looks[-1] if self.looks else None)


def sequential(d: Sequence[float], metric: Metric, limit: Limit, plan: LookPlan,
               statistic: DecisionStatistic = "point", spent: bool = False) -> Sequential:
    """The looks the plan makes at these pairs, stopping at the first decision.

    ``spent``: no more pairs will come (budget in minutes spent, or the level was stopped), so
    the last look is final and undecided means MARGINAL; pairs beyond the last look due get
    a look of their own, the plan cut short there.
    """
    due = [n for n in plan.looks if n <= len(d)]
    if spent and due and due[-1] < len(d) < plan.budget:
        # Stopped between looks by time (which the pairs' signs barely move): the pairs that
        # ran after the last look are looked at once more, not wasted (LookPlan.cut_short).
        plan = plan.cut_short(len(d))
        due = list(plan.looks)
    looks: list[Look] = []
    for n in due:
        last = n == plan.budget or (spent and n == due[-1])
        looks.append(look(d[:n], metric, limit, plan, statistic, last))
        if looks[-1].outcome in ("PASS", "FAIL"):
            break
    return Sequential(metric=metric, looks=looks, plan=plan)


def pairs_needed(d: Sequence[float], metric: Metric, limit: Limit, plan: LookPlan) -> int | None:
    """Pairs at which the observed share beyond the limit would decide (None: no number).

    The sign test counts the pairs on the point's side of the limit; if that share stayed as
    observed, this is the fewest pairs at which one look at an equal share of the plan's risk
    (alpha / K per side, K looks) decides: a plan with more pairs is another plan.
    """
    bound = limit.lo if limit.lo is not None else limit.hi
    if not d or bound is None:
        return None
    at = to_log(metric, bound)
    median = statistics.median(d)
    share = sum((x < at) == (median < at) and x != at for x in d) / len(d)
    if median == at or share <= 0.5:
        return None
    side = plan.alpha / len(plan.looks)
    return next((n for n in range(max(len(d), 1), MAX_PAIRS + 1)
                 if binomial_tail(n, n - math.ceil(share * n)) <= side), None)


def pass_probability(plan: LookPlan, metric: Metric, limit: Limit, true_percent: float,
                     sd: float, statistic: DecisionStatistic = "point", sims: int = 2000,
                     seed: int = 0, cap: int | None = None) -> float:
    """P(PASS) of this plan if the true median were ``true_percent`` with pair spread ``sd``.

    Normal log ratios (Monte Carlo, seeded): the report's stated risk for its observed noise.
    ``cap``: at most this many pairs come (the time budget at the pairs' pace), the plan cut
    short there as the gate would cut it. bench/decision_risk.py measures the same from
    recorded repetitions instead.
    """
    rng, mu = random.Random(seed), to_log(metric, true_percent)
    n = plan.budget if cap is None else max(0, min(cap, plan.budget))
    passed = 0
    for _ in range(sims):
        d = [rng.gauss(mu, sd) for _ in range(n)]
        final = sequential(d, metric, limit, plan, statistic, spent=n < plan.budget).final
        passed += final is not None and final.outcome == "PASS"
    return passed / sims
