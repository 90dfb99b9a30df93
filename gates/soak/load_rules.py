"""G4 rules over load and time: errors, throughput, TTFT drift, stability, gaps, duration. Pure.

``soak_measurements`` puts them together with the health-signal rules, in report order.
"""

from __future__ import annotations

import itertools
import math
import statistics
from statistics import NormalDist

from ..core import (
    G4,
    SHORTENED,
    G4Limits,
    Limit,
    Measurement,
    Outcome,
    SteadyStateUnavailable,
    least_squares_slope,
    round_averages,
)
from .rules import (
    HOUR,
    Deviation,
    SoakPlan,
    WindowRecord,
    effective_seconds,
    kernel_errors,
    media_errors,
    paths_live,
    verify_errors,
)


def request_errors(windows: list[WindowRecord], limits: G4Limits) -> Measurement:
    """Failed requests (errors and timeouts) over the whole soak <= the ceiling."""
    total = sum(w.errors for w in windows)
    bad = [f"window #{w.index}: {w.errors} of {w.requests} failed ({w.timeouts} timeouts)"
           for w in windows if w.errors]
    return Measurement.measured(
        G4["g4.request_errors"].title, total,
        Limit.at_most(limits.request_errors_max, "requests", key="g4.request_errors_max"),
        evidence=bad[:20], note=f"{sum(w.requests for w in windows)} requests, "
                                f"{sum(w.timeouts for w in windows)} timeouts")


def throughput_floor(windows: list[WindowRecord], limits: G4Limits,
                     g3_throughput: float | None) -> Measurement:
    """Every window's output throughput >= the floor (% of G3's)."""
    name = G4["g4.throughput_floor"].title
    if not g3_throughput or g3_throughput <= 0:
        return Measurement.error(name, "no G3 output throughput to hold the windows against")
    floor = limits.throughput_floor / 100 * g3_throughput
    limit = Limit.at_least(floor, "tok/s", key="g4.throughput_floor",
                           relative_to=f"{limits.throughput_floor:g} % of G3's "
                                       f"{g3_throughput:.4g} tok/s")
    if not windows:
        return Measurement.error(name, "no committed window", limit)
    rates = [(w.throughput or 0.0, w.index) for w in windows]
    below = [f"window #{i}: {t:.4g} tok/s" for t, i in rates if t < floor]
    return Measurement.measured(name, min(rates)[0], limit, evidence=below[:20],
                                note=f"{len(below)} of {len(windows)} windows below the floor")


def drift_spans(windows: list[WindowRecord]) -> tuple[list[WindowRecord], list[WindowRecord], str]:
    """The first and last hour of effective time (1/6 of the run each below 2 h), and a note."""
    total = effective_seconds(windows)
    span, note = HOUR, "first hour vs last hour"
    if total < 2 * HOUR:
        span = total / 6
        note = (f"run shorter than 2 h: first 1/6 vs last 1/6 of the run ({span:.0f} s each), "
                "not hours")
    first, last, at = [], [], 0.0
    for w in windows:
        if at < span:
            first.append(w)
        if at + w.seconds > total - span:
            last.append(w)
        at += w.seconds
    return first, last, note


def window_noise(values: list[float]) -> float:
    """Window-to-window relative noise of a series, from successive differences.

    The von Neumann estimator (half the mean squared successive difference) is barely moved by
    a slow drift, which is what the rule looks for, while the plain spread of the series would
    count the drift as noise. Relative to the series' median; 0 with fewer than two values.
    """
    if len(values) < 2:
        return 0.0
    mssd = math.fsum((b - a) ** 2 for a, b in itertools.pairwise(values)) / (len(values) - 1)
    return math.sqrt(mssd / 2) / statistics.median(values)


def _span_variance(n: int) -> float:
    # The variance of a median of n windows over that of one window: (pi / 2) / n for larger n
    # (its asymptotic efficiency against the mean); the median of one or two values is a mean.
    return 1.0 / n if n <= 2 else math.pi / 2 / n


def ttft_drift(windows: list[WindowRecord], limits: G4Limits,
               confidence: float = 0.95) -> Measurement:
    """TTFT p50 drift, last span vs first, within ±ttft_drift_max (median of window p50s).

    The unit is the window (requests inside one queue behind each other). The drift's interval
    comes from the windows' own window-to-window noise: a drift the spans' few windows cannot
    tell from that noise is MARGINAL, never a PASS, and a FAIL needs the whole interval beyond
    the limit, so a noisy machine neither passes a drifting array nor fails a steady one.
    """
    name = G4["g4.ttft_drift"].title
    limit = Limit(lo=-limits.ttft_drift_max, hi=limits.ttft_drift_max, unit="%",
                  key="g4.ttft_drift_max")
    first, last, note = drift_spans(windows)
    a = [w.ttft_p50 for w in first if w.ttft_p50 is not None]
    b = [w.ttft_p50 for w in last if w.ttft_p50 is not None]
    if not a or not b:
        return Measurement.error(name, f"no TTFT in the {'first' if not a else 'last'} span "
                                       f"({note})", limit)
    early, late = statistics.median(a), statistics.median(b)
    # Both directions count: a soak's point is that the operating point does not move.
    drift = (late - early) / early * 100
    series = [w.ttft_p50 for w in windows if w.ttft_p50 is not None]
    noise = window_noise(series) * 100
    half = NormalDist().inv_cdf(0.5 + confidence / 2) * noise * math.sqrt(
        _span_variance(len(a)) + _span_variance(len(b)))
    interval = (drift - half, drift + half)
    evidence = [f"median window TTFT p50: {early * 1e3:.4g} ms ({len(a)} windows) -> "
                f"{late * 1e3:.4g} ms ({len(b)} windows)",
                f"window-to-window noise of the TTFT p50: {noise:.3g} % over {len(series)} "
                f"windows; {confidence * 100:g} % interval of the drift [{interval[0]:.3g}, "
                f"{interval[1]:.3g}] %"]
    measured = Measurement.measured(name, drift, limit, note=note, evidence=evidence,
                                    interval=interval)
    wholly_outside = interval[0] > limit.hi or interval[1] < limit.lo
    if measured.outcome is Outcome.FAIL and not wholly_outside:
        measured = measured.model_copy(update={"outcome": Outcome.MARGINAL})
    if measured.outcome is Outcome.MARGINAL:
        measured = measured.model_copy(update={"note": (
            f"{note}; the {len(a)} and {len(b)} windows of the spans cannot tell a drift of "
            f"{drift:+.3g} % from the windows' own noise ({noise:.3g} % from one window to the "
            f"next): its {confidence * 100:g} % interval [{interval[0]:.3g}, "
            f"{interval[1]:.3g}] % crosses ±{limits.ttft_drift_max:g} %; a longer soak (hours "
            "per span) decides")})
    return measured


def stability(windows: list[WindowRecord], spread_max: float = 20.0, slope_max: float = 10.0,
              keys: tuple[str, str] = ("g1.steady_state_spread_max",
                                       "g1.steady_state_slope_max")) -> list[Measurement]:
    """SNIA spread and slope over 5 rounds of per-window throughput (core.steady arithmetic)."""
    names = (G4["g4.window_spread"].title, G4["g4.window_slope"].title)
    limits = (Limit.at_most(spread_max, "%", key=keys[0]), Limit.at_most(slope_max, "%",
                                                                         key=keys[1]))
    try:
        rounds = round_averages([w.throughput or 0.0 for w in windows])
        mean = sum(rounds) / len(rounds)
        if mean <= 0:
            raise SteadyStateUnavailable("no output throughput in any window (mean 0)")
    except SteadyStateUnavailable as exc:
        return [Measurement.error(n, str(exc), lim) for n, lim in zip(names, limits, strict=True)]
    spread = (max(rounds) - min(rounds)) / mean * 100
    slope = abs(least_squares_slope(rounds)) * (len(rounds) - 1) / mean * 100
    evidence = [f"round averages (tok/s): {', '.join(f'{r:.4g}' for r in rounds)}"]
    return [Measurement.measured(names[0], spread, limits[0], evidence=evidence),
            Measurement.measured(names[1], slope, limits[1], evidence=evidence)]


def total_gap(deviations: list[Deviation], limits: G4Limits) -> Measurement:
    """Total time the soak was not running <= gap_max."""
    gaps = [d for d in deviations if d.kind == "gap"]
    return Measurement.measured(G4["g4.gap_time"].title, math.fsum(d.seconds for d in gaps),
                                Limit.at_most(limits.gap_max, "s", key="g4.gap_max"),
                                evidence=[d.text for d in gaps][:20],
                                note=f"{len(gaps)} resume(s)")


def duration(windows: list[WindowRecord], plan: SoakPlan) -> Measurement:
    """Effective duration (gaps excluded) >= the planned duration; shortened runs say so."""
    note = f"{len(windows)} of {plan.windows} windows committed"
    if plan.shortened:
        note += f"; {SHORTENED}"
    return Measurement.measured(G4["g4.effective_duration"].title, effective_seconds(windows),
                                Limit.at_least(plan.duration - 1e-6, "s", key="g4.duration"),
                                note=note)


def soak_measurements(windows: list[WindowRecord], deviations: list[Deviation], plan: SoakPlan,
                      limits: G4Limits, spread_max: float = 20.0, slope_max: float = 10.0,
                      confidence: float = 0.95) -> list[Measurement]:
    """Every G4 rule over the committed windows, in report order, under its declared id."""
    spread, slope = stability(windows, spread_max, slope_max)
    media, warnings = media_errors(windows)
    ruled = [("g4.effective_duration", duration(windows, plan)),
             ("g4.request_errors", request_errors(windows, limits)),
             ("g4.verify_errors", verify_errors(windows, limits)),
             ("g4.media_errors", media), ("g4.critical_warnings", warnings),
             ("g4.kernel_errors", kernel_errors(windows)), ("g4.paths_live", paths_live(windows)),
             ("g4.throughput_floor", throughput_floor(windows, limits, plan.g3_throughput)),
             ("g4.ttft_drift", ttft_drift(windows, limits, confidence)),
             ("g4.window_spread", spread), ("g4.window_slope", slope),
             ("g4.gap_time", total_gap(deviations, limits))]
    return [G4[id].stamp(m) for id, m in ruled]
