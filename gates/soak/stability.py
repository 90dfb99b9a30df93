"""G4's SNIA stability rules: spread and slope of per-window throughput over 5 rounds. Pure.

Every window after the warm-up is expected (gates.soak.readings): one without a throughput
figure is not read, counts against both rules, and the rounds over the windows read are shown
but do not decide (a round without its slow window would look steadier than it was).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..core.statistics import SteadyStateUnavailable, least_squares_slope, round_averages
from ..core.verdicts import G4, Limit, Measurement, Outcome
from .readings import coverage, throughput_not_read, undecided
from .rules import WindowRecord
from .spans import quantile, window_noise


def stability(windows: list[WindowRecord], spread_max: float = 20.0, slope_max: float = 10.0,
              keys: tuple[str, str] = ("g1.steady_state_spread_max",
                                       "g1.steady_state_slope_max"),
              confidence: float = 0.95, *,
              absent: Mapping[int, str] | None = None) -> list[Measurement]:
    """SNIA spread and slope over 5 rounds of per-window throughput (core.steady arithmetic).

    Each round's mean carries the windows' noise over the root of its windows; the spread's
    interval holds all five rounds at once (Bonferroni), the slope's is the least-squares
    slope's own. A figure noise can explain is MARGINAL, never a PASS nor a FAIL. ``absent``:
    the windows the plan expected and nobody committed, with why.
    """
    names = (G4["g4.window_spread"].title, G4["g4.window_slope"].title)
    limits = (Limit.at_most(spread_max, "%", key=keys[0]), Limit.at_most(slope_max, "%",
                                                                         key=keys[1]))
    cov = coverage(windows, throughput_not_read, absent)
    rates = [w.throughput or 0.0 for w in windows if w.index in cov.read]
    try:
        rounds = round_averages(rates)
        mean = sum(rounds) / len(rounds)
        if mean <= 0:
            raise SteadyStateUnavailable("no output throughput in any window (mean 0)")
    except SteadyStateUnavailable as exc:
        # What was not read shows beside why no verdict: a round short of windows may be one.
        return [cov.judge(Measurement.error(n, str(exc), lim)) if cov.expected
                else Measurement.error(n, str(exc), lim)
                for n, lim in zip(names, limits, strict=True)]
    k, size = len(rounds), len(rates) // len(rounds)
    # A window without output has no log noise; it FAILs the floor, and here stays a point.
    noise = window_noise(rates) if min(rates) > 0 else 0.0
    per_round = noise / math.sqrt(size) * 100  # one round mean's relative noise, %
    spread = (max(rounds) - min(rounds)) / mean * 100
    spread_half = 2 * quantile(1 - (1 - confidence) / k, len(rates)) * per_round
    slope = least_squares_slope(rounds) * (k - 1) / mean * 100
    slope_half = quantile(confidence, len(rates)) * per_round * (k - 1) / math.sqrt(
        sum((i - (k - 1) / 2) ** 2 for i in range(k)))
    ends = (abs(slope - slope_half), abs(slope + slope_half))
    slope_interval = (0.0 if abs(slope) <= slope_half else min(ends), max(ends))
    evidence = [f"round averages (tok/s, {size} windows each): "
                f"{', '.join(f'{r:.4g}' for r in rounds)}",
                f"window-to-window noise of the throughput: {noise * 100:.3g} %; one round's "
                f"mean: {per_round:.3g} %"]
    judged = [Measurement.measured(names[0], spread, limits[0], evidence=evidence,
                                   interval=(max(0.0, spread - spread_half),
                                             spread + spread_half)),
              Measurement.measured(names[1], abs(slope), limits[1], evidence=evidence,
                                   interval=slope_interval)]
    return [undecided(cov, m if m.outcome is not Outcome.MARGINAL else m.model_copy(update={
        "note": (f"its {confidence * 100:g} % interval [{m.interval[0]:.3g}, "
                 f"{m.interval[1]:.3g}] % crosses {m.limit.hi:g} %: rounds of {size} "
                 f"window{'s' if size > 1 else ''} at {noise * 100:.3g} % window-to-window "
                 "noise cannot tell; longer rounds (a longer soak) decide")}))
        for m in judged]
