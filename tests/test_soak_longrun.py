"""G4's trend intervals under autocorrelated windows (gates.soak.longrun), seeded and fast.

The windows are AR(1) on the log scale with a known lag-1 correlation: a slow state of the
machine that outlasts a window. The rules' intervals must hold their confidence there, and a
drift at the limit hidden in such noise must not PASS more often than the rule's stated risk.
"""

import math
import random
import statistics

import pytest
from scipy import stats

from gates.core.configuration import G4Limits
from gates.core.verdicts import Limit, Outcome
from gates.soak.longrun import (
    SpanNoise,
    difference_df,
    differenced,
    half_width,
    median_chi2,
    span_noise,
    t_quantile,
    windows_for,
)
from gates.soak.noise import Noise, noise_of
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


# ---- the estimator at its edges -------------------------------------------------------------

def t95(df):
    """Student's two-sided 95 % quantile, read from scipy.stats (not the code's stdtrit)."""
    return stats.t.ppf(0.975, df)


def test_no_spans_and_too_few_spans_read_no_noise():
    assert differenced(0, (0, -1)) == (1, [])  # nothing to take a remainder of
    # Four spans, the first and last compared: nothing to difference, and it says so in full.
    four = [[1.0], [1.1], [1.2], [1.3]]
    assert span_noise(four, leave_out=(0, 3)) == SpanNoise(
        per_window=0.0, df=0.0, lag=1, spans=0, differences=0)
    with pytest.raises(ValueError, match="^a span without windows has no median$"):
        span_noise([[1.0], []])


def test_a_few_differences_say_how_many_they_are():
    e = math.exp
    got = span_noise([[1.0], [e(0.1)], [e(0.3)], [e(0.2)]])
    assert (got.lag, got.spans, got.differences) == (2, 4, 2)


def test_from_eight_differences_their_median_reads_the_noise():
    # Ten single-window spans, lag 2: eight differences, one of them a step of 2.4.
    logs = [0.0, 0.0, 0.1, 0.1, 0.3, 0.3, 0.6, 0.6, 1.0, 3.0]
    got = span_noise([[math.exp(v)] for v in logs])
    terms = [(logs[i + 2] - logs[i]) ** 2 / 2 for i in range(8)]
    assert statistics.median(terms) == pytest.approx(0.0325)
    assert got.per_window == pytest.approx(math.sqrt(0.0325 / median_chi2(8)))
    assert (got.lag, got.spans, got.differences) == (2, 10, 8)
    # The median's degrees of freedom: the mean's times 2 c^2 / 1.1266 (0.58 of them at 8).
    c, mean_df = median_chi2(8), difference_df(lagged(10, 2))
    assert got.df == pytest.approx(mean_df * 2 * c * c / 1.1266)
    assert got.df / mean_df == pytest.approx(0.584, abs=0.001)


def test_the_t_quantile_is_students_and_endless_without_degrees_of_freedom():
    assert t_quantile(0.95, 0) == math.inf and t_quantile(0.95, -1) == math.inf
    assert t_quantile(0.95, 1) == pytest.approx(t95(1))  # 12.7, not endless
    assert t_quantile(0.95, 0.5) == pytest.approx(t95(0.5))


def test_half_width_by_hand():
    # One degree of freedom still gives an interval: t(1) * w * sqrt(1/2 + 1/4).
    one = SpanNoise(per_window=0.04, df=1.0, lag=2, spans=3, differences=1)
    assert half_width(one, (2, 4), 0.95) == pytest.approx(t95(1) * 0.04 * math.sqrt(0.75))
    unit = SpanNoise(per_window=1.0, df=5.0, lag=2, spans=7, differences=5)
    assert half_width(unit, (1, 1), 0.95) == pytest.approx(t95(5) * math.sqrt(2))
    still = SpanNoise(per_window=0.0, df=5.0, lag=2, spans=7, differences=5)
    assert half_width(still, (1, 1), 0.95) == 0.0


def noise_at(per_window, df=10.0):
    return SpanNoise(per_window=per_window, df=df, lag=2, spans=12, differences=10)


def test_windows_per_span_that_decide_by_hand():
    # 2 (t * w / room)^2 at t(10) = 2.228, w = room: 9.93, so 10 windows per span.
    assert windows_for(noise_at(0.05), 0.05, 0.95) == 10
    assert windows_for(noise_at(0.001), 0.05, 0.95) == 1  # one window already decides
    assert windows_for(noise_at(0.05), 2.0, 0.95) == 1  # room of more than 1 (log) is room
    # No room, or no degrees of freedom: nothing decides.
    assert windows_for(noise_at(0.05), 0.0, 0.95) is None
    assert windows_for(noise_at(0.05), -0.1, 0.95) is None
    assert windows_for(noise_at(0.05, df=0.0), 0.05, 0.95) is None


@pytest.mark.parametrize(("target", "want"), [(9999.5, 10_000), (10_000.5, None)])
def test_windows_per_span_stop_at_ten_thousand(target, want):
    # A noise whose 2 (t w / room)^2 is target: 10,000 windows a span is the last answer.
    w = 0.01 * math.sqrt(target / 2) / t95(10)
    assert windows_for(noise_at(w), 0.01, 0.95) == want


WOBBLE = [1.0, 1.01, 0.99] * 4 + [1.0, 1.01]  # fourteen hours of a steady machine, +-1 %


def test_the_noise_of_a_comparison_leaves_the_compared_spans_out():
    spans = [[100 * v] for v in WOBBLE]
    got = noise_of(spans, leave_out=(0, 13))
    # Lag 2 over spans 1-12: ten differences, enough for the long-run noise.
    assert got == Noise(span=span_noise(spans, (0, 13)), window=0.0, windows=14)
    assert (got.span.differences, got.span.spans) == (10, 12)


# ---- what the floor says -------------------------------------------------------------------

FLOOR_RULE = ("{n} spans (spans of an hour), each later one against the first; PASS needs every "
              "later span's 95 % lower bound at or above the floor, FAIL a span whose upper "
              "bound at {every} % (Bonferroni over the later spans) is under it")
LONG_RUN = ("long-run noise of one window's {what}: {noise} %, from the medians of {spans} spans "
            "2 apart, those compared left out ({df} degrees of freedom; a span of n windows: "
            "that over the root of n, however alike neighbouring windows are)")


def hours(throughput=None, ttft=None):
    """Hour-long windows: each is a span of its own (the spans' noise is then the windows')."""
    n = len(throughput or ttft)
    return soak(n, ttft=ttft, throughput=throughput, seconds=3600.0)


def unsent(windows, *at):
    """The windows at these places sent no request: read by no load rule."""
    return [w.model_copy(update={"requests": 0}) if w.index in at else w for w in windows]


def test_a_dip_the_spans_noise_cannot_tell_from_the_floor_is_marginal_and_says_so():
    # Hour 1 at 88 %, the other 13 within 1 % of the first: its interval [84.7, 91.4] crosses
    # the floor, and the noise comes from the 12 spans not compared.
    rate = [100 * v for v in WOBBLE]
    rate[1] = 88.0
    m = throughput_floor(hours(throughput=rate), LIMITS)
    assert m.outcome is Outcome.MARGINAL and m.value == 88.0
    assert m.note == (
        "the lowest later span's 95 % interval [84.7, 91.4] % of the first span's crosses the "
        "floor (90 %) at a noise of 0.959 % per window: longer spans (more windows each) "
        "decide; " + FLOOR_RULE.format(n=14, every="99.62"))
    assert m.evidence == [
        "spans read 14 of 14",
        "lowest later span (window #1, 1 window): median 88 tok/s, 88 % of the first span's, "
        "interval [84.7, 91.4] %",
        "first span (window #0, 1 window): median 100 tok/s; the floor 90 % of it is 90 tok/s",
        LONG_RUN.format(what="throughput", noise="0.959", spans=12, df="3.82")
        + "; 1 single windows below the floor",
        "window #1: 88 tok/s"]


def test_a_span_whose_own_interval_is_under_the_floor_is_marginal_until_every_span_counts():
    # Hour 1 at 85 %: its 95 % interval [81.8, 88.3] lies under the floor, but FAIL needs the
    # upper bound held over all 13 later spans (99.6 %), and that reaches above 90.
    rate = [100 * v for v in WOBBLE]
    rate[1] = 85.0
    m = throughput_floor(hours(throughput=rate), LIMITS)
    assert m.outcome is Outcome.MARGINAL and m.interval[1] < 90
    assert m.note.startswith("the lowest later span's 95 % interval [81.8, 88.3] %")


def test_of_two_spans_below_the_floor_the_lowest_is_named():
    rate = [100 * v for v in WOBBLE]
    rate[1], rate[5] = 70.0, 60.0
    m = throughput_floor(hours(throughput=rate), LIMITS)
    assert m.outcome is Outcome.FAIL and m.value == 60.0
    assert m.note == "2 of 13 later spans below the floor; " + FLOOR_RULE.format(
        n=14, every="99.62")
    assert m.evidence[1].startswith("lowest later span (window #5, 1 window): median 60 tok/s")
    assert m.evidence[-2:] == ["window #1: 70 tok/s", "window #5: 60 tok/s"]


def test_the_span_with_the_lowest_lower_bound_is_the_one_shown():
    # Half-hour windows: hour 5 at 93 % over two windows, the last hour at 93.5 % over one.
    # The last one's interval is wider and reaches lower, though its median is higher.
    rate = [100 * v for v in WOBBLE for _ in (0, 1)][:27]
    rate[10] = rate[11] = 93.0
    rate[26] = 93.5
    m = throughput_floor(soak(27, throughput=rate, seconds=1800.0), LIMITS)
    assert m.outcome is Outcome.MARGINAL and m.value == 93.5
    assert m.evidence[1].startswith("lowest later span (window #26, 1 window)")


def test_a_span_exactly_at_the_floor_with_no_noise_passes():
    # A floor of 50 % and a span at exactly half the first, every other span alike: the
    # interval is the point 50, at the floor, and "at or above" passes it; no single window
    # lies below the floor either (50 tok/s is not under 50).
    rate = [100.0] * 14
    rate[1] = 50.0
    m = throughput_floor(hours(throughput=rate), G4Limits(throughput_floor=50.0))
    assert m.outcome is Outcome.PASS and m.interval == (50.0, 50.0)
    assert m.evidence[-1].endswith("; 0 single windows below the floor")


def test_single_windows_below_the_floor_are_counted_and_the_first_twenty_named():
    # Three hours of 5-minute windows; the later two at 80 %, and one window at 89.5 % in
    # the first (under 90 % of the first span's median, though not by much).
    rate = [100.0] * 12 + [80.0] * 24
    rate[3] = 89.5
    m = throughput_floor(soak(36, throughput=rate), LIMITS)
    assert m.outcome is Outcome.FAIL
    assert m.evidence[3].endswith("; 25 single windows below the floor")
    assert m.evidence[4:] == ["window #3: 89.5 tok/s"] + [
        f"window #{i}: 80 tok/s" for i in range(12, 31)]


def test_windows_without_output_fail_the_floor_and_the_first_twenty_are_named():
    rate = [100.0] * 3 + [0.0] * 21
    m = throughput_floor(soak(24, throughput=rate), LIMITS)
    assert m.outcome is Outcome.FAIL and m.value == 0.0
    assert m.note == "21 of 24 windows produced no output"
    assert m.evidence[1:] == [f"window #{i}: no output tokens in 300 s" for i in range(3, 23)]


def test_a_trickle_of_output_is_a_reading_not_an_idle_window():
    rate = [100 * v for v in WOBBLE]
    rate[1] = 0.5
    m = throughput_floor(hours(throughput=rate), LIMITS)
    assert m.outcome is Outcome.FAIL and m.value == 0.5
    assert m.note.startswith("1 of 13 later spans below the floor")


def test_g3s_figure_is_shown_whatever_its_size():
    m = throughput_floor(hours(throughput=[100.0, 99.0, 100.0]), LIMITS, g3_throughput=0.8)
    assert ("for the record, not judged: G3's candidate probe throughput at this concurrency "
            "was 0.8 tok/s, another load (a burst of probes on restored contexts); the first "
            "span ran at 1.25e+04 % of it") in m.evidence


def test_the_warm_up_note_follows_the_floors_rule():
    steady = hours(throughput=[100.0, 99.0, 100.0])
    m = throughput_floor(steady, LIMITS, warmup_note="window #0 left out as the warm-up")
    assert m.outcome is Outcome.PASS
    assert m.note == FLOOR_RULE.format(n=3, every="97.5") + "; window #0 left out as the warm-up"
    assert throughput_floor(steady, LIMITS).note == FLOOR_RULE.format(n=3, every="97.5")


def floor_limit(first):
    return Limit.at_least(90.0, "%", key="g4.throughput_floor",
                          relative_to=f"the soak's first span ({first})")


def test_two_spans_are_enough_for_a_floor():
    m = throughput_floor(hours(throughput=[100.0, 95.0]), LIMITS)
    assert m.outcome is Outcome.MARGINAL and m.value == 95.0  # t at one degree of freedom
    # A span not read leaves two read in full: still a comparison, capped by the coverage.
    gap = throughput_floor(unsent(hours(throughput=[100.0] * 3), 1), LIMITS)
    assert gap.outcome is Outcome.ERROR and gap.value == 100.0


@pytest.mark.parametrize(("windows", "note", "first"), [
    ([], "no committed window after the warm-up", None),
    (hours(throughput=[100.0]), "1 window after the warm-up make one span: the floor holds "
     "later spans against the first, so it needs two or more", "window #0"),
    (unsent(hours(throughput=[100.0] * 3), 0), "the first span (window #0) holds a window not "
     "read, the load generator sent no request in it: every later span is held against its "
     "median", "window #0"),
    (unsent(hours(throughput=[100.0] * 2), 1), "no later span was read in full", "window #0"),
])
def test_a_floor_with_nothing_to_compare_is_an_error_that_says_why(windows, note, first):
    m = throughput_floor(windows, LIMITS)
    assert (m.name, m.outcome, m.note) == ("Lowest span throughput", Outcome.ERROR, note)
    assert m.limit == (floor_limit(first) if first else None)


# ---- what the drift says -------------------------------------------------------------------

SHORT = "run shorter than 2 h: spans of 1/6 of the run ({0} s each), not hours"
WINDOW_NOISE = ("window-to-window noise of the TTFT p50: {0} % over {1} windows (too few spans to "
                "read a long-run noise robustly: this assumes independent windows)")


def six(seconds, last):
    """Six windows of a short run (each a span of its own), the last one's TTFT p50 given."""
    return soak(6, ttft=[0.1, 0.102, 0.099, 0.101, 0.098, last], seconds=seconds)


def test_a_drift_the_noise_cannot_decide_says_how_many_windows_would():
    # -5.6 % on 10-minute windows: 5.6 % from the -10 % limit's side, two windows a span
    # would decide it, and an hour holds six (2 x 6 spans x 10 min is two hours exactly).
    m = ttft_drift(six(600.0, 0.0944), LIMITS)
    assert m.outcome is Outcome.MARGINAL and m.unit == "%" and m.limit.unit == "%"
    assert m.note == (
        "the 1 and 1 windows of the spans cannot tell a drift of -5.6 % from the windows' own "
        "noise (2 % per window): its 95 % interval [-13.1, 2.5] % crosses ±10 %; about 2 "
        "windows per span would decide a drift this size at this noise (an hour holds 6 of "
        "these windows); " + SHORT.format(600))
    assert m.evidence == [
        "windows read 6 of 6",
        "median window TTFT p50: 100 ms (1 windows) -> 94.4 ms (1 windows)",
        WINDOW_NOISE.format(2, 6) + "; 95 % interval of the drift [-13.1, 2.5] %"]
    # The interval is symmetric about the drift on the log scale.
    lo, hi = m.interval
    assert (1 + lo / 100) * (1 + hi / 100) == pytest.approx(0.944 ** 2)


def test_a_soak_shorter_than_two_hours_is_named_as_such():
    # Nine-minute windows: two a span make a soak of 6 x 2 x 540 s = 1.8 h, under two hours.
    m = ttft_drift(six(540.0, 0.0944), LIMITS)
    assert ("about 2 windows per span would decide a drift this size at this noise (a soak "
            "of about 1.8 h (6,480 s) at these windows); ") in m.note


def test_a_drift_on_the_limit_is_not_decided_by_any_soak():
    m = ttft_drift(six(600.0, 0.11), LIMITS)
    assert m.outcome is Outcome.MARGINAL
    assert ("crosses ±10 %; no soak of practical length decides a drift this close to the "
            "limit; ") in m.note


def test_the_spans_noise_reads_the_drift_and_the_warm_up_note_follows():
    ttft = [0.1 * v for v in WOBBLE]
    ttft[-1] = 0.105
    m = ttft_drift(hours(ttft=ttft), LIMITS, warmup_note="window #0 left out as the warm-up")
    assert m.outcome is Outcome.PASS
    assert m.note == "first hour vs last hour; window #0 left out as the warm-up"
    assert m.evidence[2] == (LONG_RUN.format(what="TTFT p50", noise="0.959", spans=12, df="3.82")
                             + "; 95 % interval of the drift [1.05, 9.11] %")
    assert ttft_drift(hours(ttft=ttft), LIMITS).note == "first hour vs last hour"


def test_two_windows_are_enough_for_a_drift():
    m = ttft_drift(soak(2, ttft=[0.1, 0.105]), LIMITS)
    assert m.outcome is Outcome.MARGINAL and m.value == pytest.approx(5.0)
    assert "about 8 windows per span would decide" in m.note
    assert "(an hour holds 12 of these windows)" in m.note



def test_one_window_a_span_can_be_what_would_decide():
    # Two windows read a noise with one degree of freedom (t = 12.7); six of them, one a span,
    # would give t(3.6) = 2.9, enough for a drift of +2 % at this noise.
    m = ttft_drift(soak(2, ttft=[0.1, 0.102]), LIMITS)
    assert m.outcome is Outcome.MARGINAL
    assert ("about 1 window per span would decide a drift this size at this noise (a soak of "
            "about 30 min (1,800 s) at these windows); ") in m.note

DRIFT = Limit(lo=-10.0, hi=10.0, unit="%", key="g4.ttft_drift_max")


@pytest.mark.parametrize(("windows", "note", "unread"), [
    ([], "no TTFT in the first span (" + SHORT.format(0) + ")", None),
    (unsent(hours(ttft=[0.1] * 14), 0), "no TTFT in the first span (first hour vs last hour)", 0),
    (unsent(hours(ttft=[0.1] * 14), 13), "no TTFT in the last span (first hour vs last hour)",
     13),
    (hours(ttft=[0.1]), "1 window with a TTFT after the warm-up: a drift needs two or more",
     None),
])
def test_a_drift_with_nothing_to_compare_is_an_error_that_says_why(windows, note, unread):
    m = ttft_drift(windows, LIMITS)
    assert (m.name, m.outcome, m.note, m.limit) == ("TTFT p50 drift", Outcome.ERROR, note, DRIFT)
    # A window expected and not read counts in the coverage; with none expected there is none.
    if unread is None:
        assert m.coverage is None and m.evidence == []
    else:
        assert m.evidence == [f"windows read 13 of 14 (93%); not read: #{unread} the load "
                              "generator sent no request in it"]
