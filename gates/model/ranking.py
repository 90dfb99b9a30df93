"""Candidates ranked by their intervals, and only where the intervals allow it. Pure.

Used by `kvgate compare` (issue #28): each candidate array's G3 gain (a TTFT reduction or a
throughput gain, in %) comes with its interval and that interval's one-sided miss, the most
often the truth lies above its top (or below its bottom). Two candidates are put in an order
only when their intervals do not overlap. Why that is safe: if A is ranked above B while B is
truly at least as good, then lo_A > hi_B with theta_A <= theta_B, so A's interval lies wholly
above its truth or B's wholly below its own. The risk of one wrong order is at most the sum of
the two misses (Bonferroni, whatever the intervals' dependence). For G3's sequential sign-test
intervals the miss is the plan's risk over all its looks (2.23 % for the shipped plan), not
the stopping look's own level: the plan stops where an interval clears the limit, which makes
that look's level optimistic. It is conservative: two arrays whose intervals overlap may still
differ; they are then "not distinguishable", never ordered by their points alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, Field, model_validator

NOT_DISTINGUISHABLE = "not distinguishable"


class Estimate(BaseModel):
    """One candidate's figure with its interval and how often, at most, it misses per side."""

    name: str = Field(min_length=1)
    point: float
    lo: float
    hi: float
    miss: float = Field(gt=0.0, lt=0.5)  # e.g. 0.025 for an equal-tailed 95 % interval

    @model_validator(mode="after")
    def _ordered(self) -> Estimate:
        values = (self.lo, self.point, self.hi)
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f"{self.name}: interval [{self.lo}, {self.hi}] around "
                             f"{self.point} is not finite")
        if not self.lo <= self.point <= self.hi:
            raise ValueError(f"{self.name}: point {self.point:g} is outside its interval "
                             f"[{self.lo:g}, {self.hi:g}]")
        return self


class Ranked(BaseModel):
    """A candidate's place: 1 + how many others are distinguishably better."""

    estimate: Estimate
    rank: int
    ahead_of: list[str]  # the candidates it is distinguishably better than
    not_distinguishable_from: list[str]

    @property
    def name(self) -> str:
        """The candidate's name (its estimate's)."""
        return self.estimate.name


def ahead(a: Estimate, b: Estimate, higher_is_better: bool = True) -> bool:
    """Whether a is distinguishably better than b: their intervals do not overlap."""
    return a.lo > b.hi if higher_is_better else a.hi < b.lo


def wrong_order_risk(a: Estimate, b: Estimate) -> float:
    """The most that one order of a and b read from the intervals is wrong (module doc)."""
    return a.miss + b.miss


def rank_by_interval(estimates: Sequence[Estimate],
                     higher_is_better: bool = True) -> list[Ranked]:
    """Every candidate with its rank; ties share a rank; best rank first, then by point."""
    names = [e.name for e in estimates]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"candidates named twice: {', '.join(twice)}")
    out = []
    for e in estimates:
        others = [o for o in estimates if o is not e]
        beaten_by = [o for o in others if ahead(o, e, higher_is_better)]
        out.append(Ranked(
            estimate=e, rank=1 + len(beaten_by),
            ahead_of=[o.name for o in others if ahead(e, o, higher_is_better)],
            not_distinguishable_from=[o.name for o in others
                                      if not ahead(e, o, higher_is_better)
                                      and not ahead(o, e, higher_is_better)]))
    sign = -1.0 if higher_is_better else 1.0
    return sorted(out, key=lambda r: (r.rank, sign * r.estimate.point, r.name))


def ranking_lines(ranked: Sequence[Ranked], unit: str = "%") -> list[str]:
    """One line per candidate, saying whom it is ahead of and whom it cannot be told from;
    a lone candidate gets no rank (there was no one to be ranked against)."""
    lines = []
    for r in ranked:
        e = r.estimate
        said = [f"ahead of {', '.join(r.ahead_of)}"] if r.ahead_of else []
        if r.not_distinguishable_from:
            said.append(f"{NOT_DISTINGUISHABLE} from {', '.join(r.not_distinguishable_from)}")
        place = f"{r.rank}. " if len(ranked) > 1 else "only candidate with an interval: "
        lines.append(f"{place}{e.name}: {e.point:.1f} {unit} [{e.lo:.1f}, {e.hi:.1f}] "
                     f"(misses at most {100 * e.miss:.3g} % per side)"
                     + (f"; {'; '.join(said)}" if said else ""))
    return lines
