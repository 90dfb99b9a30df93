"""Statistics for G2 and G3: run-to-run CV, seeded bootstrap CIs, arm comparisons, decisions.

Pure: no I/O, no clock, no global random state. Every resampling draws from its own
``random.Random(seed)``, so the same inputs and seed give the same interval on every machine.

Shapes: an arm is a list of repetitions; for latencies a repetition is the list of its
per-request values (warm-up and failed requests already excluded), for throughput it is one
figure per repetition.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .verdict import Limit, Outcome

Reps = Sequence[Sequence[float]]
Statistic = Callable[[list[list[float]]], float]
DecisionStatistic = Literal["point", "lower_confidence_bound"]

RESAMPLES = 2000


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


# ---- the statistics themselves -------------------------------------------------------------

def median(values: Sequence[float]) -> float:
    """The median (linear-interpolated 50th percentile, as everywhere in kvgate)."""
    m = percentile(values, 50)
    if m is None:
        raise ValueError("cannot take the median of no values")
    return m


def median_of_p50(reps: Reps) -> float:
    """p50 over the requests of each repetition, then the median over repetitions."""
    return median([median(rep) for rep in reps])


# ---- bootstrap -----------------------------------------------------------------------------

def _check_bootstrap(confidence: float, resamples: int) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence} is not between 0 and 1 (exclusive)")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, not {resamples}")


def _resample(reps: Reps, rng: random.Random, hierarchical: bool) -> list[list[float]]:
    # Repetitions first: run-to-run variation is usually the larger part of the uncertainty.
    chosen = rng.choices(reps, k=len(reps))
    if not hierarchical:
        return [list(rep) for rep in chosen]
    return [rng.choices(rep, k=len(rep)) for rep in chosen]


def _interval(distribution: list[float], confidence: float) -> tuple[float, float]:
    # Percentile interval, with the same linear interpolation as every other percentile here.
    tail = 100 * (1 - confidence) / 2
    return percentile(distribution, tail), percentile(distribution, 100 - tail)


def bootstrap_ci(samples_by_rep: Reps, statistic: Statistic, confidence: float = 0.95,
                 seed: int = 0, resamples: int = RESAMPLES,
                 hierarchical: bool = True) -> tuple[float, float]:
    """Percentile bootstrap CI of statistic(reps): over repetitions, and requests within them."""
    _check_bootstrap(confidence, resamples)
    if not samples_by_rep:
        raise ValueError("cannot bootstrap without any repetition")
    rng = random.Random(seed)
    distribution = [statistic(_resample(samples_by_rep, rng, hierarchical))
                    for _ in range(resamples)]
    return _interval(distribution, confidence)


# ---- comparing two arms --------------------------------------------------------------------

class Comparison(BaseModel):
    """A candidate-vs-baseline figure in %, its bootstrap CI and how it was computed."""

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


def _pct(confidence: float) -> str:
    return f"{100 * confidence:g} %"


def _reps_text(n_baseline: int, n_candidate: int) -> str:
    if n_baseline == n_candidate:
        return f"{n_baseline} repetitions"
    return f"{n_baseline} (baseline) / {n_candidate} (candidate) repetitions"


def _check_arm(name: str, reps: Reps, *, positive: bool) -> None:
    if not reps:
        raise ValueError(f"the {name} arm has no repetitions")
    for i, rep in enumerate(reps, 1):
        if not rep:
            raise ValueError(f"repetition {i} of the {name} arm has no values")
        bad = [v for v in rep if not (math.isfinite(v) and (v > 0 if positive else v >= 0))]
        if bad:
            need = "> 0" if positive else ">= 0"
            raise ValueError(f"repetition {i} of the {name} arm has values that are not finite "
                             f"and {need}: {bad[:5]}")


def ttft_reduction(baseline_reps: Reps, candidate_reps: Reps, *, confidence: float = 0.95,
                   seed: int = 0, resamples: int = RESAMPLES,
                   hierarchical: bool = True) -> Comparison:
    """TTFT p50 reduction in %: 1 - median-over-reps p50 (candidate / baseline), with a CI."""
    _check_bootstrap(confidence, resamples)
    # Every TTFT > 0: the ratio's denominator can then never be 0, in any resample either.
    _check_arm("baseline", baseline_reps, positive=True)
    _check_arm("candidate", candidate_reps, positive=True)

    def reduction(base: Reps, cand: Reps) -> float:
        return 100 * (1 - median_of_p50(cand) / median_of_p50(base))

    # The arms ran separately (same seeded workload, different servers): each is resampled on
    # its own, from one generator, so the interval depends on the seed alone.
    rng = random.Random(seed)
    distribution = [reduction(_resample(baseline_reps, rng, hierarchical),
                              _resample(candidate_reps, rng, hierarchical))
                    for _ in range(resamples)]
    lo, hi = _interval(distribution, confidence)
    scheme = "repetitions and requests within them" if hierarchical else "repetitions"
    text = (f"p50 TTFT over requests, median over "
            f"{_reps_text(len(baseline_reps), len(candidate_reps))}, {_pct(confidence)} "
            f"bootstrap CI ({resamples} resamples of {scheme}, seed {seed})")
    return Comparison(point=reduction(baseline_reps, candidate_reps), lo=lo, hi=hi,
                      confidence=confidence, n_baseline=len(baseline_reps),
                      n_candidate=len(candidate_reps), statistic_text=text)


def throughput_gain(baseline_rep_throughputs: Sequence[float],
                    candidate_rep_throughputs: Sequence[float], *, confidence: float = 0.95,
                    seed: int = 0, resamples: int = RESAMPLES) -> Comparison:
    """Output-throughput gain in %: median(candidate) / median(baseline) - 1, CI over reps."""
    # Over repetitions only, by design: throughput is a property of a whole run (all tokens of
    # concurrent requests over one duration). Resampling requests against a fixed duration
    # would only pick up output-length spread, which max_tokens/ignore_eos pin, and would
    # give a falsely narrow interval.
    _check_bootstrap(confidence, resamples)
    base, cand = list(baseline_rep_throughputs), list(candidate_rep_throughputs)
    _check_arm("baseline", [base], positive=True)
    _check_arm("candidate", [cand], positive=False)

    def gain(b: Sequence[float], c: Sequence[float]) -> float:
        return 100 * (median(c) / median(b) - 1)

    rng = random.Random(seed)
    distribution = [gain(rng.choices(base, k=len(base)), rng.choices(cand, k=len(cand)))
                    for _ in range(resamples)]
    lo, hi = _interval(distribution, confidence)
    text = (f"output throughput per repetition, median over {_reps_text(len(base), len(cand))},"
            f" {_pct(confidence)} bootstrap CI ({resamples} resamples of repetitions, "
            f"seed {seed})")
    return Comparison(point=gain(base, cand), lo=lo, hi=hi, confidence=confidence,
                      n_baseline=len(base), n_candidate=len(cand), statistic_text=text)


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
