"""G4's trend intervals under autocorrelated windows (gates.soak.longrun), seeded and fast.

The windows are AR(1) on the log scale with a known lag-1 correlation: a slow state of the
machine that outlasts a window. The rules' intervals must hold their confidence there, and a
drift at the limit hidden in such noise must not PASS more often than the rule's stated risk.
"""

import math
import random

import pytest

from gates.core.configuration import G4Limits
from gates.core.verdicts import Outcome
from gates.soak.longrun import difference_df, differenced, half_width, span_noise
from gates.soak.rules import WindowRecord
from gates.soak.trends import throughput_floor, ttft_drift

LIMITS = G4Limits()
T0 = 1_800_000_000.0


def ar1(n, phi, sd, rng):
    """n AR(1) values with lag-1 correlation phi and marginal sd (stationary from the start)."""
    x, out = rng.gauss(0, sd), []
    for _ in range(n):
        out.append(x)
        x = phi * x + math.sqrt(1 - phi * phi) * rng.gauss(0, sd)
    return out


def soak(n, ttft=None, throughput=None, seconds=300.0):
    return [WindowRecord(index=i, start=T0 + i * seconds, end=T0 + (i + 1) * seconds,
                         requests=10, throughput=throughput[i] if throughput else 100.0,
                         ttft_p50=ttft[i] if ttft else 0.1,
                         ttft_p99=(ttft[i] if ttft else 0.1) * 2) for i in range(n)]


# ---- the estimator -------------------------------------------------------------------------

def lagged(k, lag):
    return [(i, i + lag) for i in range(k - lag)]


def test_the_lag_and_degrees_of_freedom_are_the_stated_rule():
    assert [differenced(k)[0] for k in (2, 3, 4, 72)] == [1, 1, 2, 2]
    assert differenced(2) == (1, []) and differenced(4) == (2, [(0, 2), (1, 3)])
    # Five spans, the first and last compared: one lag-2 difference is too few; lag 1 has two.
    assert differenced(5, (0, -1)) == (1, [(1, 2), (2, 3)])
    assert differenced(5, (0, 2)) == (1, [])
    # Von Neumann's at lag 1; at lag 2 two differences sharing a span covary.
    assert difference_df(lagged(5, 1)) == pytest.approx(2 * 16 / 11)
    assert difference_df(lagged(72, 2)) == pytest.approx(2 * 70 ** 2 / (3 * 72 - 8))
    assert difference_df(lagged(3, 2)) == pytest.approx(1.0) and difference_df([]) == 0
    # The spans compared are left out: 6 spans, first and last compared -> (1, 3), (2, 4).
    six = [[math.exp(v)] for v in (0.0, 0.1, 0.3, 0.2, 0.5, 9.0)]
    got = span_noise(six, leave_out=(0, -1))
    assert got.per_window == pytest.approx(math.sqrt((0.01 + 0.04) / 2 / 2)) and got.df == 2
    assert got.spans == 4 and span_noise(six[:4], leave_out=(0, 3)).df == 0


def test_hand_computed_noise_of_span_medians():
    # Medians 1, e^0.1, e^0.3, e^0.2 of 2, 2, 4, 2 windows; lag 2: (0.3 - 0)^2 / (1/2 + 1/4)
    # and (0.2 - 0.1)^2 / (1/2 + 1/2); w is their mean.
    e = math.exp
    spans = [[1.0, 1.0], [e(0.1)] * 2, [e(0.3)] * 4, [e(0.2)] * 2]
    got = span_noise(spans)
    want = math.sqrt((0.09 / 0.75 + 0.01 / 1.0) / 2)
    assert got.per_window == pytest.approx(want) and got.lag == 2 and got.spans == 4
    assert half_width(got, (2, 4), 0.95) > half_width(got, (4, 4), 0.95)
    assert half_width(span_noise([[1.0, 2.0]]), (1, 1), 0.95) == math.inf  # one span
    with pytest.raises(ValueError, match="finite figures > 0"):
        span_noise([[1.0], [0.0]])


@pytest.mark.parametrize("phi", [0.0, 0.5, 0.8])
def test_the_per_window_noise_is_the_long_run_one(phi):
    """Spans of 12 AR(1) windows: a span median's variance is what the estimate says,
    whatever phi (the sd of 400 spans' medians against per_window / sqrt(12))."""
    rng = random.Random(11)
    x = ar1(12 * 400, phi, 0.05, rng)
    spans = [[math.exp(v) for v in x[i:i + 12]] for i in range(0, len(x), 12)]
    medians = [sorted(s)[5:7] for s in spans]
    observed = math.sqrt(sum(math.log(a * b) ** 2 / 4 for a, b in medians) / len(medians))
    assert span_noise(spans).per_window / math.sqrt(12) == pytest.approx(observed, rel=0.12)


# ---- the rules on correlated windows -------------------------------------------------------

def coverage(phi, sims=300, n=144, seed=5):
    """Share of ttft_drift's 95 % intervals that hold the true drift (0) on a 12-hour soak of
    5-minute windows (12 spans of an hour) whose TTFT p50 is AR(1) at phi, 5 % marginal sd."""
    rng, held = random.Random(seed), 0
    for _ in range(sims):
        m = ttft_drift(soak(n, ttft=[0.1 * math.exp(v) for v in ar1(n, phi, 0.05, rng)]),
                       LIMITS)
        held += m.interval[0] <= 0.0 <= m.interval[1]
    return held / sims


def test_the_drift_interval_holds_its_confidence_when_windows_are_correlated():
    # Assuming independent windows, the interval held 0 about 70 % of the time at phi 0.5.
    assert coverage(0.5) >= 0.92
    assert coverage(0.0, sims=200) >= 0.92


def test_a_drift_at_the_limit_in_correlated_noise_is_not_passed():
    """+10 % from mid-run (the limit), AR(1) at 0.5: the old rule PASSed it ~15 % of the time."""
    rng, n, passed = random.Random(9), 144, 0
    for _ in range(300):
        x = ar1(n, 0.5, 0.05, rng)
        p50 = [0.1 * math.exp(v) * (1.1 if i >= n // 2 else 1.0) for i, v in enumerate(x)]
        passed += ttft_drift(soak(n, ttft=p50), LIMITS).outcome is Outcome.PASS
    assert passed / 300 <= 0.025 + 3 * math.sqrt(0.025 * 0.975 / 300), passed


def test_a_span_at_the_floor_in_correlated_noise_is_not_passed():
    """The 13th hour of 24 at 90 % of the rest (the floor), AR(1) at 0.5, 5 % sd."""
    rng, n, passed = random.Random(13), 288, 0
    for _ in range(300):
        x = ar1(n, 0.5, 0.05, rng)
        rate = [100.0 * math.exp(v) * (0.9 if 144 <= i < 156 else 1.0) for i, v in enumerate(x)]
        passed += throughput_floor(soak(n, throughput=rate), LIMITS).outcome is Outcome.PASS
    assert passed / 300 <= 0.025 + 3 * math.sqrt(0.025 * 0.975 / 300), passed
