"""How G4's trend rules read the windows in time: the warm-up, the spans, the windows' noise. Pure.

A window is the unit (requests inside one queue behind each other). The rules over throughput
and TTFT compare spans of windows (an hour; 1/6 of a run shorter than 2 h), and each span's
median gets an interval from the windows' own window-to-window noise, so that a machine whose
speed moves from one window to the next neither passes a drifting array nor fails a steady one.
"""

from __future__ import annotations

import itertools
import math
from statistics import NormalDist

from .rules import HOUR, WindowRecord, span


def after_warmup(windows: list[WindowRecord], count: int) -> tuple[list[WindowRecord], str]:
    """The windows the trend rules judge, and a note naming those left to the warm-up.

    The plan's first ``count`` windows are the warm-up: a fresh engine whose sessions all
    start together is not yet at its operating point. Their requests still count for errors,
    verify and health; only the throughput and TTFT rules leave them out.
    """
    warm = [w for w in windows if w.index < count]
    if not warm:
        return windows, ""
    ids = f"#{warm[0].index}" + (f"-#{warm[-1].index}" if len(warm) > 1 else "")
    return [w for w in windows if w.index >= count], (
        f"window {ids} left out as the warm-up ({span(math.fsum(w.seconds for w in warm))}; "
        "its requests still count for errors)")


def span_length(total: float) -> tuple[float, str]:
    """The span the trend rules compare: an hour, or 1/6 of a run shorter than 2 h; a note."""
    if total >= 2 * HOUR:
        return HOUR, "spans of an hour"
    return total / 6, (f"run shorter than 2 h: spans of 1/6 of the run ({total / 6:.0f} s "
                       "each), not hours")


def spans(windows: list[WindowRecord]) -> tuple[list[list[WindowRecord]], str]:
    """Consecutive spans of windows (a window belongs to the span it starts in), and a note."""
    length, note = span_length(math.fsum(w.seconds for w in windows))
    out: dict[int, list[WindowRecord]] = {}
    at = 0.0
    for w in windows:
        out.setdefault(int(at / length) if length > 0 else 0, []).append(w)
        at += w.seconds
    return list(out.values()), note


def window_noise(values: list[float]) -> float:
    """Window-to-window relative noise of a positive series, from successive differences.

    The von Neumann estimator (half the mean squared successive difference) is barely moved by
    a slow drift, which is what the rules look for, while the plain spread of the series would
    count the drift as noise. On the logarithm: the noise of a ratio, the same at any level
    (a span's interval m * exp(+-h) never goes below zero). 0 with fewer than two values.
    """
    if len(values) < 2:
        return 0.0
    if min(values) <= 0:
        raise ValueError(f"window noise needs positive values, not {min(values)!r}")
    logs = [math.log(v) for v in values]
    mssd = math.fsum((b - a) ** 2 for a, b in itertools.pairwise(logs)) / (len(logs) - 1)
    return math.sqrt(mssd / 2)


def span_variance(n: int) -> float:
    """The variance of a median of n windows over that of one window."""
    # (pi / 2) / n for larger n (the median's asymptotic efficiency against the mean); the
    # median of one or two values is a mean.
    return 1.0 / n if n <= 2 else math.pi / 2 / n


def noise_df(n: int) -> float:
    """Degrees of freedom of the window noise estimated from n windows' successive differences.

    Half the mean squared successive difference of n independent normal values has variance
    sigma^4 (3n - 4) / (n - 1)^2; a chi-square of the same variance has 2 (n - 1)^2 / (3n - 4)
    degrees of freedom (von Neumann et al. 1941): 2.9 for the demo's 5 windows, 575 for a
    72-hour soak's 864.
    """
    return 2 * (n - 1) ** 2 / (3 * n - 4) if n >= 2 else 0.0


def quantile(confidence: float, n: int | None = None) -> float:
    """The two-sided quantile at this confidence: Student's t when the noise came from n windows.

    A noise estimated from a handful of windows is itself uncertain, and a normal quantile
    would then give an interval narrower than the data allow.
    """
    p = 0.5 + confidence / 2
    if n is None:
        return NormalDist().inv_cdf(p)
    from scipy.special import stdtrit  # here: importing scipy costs 0.4 s per kvgate command
    return float(stdtrit(noise_df(n), p))


def windows_to_decide(noise: float, room: float, confidence: float,
                      spans_per_run: int = 6) -> int | None:
    """Windows per span that would bring a first-vs-last interval's half-width under ``room``.

    Both in the interval's unit (the log ratio). The noise is taken as it is; its degrees of
    freedom grow with the soak (``spans_per_run`` spans of n windows). None when no soak of
    up to 10,000 windows per span would (the point sits on the limit, or the noise is huge).
    """
    if room <= 0:
        return None
    # t >= z, so the normal quantile's answer is where the search can start.
    z = quantile(confidence)
    start = 1 if noise <= 0 else max(1, math.floor(math.pi * (z * noise / room) ** 2))
    for n in range(start, 10_001):
        z = quantile(confidence, spans_per_run * n)
        if z * noise * math.sqrt(2 * span_variance(n)) <= room:
            return n
    return None
