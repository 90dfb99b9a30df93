"""G2's stability plan: run-to-run CVs with intervals, looked at after each repetition until
they are decided or the budget is spent. Pure. docs/g2-stability.md.

A CV from three repetitions is a noisy figure: held as a point against 5 %, a baseline whose
true CV is exactly 5 % passed about 63 % of the time. Here each look bounds the CV (Vangel's
modified McKay interval, stats.cv_interval) at cv_risk / (number of looks) a side, so over
all the looks (Bonferroni) a CV at the limit PASSes, or FAILs, at most cv_risk of the time;
bench/g2_risk.py measures how much less.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..statistics import CvInterval, cv_interval
from .thresholds import G2Limits

State = Literal["pass", "fail", "undecided"]


@dataclass(frozen=True)
class CvPlan:
    """The plan of thresholds.toml [g2]: looks, each look's bounds, what they decide."""

    limits: G2Limits

    @property
    def looks(self) -> range:
        """The repetition counts at which the plan looks: the first look, then every
        repetition up to the budget (a real engine's takes minutes: none runs past a decision)."""
        return range(self.limits.repetitions, self.limits.repetitions_max + 1)

    @property
    def look_miss(self) -> float:
        """Each look's one-sided miss rate: cv_risk shared equally among the looks."""
        return self.limits.cv_risk / 100 / len(self.looks)

    def interval(self, values: Sequence[float]) -> CvInterval | None:
        """A series' CV and its bounds at one look of the plan; None without a figure."""
        return cv_interval(values, self.look_miss)

    def control(self, values: Sequence[float]) -> CvInterval | None:
        """A control's readings' CV (machine, device) and its bounds, looked at once, at
        cv_risk: its noise counts as the baseline's does, and its count does not widen it."""
        return cv_interval(values, self.limits.cv_risk / 100)

    def decided(self, iv: CvInterval) -> State:
        """pass where the CV is credibly under cv_max (its upper bound is), fail where
        credibly over (its lower bound is), else undecided."""
        if iv.hi <= self.limits.cv_max:
            return "pass"
        return "fail" if iv.lo > self.limits.cv_max else "undecided"

    def needs_more(self, series: Sequence[Sequence[float | None]]) -> bool:
        """Whether a level whose series (TTFT p50s, throughputs: one value per repetition so
        far) stand so needs one more repetition: below the first look, or a CV undecided with
        none failed, and the budget not spent.

        A failed CV already fails the level, and a repetition without a figure (None or 0) is
        an ERROR more repetitions cannot mend: both stop the level, as the budget does.
        """
        n = max(map(len, series), default=0)
        if n >= self.limits.repetitions_max:
            return False
        if n < self.limits.repetitions:
            return True
        if any(len(xs) < n or not all(xs) for xs in series):
            return False
        states = []
        for xs in series:
            iv = self.interval([float(x) for x in xs if x])
            if iv is None:
                return False
            states.append(self.decided(iv))
        return "fail" not in states and "undecided" in states
