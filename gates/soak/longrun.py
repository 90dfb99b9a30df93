"""The noise of a span's median when windows are not independent: batch means over spans. Pure.

A window's figure moves with the machine's slow states, and a slow state can outlast a window
(the README: tens of seconds; a throttled drive, a compaction, a neighbour's backup for
minutes). Windows next to each other are then alike, and two estimates that assume they are
independent both go wrong the same way: the window-to-window noise from successive
differences sees only the part of the noise that changes between neighbours (sigma^2 (1 - rho)
for a lag-1 correlation rho), and a median of n windows varies like n / (1 + 2 sum rho_k)
independent ones, not n. At rho = 0.5 the two together make a half-width 2.4 times too narrow
(sqrt((1 + rho) / (1 - rho)^2)).

So the spans the rules compare are their own batches (batch means, Schmeiser 1982): each span's
median is one figure, and the noise is read from differences of span medians two spans apart.
One span apart would miss what a slow state straddling two neighbours makes them share (at
rho = 0.8 on hour-long spans of 5-minute windows their medians correlate 0.25); two spans apart
that is rho^n of it, and a slow drift of the array (what the rules look for) still moves a
difference by only two spans' worth. The bandwidth rule, stated (differenced): lag 2 where that
leaves two differences or more, else lag 1, and no noise read from fewer than two; from eight
differences on, their median (robust to a step or a dip's edges), not their mean. The spans a
rule compares are left out of the differences (the effect judged is not noise). What it
cannot see is a state that lasts longer than a span (an hour on a soak of 6 h or more; 1/6 of
a shorter one): bench/soak_risk.py --ar measures how far coverage falls then.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

ROBUST_FROM = 8  # differences from which their median, not their mean, reads the noise


class SpanNoise(NamedTuple):
    """The long-run noise of one window, read from span medians.

    per_window: log scale; a span of n windows has a median whose sd is per_window / sqrt(n),
    whatever the windows' correlation inside a span. df: the degrees of freedom of that
    estimate (Student's t; 0: none could be read). lag: spans between the medians
    differenced. spans: how many the noise was read from (those compared left out).
    """

    per_window: float
    df: float
    lag: int
    spans: int
    differences: int = 0


def differenced(spans: int, leave_out: Sequence[int] = ()) -> tuple[int, list[tuple[int, int]]]:
    """The lag and the pairs of spans whose medians are differenced (the bandwidth rule).

    Lag 2 where that leaves two differences or more, else lag 1; fewer than two differences
    read no noise (one squared difference is one degree of freedom, and one lucky small one
    would pass anything).
    """
    out = {i % spans for i in leave_out} if spans else set()
    for lag in (2, 1):
        pairs = [(i, i + lag) for i in range(spans - lag) if not {i, i + lag} & out]
        if len(pairs) >= 2:
            return lag, pairs
    return 1, []


def difference_df(pairs: Sequence[tuple[int, int]]) -> float:
    """Degrees of freedom of the mean squared difference over these pairs of independent normals.

    Each squared difference has variance 8 v^2; two that share a span covary by 2 v^2. Half the
    mean square, over m differences with s sharing pairs, has the variance of a chi-square with
    2 m^2 / (2m + s) degrees of freedom: at lag 1 over k spans von Neumann's 2 (k - 1)^2 /
    (3k - 4); 45.6 at lag 2 for a 72-hour soak's 72 spans, the first and one more left out.
    """
    m = len(pairs)
    if m == 0:
        return 0.0
    shared = sum(len({*a} & {*b}) for i, a in enumerate(pairs) for b in pairs[i + 1:])
    return 2 * m ** 2 / (2 * m + shared)


def span_noise(spans: Sequence[Sequence[float]], leave_out: Sequence[int] = ()) -> SpanNoise:
    """The per-window long-run noise of positive figures grouped into consecutive spans.

    leave_out: the spans a rule compares. A difference that touches one holds the effect being
    judged (a step between them, the dip the floor looks for) and would pass it off as noise, so
    that a larger effect looked less certain; the noise comes from the other spans, as a t test
    reads its variance from inside the groups, not from between them.

    Spans may differ in size (the last one short, a gap): a difference of two medians of n_i
    and n_j windows has variance w (1/n_i + 1/n_j), and w is the mean of each squared difference
    over (1/n_i + 1/n_j). No difference left (too few spans): 0 with 0 degrees of freedom, an
    interval without end. ValueError for a figure that is not > 0 or an empty span.
    """
    if any(not s for s in spans):
        raise ValueError("a span without windows has no median")
    bad = [v for s in spans for v in s if not (math.isfinite(v) and v > 0)]
    if bad:
        raise ValueError(f"span noise needs finite figures > 0, not {bad[0]!r}")
    k = len(spans)
    lag, pairs = differenced(k, leave_out)
    used = len({i for p in pairs for i in p})
    if not pairs:
        return SpanNoise(per_window=0.0, df=0.0, lag=lag, spans=used, differences=0)
    logs = [math.log(statistics.median(s)) for s in spans]
    terms = [(logs[j] - logs[i]) ** 2 / (1 / len(spans[i]) + 1 / len(spans[j]))
             for i, j in pairs]
    if len(terms) < ROBUST_FROM:
        return SpanNoise(per_window=math.sqrt(math.fsum(terms) / len(terms)),
                         df=difference_df(pairs), lag=lag, spans=used, differences=len(pairs))
    # A step of the array (what the drift rule looks for) or the edges of a long dip (the
    # floor's) sit in a few differences; their median does not move with them, the mean would
    # (a 12-hour dip to 70 % hid itself in 72 hours that way). Scaled to be unbiased for normal
    # noise; its degrees of freedom are the mean's times 2 c^2 / 1.1266 (the sample median's
    # variance at the chi-square's median, 1 / (4 m f(q)^2)): 0.37 of them in the limit.
    c = median_chi2(len(terms))
    return SpanNoise(per_window=math.sqrt(statistics.median(terms) / c),
                     df=difference_df(pairs) * 2 * c * c / 1.1266, lag=lag, spans=used,
                     differences=len(pairs))


@lru_cache(maxsize=256)
def median_chi2(m: int) -> float:
    """E[sample median of m chi-square(1) values] (exact, by the order statistics' densities)."""
    from scipy import integrate, stats  # here: importing scipy costs 0.4 s per kvgate command

    def moment(k: int) -> float:
        """E of the k-th smallest of m."""
        def density(x: float) -> float:
            return x * k * math.comb(m, k) * stats.chi2.cdf(x, 1) ** (k - 1) * \
                stats.chi2.sf(x, 1) ** (m - k) * stats.chi2.pdf(x, 1)
        return integrate.quad(density, 0, math.inf, limit=200)[0]
    return moment(m // 2 + 1) if m % 2 else (moment(m // 2) + moment(m // 2 + 1)) / 2


def t_quantile(confidence: float, df: float) -> float:
    """The two-sided Student's t quantile at this confidence (normal at df inf; inf at df 0)."""
    if df <= 0:
        return math.inf
    from scipy.special import stdtrit  # here: importing scipy costs 0.4 s per kvgate command
    return float(stdtrit(df, 0.5 + confidence / 2))


def half_width(noise: SpanNoise, sizes: Sequence[int], confidence: float) -> float:
    """Half-width (log scale) of a difference of span medians of these sizes at confidence."""
    if noise.df <= 0:
        return math.inf  # one span: nothing to read the noise from
    if noise.per_window == 0:
        return 0.0  # spans that do not move at all: a point (t * 0)
    spread = noise.per_window * math.sqrt(math.fsum(1 / n for n in sizes))
    return t_quantile(confidence, noise.df) * spread


def windows_for(noise: SpanNoise, room: float, confidence: float) -> int | None:
    """Windows per span that would bring a two-span interval's half-width under ``room`` (log
    scale) at this long-run noise and its degrees of freedom; None: no span of up to 10,000."""
    t = t_quantile(confidence, noise.df)
    if room <= 0 or not math.isfinite(t):
        return None
    need = max(1, math.ceil(2 * (t * noise.per_window / room) ** 2))
    return need if need <= 10_000 else None
