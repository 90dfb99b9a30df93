"""soak_risk.py --ar: G4's trend rules on long soaks of AR(1) windows fitted to the recording.

The recorded rehearsals are 2 minutes (5 windows of 20 s a run): too short to show a slow state
that outlasts a window, and resampling them in blocks of two cannot make one. So the recording
gives the noise's size and shape, and the correlation is set: each run's log-residuals (window
over its run's median, demeaned) give a pooled lag-1 correlation (reported, not used) and an
AR(1) fit whose standardized innovations are resampled (their heavy tails kept); a synthetic
soak is x_t = phi x_(t-1) + sqrt(1 - phi^2) sd z_t at the recorded marginal sd, for phi in
PHIS, on top of the same truths as the block-bootstrap tables (a step of D at mid-run; the
middle sixth at L x the rest). "old" is the rule with the window-to-window noise (independent
windows: gates.soak.noise's fallback forced); "new" is the rule as it runs.
"""

from __future__ import annotations

import math
import random
import statistics
from contextlib import contextmanager

import gates.soak.trends as trends
from gates.core.configuration import G4Limits
from gates.core.verdicts import Outcome
from gates.soak.noise import Noise
from gates.soak.spans import window_noise

PHIS = (0.0, 0.3, 0.5, 0.8)
SOAKS = ((864, "72 h"), (12, "1 h"))  # 5-minute windows


def fit(data: dict, key: str) -> tuple[float, float, list[float]]:
    """(pooled lag-1 correlation, marginal sd, standardized AR(1) innovations) of the runs."""
    runs = []
    for r in data["runs"]:
        x = [math.log(v / statistics.median(r[key])) for v in r[key]]
        mean = sum(x) / len(x)
        runs.append([v - mean for v in x])
    var = sum(v * v for x in runs for v in x) / sum(len(x) for x in runs)
    lag1 = sum(a * b for x in runs for a, b in zip(x, x[1:], strict=False))
    phi = lag1 / sum(v * v for x in runs for v in x[:-1])
    innov = [b - phi * a for x in runs for a, b in zip(x, x[1:], strict=False)]
    scale = math.sqrt(sum(e * e for e in innov) / len(innov))
    return phi, math.sqrt(var), [e / scale for e in innov]


def series(n: int, phi: float, sd: float, z: list[float], rng: random.Random) -> list[float]:
    x, out = sd * rng.choice(z), []
    for _ in range(n):
        out.append(x)
        x = phi * x + math.sqrt(1 - phi * phi) * sd * rng.choice(z)
    return out


@contextmanager
def old_rule():
    """The rule as it was: every interval from the window-to-window noise."""
    real = trends.noise_of

    def windows_only(spans, leave_out):
        values = [v for s in spans for v in s]
        return Noise(span=None, window=window_noise(values), windows=len(values))
    trends.noise_of = windows_only
    try:
        yield
    finally:
        trends.noise_of = real


def outcome_shares(n, phi, fitted, truth, sims, rng, limits, windows) -> dict[Outcome, float]:
    """Shares of PASS / MARGINAL / FAIL over sims soaks of n windows under this truth."""
    _, sd, z = fitted
    counts = dict.fromkeys(Outcome, 0)
    kind, value = truth
    lo, hi = n * 2 // 6, max(n * 3 // 6, n * 2 // 6 + 1)
    for _ in range(sims):
        e = series(n, phi, sd, z, rng)
        if kind == "drift":
            values = [(100.0, 0.1 * math.exp(x) * (1 + value if i >= n / 2 else 1.0))
                      for i, x in enumerate(e)]
            m = trends.ttft_drift(windows(values, seconds=300.0), limits)
        else:
            values = [(100.0 * math.exp(x) * (value if lo <= i < hi else 1.0), 0.1)
                      for i, x in enumerate(e)]
            m = trends.throughput_floor(windows(values, seconds=300.0), limits)
        counts[m.outcome] += 1
    return {k: v / sims for k, v in counts.items()}


TRUTHS = (("drift at the limit (+10 %): P(PASS)", ("drift", 0.10), Outcome.PASS),
          ("middle sixth at the floor (90 %): P(PASS)", ("floor", 0.90), Outcome.PASS),
          ("steady, drift rule: P(FAIL)", ("drift", 0.0), Outcome.FAIL),
          ("steady, floor rule: P(FAIL)", ("floor", 1.0), Outcome.FAIL),
          ("steady, drift rule: P(PASS)", ("drift", 0.0), Outcome.PASS),
          ("steady, floor rule: P(PASS)", ("floor", 1.0), Outcome.PASS))


def ar_rows(data: dict, sims: int, seed: int, windows) -> tuple[str, list[list[str]]]:
    """The table's rows: one per (soak, truth, phi), old and new side by side."""
    fits = {"drift": fit(data, "ttft_p50"), "floor": fit(data, "throughput")}
    said = "; ".join(f"{k}: lag-1 {f[0]:+.2f}, sd {f[1] * 100:.3g} %" for k, f in fits.items())
    limits, rows = G4Limits(), []
    for n, label in SOAKS:
        for text, truth, shown in TRUTHS:
            for phi in PHIS:
                got = []
                for old in (True, False):
                    rng = random.Random(seed)  # the same soaks for both rules
                    with old_rule() if old else _nothing():
                        shares = outcome_shares(n, phi, fits[truth[0]], truth, sims, rng,
                                                limits, windows)
                    got.append(f"{shares[shown] * 100:.1f}")
                rows.append([label, text, f"{phi:g}", *got])
    return said, rows


@contextmanager
def _nothing():
    yield
