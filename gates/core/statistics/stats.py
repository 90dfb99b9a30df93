"""Statistics for G2 and G3: percentiles, run-to-run CV, a comparison's decision. Pure.

G3's interval itself comes from pairs of repetitions (gates.core.paired); this module holds
what every gate shares: numpy-compatible percentiles, the CV G2 holds against its limit with
its confidence bounds, and the rule that turns a point and its interval into PASS, MARGINAL
or FAIL.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..verdicts import Limit, Outcome

DecisionStatistic = Literal["point", "lower_confidence_bound"]


# ---- run-to-run variation ------------------------------------------------------------------

def percentile(values: Sequence[float], p: float) -> float | None:
    """The p-th percentile (0-100), linear interpolation (numpy's default); None if empty."""
    if not 0 <= p <= 100:
        raise ValueError(f"percentile {p} is not between 0 and 100")
    xs = sorted(values)
    if any(map(math.isnan, xs)):
        raise ValueError("cannot take a percentile of NaN")
    return interpolate(xs, p) if xs else None


def interpolate(xs: list[float], p: float) -> float:
    """The p-th percentile of already sorted values, linearly interpolated."""
    # numpy's "linear" (Hyndman & Fan type 7): virtual index q*(n-1) between two neighbours.
    h = p / 100 * (len(xs) - 1)
    lo = math.floor(h)
    a, b = xs[lo], xs[min(lo + 1, len(xs) - 1)]
    t = h - lo
    if t == 0 or a == b:
        return a
    # a + (b-a)*t is monotone in t; the clamp keeps rounding from stepping past a neighbour.
    return min(max(a + (b - a) * t, a), b)


def cv_percent(values: Sequence[float]) -> float | None:
    """Sample std / |mean| in %; None with fewer than 2 values or a zero mean (unmeasurable)."""
    xs = [float(v) for v in values]
    if not all(map(math.isfinite, xs)):
        raise ValueError(f"cannot take the CV of non-finite values {xs}")
    if len(xs) < 2:
        return None
    mean = statistics.fmean(xs)
    if mean == 0:
        return None
    # Sample (n-1) std: three repetitions are a sample of the runs the site would see.
    return 100 * statistics.stdev(xs) / abs(mean)


class CvInterval(BaseModel):
    """A sample CV in % with one-sided confidence bounds, each missing the truth at most
    ``miss`` of the time (for normal data, approximately: Vangel 1996)."""

    model_config = ConfigDict(frozen=True)

    point: float
    lo: float
    hi: float  # math.inf where the data cannot bound the CV from above
    n: int = Field(ge=2)
    miss: float = Field(gt=0, lt=0.5)

    def text(self) -> str:
        """'CV 4.1 % [2.0, 9.7] over 5' (the interval's ends, then how many values)."""
        hi = "∞" if math.isinf(self.hi) else f"{self.hi:.1f}"
        return f"CV {self.point:.1f} % [{self.lo:.1f}, {hi}] over {self.n}"


def _mckay(k: float, n: int, u: float) -> float:
    # Vangel's modified McKay bound, K / sqrt(((u + 2)/n - 1) K^2 + u/(n - 1)), K a fraction:
    # M. G. Vangel, "Confidence intervals for a normal coefficient of variation", The American
    # Statistician 50(1), 21-26 (1996), after A. T. McKay, JRSS 95, 695-698 (1932). It is
    # near-exact for CVs under ~30 %, and for small K tends to the chi-square bound on the SD.
    d = ((u + 2) / n - 1) * k * k + u / (n - 1)
    return math.inf if d <= 0 else k / math.sqrt(d)


def cv_interval(values: Sequence[float], miss: float) -> CvInterval | None:
    """The CV of values in % and its bounds: the truth lies above ``hi`` (or below ``lo``) at
    most ``miss`` of the time. None where cv_percent has no figure."""
    if not 0 < miss < 0.5:
        raise ValueError(f"a bound's miss rate must be between 0 and 0.5, not {miss}")
    cv = cv_percent(values)
    if cv is None:
        return None
    from scipy.special import chdtri  # here: scipy loads numpy, 0.4 s on every kvgate command

    n, k = len(values), cv / 100
    # chdtri(df, p) is the chi-square quantile with p above it: the upper bound takes the
    # lower quantile (few degrees of freedom make it tiny, so the bound wide), and vice versa.
    hi = _mckay(k, n, float(chdtri(n - 1, 1 - miss)))
    lo = _mckay(k, n, float(chdtri(n - 1, miss)))
    # Rounding may not put an end on the wrong side of the point (and K = 0 bounds nothing).
    return CvInterval(point=cv, lo=min(100 * lo, cv), hi=max(100 * hi, cv), n=n, miss=miss)


# ---- the statistics themselves -------------------------------------------------------------

def median(values: Sequence[float]) -> float:
    """The median (linear-interpolated 50th percentile, as everywhere in kvgate)."""
    m = percentile(values, 50)
    if m is None:
        raise ValueError("cannot take the median of no values")
    return m


# ---- comparing two arms --------------------------------------------------------------------

class Comparison(BaseModel):
    """A candidate-vs-baseline figure in %, its interval and how it was computed."""

    model_config = ConfigDict(frozen=True)

    point: float
    lo: float
    hi: float
    confidence: float = Field(gt=0, lt=1)
    n_baseline: int = Field(ge=1)  # repetitions
    n_candidate: int = Field(ge=1)  # repetitions
    statistic_text: str

    @model_validator(mode="after")
    def _ordered(self) -> Comparison:
        if self.lo > self.hi:
            raise ValueError(f"interval lower end {self.lo} is above its upper end {self.hi}")
        return self

    @property
    def interval(self) -> tuple[float, float]:
        """(lo, hi), the form Measurement.interval takes."""
        return self.lo, self.hi


# ---- the decision --------------------------------------------------------------------------

def _conservative_bounds(comparison: Comparison, limit: Limit) -> list[float]:
    # The interval end nearest to failing: the lower end against a ">=" limit, the upper end
    # against a "<=" limit, both against a two-sided one.
    ends = []
    if limit.lo is not None:
        ends.append(comparison.lo)
    if limit.hi is not None:
        ends.append(comparison.hi)
    return ends


def decide(comparison: Comparison, limit: Limit,
           statistic: DecisionStatistic = "point") -> Outcome:
    """PASS, MARGINAL or FAIL for a comparison under the thresholds.toml decision rule.

    Under both rules the point estimate must pass (else FAIL) and a point that passes while
    the CI's conservative end (the lower end for a ">=" limit, the upper end for "<=") fails
    is MARGINAL, never PASS: for the three ordinary cases the two rules agree.

    They differ in what is held against the guard band (Limit.marginal): "point" holds the
    point estimate to it, so the CI only downgrades a pass to MARGINAL; "lower_confidence_bound"
    makes the conservative end the deciding figure and holds that end to the guard band, so a
    PASS needs the bound itself to clear the limit by the band. A point that fails is FAIL
    under both, even if a percentile interval lies wholly inside the limit.
    """
    if statistic not in ("point", "lower_confidence_bound"):
        raise ValueError(f"unknown decision statistic {statistic!r}: "
                         "'point' or 'lower_confidence_bound'")
    if not limit.contains(comparison.point):
        return Outcome.FAIL
    bounds = _conservative_bounds(comparison, limit)
    if not all(limit.contains(b) for b in bounds):
        return Outcome.MARGINAL
    deciding = [comparison.point] if statistic == "point" else bounds
    return Outcome.MARGINAL if any(limit.in_guard_band(v) for v in deciding) else Outcome.PASS


def above_claimed_band(point: float, claimed_max: float) -> bool:
    """Whether a gain exceeds the vendor's claimed maximum (a note: check the baseline)."""
    return point > claimed_max


# ---- reference ratios ----------------------------------------------------------------------

def speedup(baseline: float, candidate: float, *,
            better: Literal["lower", "higher"]) -> float:
    """How many times better candidate is than baseline (TTFT: better="lower", tok/s: "higher")."""
    if better not in ("lower", "higher"):
        raise ValueError(f"better must be 'lower' or 'higher', not {better!r}")
    if not (math.isfinite(baseline) and math.isfinite(candidate)
            and baseline > 0 and candidate > 0):
        raise ValueError(f"speedup needs finite figures > 0, not {baseline} and {candidate}")
    return baseline / candidate if better == "lower" else candidate / baseline
