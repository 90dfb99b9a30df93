"""G4 soak rules over windows: each rule tripped and not tripped. Pure: no I/O."""

import math
import random

import pytest

from gates.core.configuration import G4Limits
from gates.core.verdicts import SHORTENED, Cause, Outcome
from gates.soak import SoakPlan
from gates.soak.health_rules import kernel_errors, media_errors, paths_live, verify_errors
from gates.soak.load_rules import (
    REHEARSED,
    TREND_RULES,
    duration,
    request_errors,
    soak_measurements,
    total_gap,
)
from gates.soak.readings import span_coverage
from gates.soak.rules import (
    KERNEL,
    PATHS,
    SMART,
    VERIFY,
    HealthReading,
    WindowRecord,
    effective_seconds,
    gap,
    span,
)
from gates.soak.stability import stability
from gates.soak.trends import drift_spans, throughput_floor, ttft_drift

LIMITS = G4Limits()
T0 = 1_800_000_000.0


def windows(n=864, seconds=300.0, throughput=100.0, ttft=0.1, health=None):
    """n back-to-back windows; throughput/ttft may be callables of the index."""
    def at(x, i):
        return x(i) if callable(x) else x
    return [WindowRecord(index=i, start=T0 + i * seconds, end=T0 + (i + 1) * seconds,
                         requests=10, output_tokens=int(at(throughput, i) * seconds),
                         throughput=at(throughput, i), ttft_p50=at(ttft, i),
                         ttft_p99=at(ttft, i) * 2, health=dict(health(i) if health else {}))
            for i in range(n)]


def ok(**values):
    return HealthReading(values={k: float(v) for k, v in values.items()})


# ---- the plan -----------------------------------------------------------------------------

def test_plan_counts_windows_and_flags_a_shortened_run():
    full = SoakPlan(run_id="r", duration=72 * 3600, window=300)
    assert full.windows == 864 and not full.shortened and full.deviations() == []
    short = SoakPlan(run_id="r", duration=20, window=3)
    assert short.windows == 7 and short.shortened  # 6 whole windows and a 2 s one
    texts = [d.text for d in short.deviations()]
    assert texts[0].startswith(SHORTENED) and "window 3 s instead of" in texts[1]
    # The gate record gets them typed: the cause by the kind, never by the words (#43).
    assert [d.typed.cause for d in short.deviations()] == [Cause.SHORTENED, Cause.SOAK_WINDOW]
    assert short.deviations()[1].typed.text == texts[1]


def test_the_headline_says_the_length_against_the_sign_off_and_what_set_it():
    full = SoakPlan(run_id="r", duration=72 * 3600, window=300)
    assert full.headline() == ("Soak of 72 h (259,200 s) against the 72 h sign-off duration: "
                               "full length")
    short = SoakPlan(run_id="r", duration=120, window=20, duration_source="--duration")
    assert short.headline() == ("Soak of 2 min (120 s) of the 72 h sign-off duration: "
                                "shortened, set by --duration")


def test_a_span_is_in_the_largest_unit_it_reaches():
    assert [span(s) for s in (3600, 3599, 60, 59.5)] == [
        "1 h (3,600 s)", "59.98 min (3,599 s)", "1 min (60 s)", "59.5 s"]


def test_effective_seconds_add_the_windows_and_leave_a_gap_out():
    runs = windows(3)
    runs[2] = runs[2].model_copy(update={"start": T0 + 1200, "end": T0 + 1500})  # 600 s gap
    assert effective_seconds(runs) == 900.0


def test_a_windows_value_is_none_where_the_collector_gave_none():
    w = windows(1, health=lambda i: {SMART: ok(media_errors=7)})[0]
    assert w.value(SMART, "media_errors") == 7.0
    assert w.value(SMART, "critical_warning") is None and w.value(KERNEL, "hits") is None


def test_gap_is_the_time_since_the_last_committed_window():
    d = gap(T0, T0 + 600)
    assert d.kind == "gap" and d.seconds == 600 and "600 s" in d.text
    assert (d.start, d.end) == (T0, T0 + 600)  # the store keeps when it was not running
    assert d.typed.cause is Cause.SOAK_GAP and d.typed.blocks


# ---- each rule ----------------------------------------------------------------------------

def test_request_errors_pass_at_zero_and_fail_above_the_ceiling():
    clean = windows(12)
    assert request_errors(clean, LIMITS).outcome is Outcome.PASS
    bad = windows(12)
    bad[5] = bad[5].model_copy(update={"errors": 2, "timeouts": 1})
    m = request_errors(bad, LIMITS)
    assert m.outcome is Outcome.FAIL and m.value == 2 and "window #5" in m.evidence[1]
    assert m.evidence[0] == "windows read 12 of 12"
    assert m.limit.key == "g4.request_errors_max"
    assert request_errors(bad, G4Limits(request_errors_max=2)).outcome is Outcome.PASS


def test_verify_errors_fail_with_the_offset_and_not_applicable_says_why():
    clean = windows(6, health=lambda i: {VERIFY: ok(verify_errors=0)})
    assert verify_errors(clean, LIMITS).outcome is Outcome.PASS

    def one_bad(i):
        if i == 3:
            return {VERIFY: HealthReading(status="alert", values={"verify_errors": 1.0},
                                          details=["crc32c: verify failed at f offset 4096"])}
        return {VERIFY: ok(verify_errors=0)}
    m = verify_errors(windows(6, health=one_bad), LIMITS)
    assert m.outcome is Outcome.FAIL and m.evidence[0] == "windows read 6 of 6"
    assert "window #3" in m.evidence[1]  # the coverage line leads the evidence (#43)
    assert "offset 4096" in m.evidence[1] and m.limit.key == "g4.verify_errors_max"
    na = windows(6, health=lambda i: {VERIFY: HealthReading.not_applicable("no scratch area")})
    m = verify_errors(na, LIMITS)
    assert m.outcome is Outcome.NOT_APPLICABLE and m.note == "no scratch area"
    broken = windows(6, health=lambda i: {VERIFY: HealthReading.failed("fio crashed")})
    assert verify_errors(broken, LIMITS).outcome is Outcome.ERROR


def test_new_media_errors_count_from_the_baseline_before_the_first_window():
    def smart(media, delta, warning=0):
        return {SMART: ok(media_errors=media, media_errors_delta=delta,
                          critical_warning=warning, error_log_entries=0,
                          error_log_entries_delta=0, temperature_max_c=40)}
    old = windows(6, health=lambda i: smart(7, 0))  # 7 old errors: not new, not judged
    assert [m.outcome for m in media_errors(old)] == [Outcome.PASS, Outcome.PASS]
    first = windows(6, health=lambda i: smart(8, 1 if i == 0 else 0))
    assert media_errors(first)[0].outcome is Outcome.FAIL and media_errors(first)[0].value == 1
    warned = windows(6, health=lambda i: smart(7, 0, warning=4 if i == 5 else 0))
    assert [m.outcome for m in media_errors(warned)] == [Outcome.PASS, Outcome.FAIL]


def test_kernel_errors_and_down_paths_fail_and_are_not_applicable_without_a_source():
    quiet = windows(6, health=lambda i: {KERNEL: ok(hits=0)})
    assert kernel_errors(quiet).outcome is Outcome.PASS
    noisy = windows(6, health=lambda i: {KERNEL: HealthReading(
        status="alert", values={"hits": 1.0}, details=["nvme nvme0: resetting controller"])}
        if i == 2 else {KERNEL: ok(hits=0)})
    m = kernel_errors(noisy)
    assert m.outcome is Outcome.FAIL and "resetting controller" in m.evidence[1]
    assert kernel_errors(windows(6)).outcome is Outcome.ERROR  # no reading at all
    live = windows(6, health=lambda i: {PATHS: ok(live=2, total=2 - (i == 4))})
    assert paths_live(live).outcome is Outcome.PASS
    down = windows(6, health=lambda i: {PATHS: ok(live=1 + (i != 4), total=2)})
    assert paths_live(down).outcome is Outcome.FAIL
    local = windows(6, health=lambda i: {PATHS: HealthReading.not_applicable("local PCIe")})
    assert paths_live(local).outcome is Outcome.NOT_APPLICABLE


def test_a_fabric_with_no_path_fails_and_a_collector_that_could_not_read_is_an_error():
    """#25 item 13: no path on a fabric site is every path down; "could not read" in every
    window (nvme-cli missing, dmesg refused) is an ERROR, never NOT APPLICABLE."""
    none = windows(6, health=lambda i: {PATHS: HealthReading(
        status="alert", values={"live": 0.0, "total": 0.0},
        details=["no NVMe-oF path is connected, though [topology] transport = 'rdma'"])})
    assert paths_live(none).outcome is Outcome.FAIL and paths_live(none).value == 6
    refused = windows(6, health=lambda i: {KERNEL: HealthReading.failed("dmesg refused")})
    m = kernel_errors(refused)
    assert m.outcome is Outcome.ERROR and "dmesg refused" in m.note


def noisy(i):
    """+-6 % from one window to the next, as the 2-core VM's windows moved (2026-12-02)."""
    return 1.06 if i % 3 == 0 else 0.97


def test_the_throughput_floor_holds_spans_not_single_windows():
    # One slow window in a steady 72-hour soak: its hour's median stays at the operating point.
    dip = windows(864, throughput=lambda i: 80.0 if i == 500 else 100.0 * noisy(i))
    m = throughput_floor(dip, LIMITS)
    assert m.outcome is Outcome.PASS, m
    assert "window #500: 80 tok/s" in m.evidence and "72 spans" in m.note
    assert m.limit.key == "g4.throughput_floor" and m.limit.unit == "%"
    assert m.limit.relative_to == "the soak's first span (windows #0-#11)"
    # A steady array on a noisy machine (4 % per window, seeded): the lowest of 864 windows
    # falls under 90 %, which the old every-window rule failed; every hour clears it.
    rng = random.Random(7)
    steady = [100.0 * rng.gauss(1.0, 0.04) for _ in range(864)]
    assert min(steady) < 90.0
    assert throughput_floor(windows(864, throughput=lambda i: steady[i]),
                            LIMITS).outcome is Outcome.PASS
    # One span has nothing to hold against the first: an ERROR that says so, never a PASS.
    one = throughput_floor(windows(1), LIMITS)
    assert one.outcome is Outcome.ERROR and "one span" in one.note


def test_the_floor_is_the_soaks_own_first_span_and_g3s_figure_is_only_shown():
    """G3's throughput is another load (probes on restored contexts): whatever it was, the
    same windows get the same verdict, and the figure is shown for the record."""
    steady = windows(864, throughput=lambda i: 100.0 * noisy(i))
    alone = throughput_floor(steady, LIMITS)
    for g3 in (50.0, 100.0, 200.0, 400.0):  # the soak steady at half of G3's figure too
        m = throughput_floor(steady, LIMITS, g3_throughput=g3)
        assert (m.outcome, m.value, m.interval) == (alone.outcome, alone.value, alone.interval)
        said = [e for e in m.evidence if e.startswith("for the record, not judged")]
        assert said and f"{g3:.4g} tok/s" in said[0], m.evidence
    assert alone.outcome is Outcome.PASS
    assert not any("for the record" in e for e in alone.evidence)


def test_a_sustained_drop_fails_and_one_near_the_floor_is_marginal():
    hour = range(600, 612)  # the windows of one hour
    lost = windows(864, throughput=lambda i: (80.0 if i in hour else 100.0) * noisy(i))
    m = throughput_floor(lost, LIMITS)
    assert m.outcome is Outcome.FAIL and m.interval[1] < 90.0 and m.value == pytest.approx(80.0)
    assert m.evidence[0] == "spans read 72 of 72"
    assert "windows #600-#611, 12 windows" in m.evidence[1] and "1 of 71 later spans" in m.note
    # noisy() repeats every 3 windows, so every hour's median is the same: the spans show no
    # noise to doubt a 91 % hour with (PASS). Seeded 3 % per window, they do.
    rng = random.Random(5)
    jitter = [math.exp(rng.gauss(0, 0.03)) for _ in range(864)]
    near = windows(864, throughput=lambda i: (91.0 if i in hour else 100.0) * jitter[i])
    m = throughput_floor(near, LIMITS)
    assert m.outcome is Outcome.MARGINAL and m.interval[0] < 90.0 < m.interval[1], m
    assert "crosses the floor" in m.note
    # No noise but the one step after the first hour: a point either side of the floor.
    over = windows(864, throughput=lambda i: 100.0 if i < 12 else 91.0)
    assert throughput_floor(over, LIMITS).outcome is Outcome.PASS
    under = windows(864, throughput=lambda i: 100.0 if i < 12 else 89.0)
    assert throughput_floor(under, LIMITS).outcome is Outcome.FAIL


def test_a_window_without_output_fails_the_floor():
    idle = windows(864, throughput=lambda i: 0.0 if i == 300 else 100.0)
    m = throughput_floor(idle, LIMITS)
    assert m.outcome is Outcome.FAIL and m.value == 0.0
    assert m.evidence == ["spans read 72 of 72", "window #300: no output tokens in 300 s"]


# The demo's G4 rehearsals measured 2026-12-02 on the 2-core VM (fresh clones, simulator
# arms, 20 s windows): demo 9 and demo 10, G3 throughput 512.5 and 519.6 tok/s. Their first
# window is the cold start (all sessions' first turns at once); the old rules FAILed both on
# it (459 < 461 and 441 < 468 tok/s) and read it as a TTFT drift of -16 % and -21 %.
DEMOS = {9: (512.5, [459.2, 506.2, 529.8, 524.7, 524.3, 560.4],
             [0.9786, 0.8687, 0.8825, 0.8841, 0.8604, 0.7878]),
         10: (519.6, [440.9, 529.4, 560.8, 547.1, 547.5, 550.3],
              [1.0592, 0.8730, 0.8261, 0.8393, 0.8253, 0.8476]),
         # demo 12, a slow minute of the VM in windows 1-2: the SNIA spread's point is 29 %
         12: (423.6, [416.4, 452.6, 390.7, 530.1, 510.8, 517.6],
              [1.122, 0.954, 1.349, 0.847, 0.867, 0.901])}


@pytest.mark.parametrize("demo", sorted(DEMOS))
def test_the_demo_rehearsal_leaves_its_cold_first_window_out(demo):
    g3, tputs, ttfts = DEMOS[demo]
    plan = SoakPlan(run_id="r", duration=120, window=20, g3_throughput=g3, warmup_windows=1)
    runs = windows(6, seconds=20.0, throughput=lambda i: tputs[i], ttft=lambda i: ttfts[i])
    got = {m.id: m for m in soak_measurements(runs, [], plan, LIMITS)}
    floor, drift = got["g4.throughput_floor"], got["g4.ttft_drift"]
    assert floor.outcome is not Outcome.FAIL and "window #0 left out as the warm-up" in floor.note
    # 1 window per span: undecidable, and in a rehearsal said so (REPORTED), never judged.
    assert drift.outcome is Outcome.REPORTED and "warm-up" in drift.note
    assert drift.note.startswith(REHEARSED) and drift.interval and drift.limit
    # Five rounds of one window each: what 4-20 % window noise can explain is never a FAIL.
    for id in ("g4.window_spread", "g4.window_slope"):
        assert got[id].outcome in (Outcome.PASS, Outcome.REPORTED), got[id]
    cold = plan.model_copy(update={"warmup_windows": 0})
    assert {m.id: m for m in soak_measurements(runs, [], cold, LIMITS)}[
        "g4.ttft_drift"].value < -15  # the cold window read as an improvement


def test_a_demo_whose_soak_ran_below_g3s_probe_figure_is_not_failed_for_it():
    """A fresh-clone demo of 2026-12-05 (simulator arms, 20 s windows) whose G4 FAILED the old
    floor, 90 % of G3's 1,108 tok/s: every window ran at 72-79 % of it, steadily. G3's figure is
    a burst of probes on restored contexts, not the soak's multi-turn load; held against its
    own first span the soak kept its operating point."""
    g3, tputs = 1108.4, [833.6, 845.6, 871.7, 843.1, 799.6, 846.2]
    plan = SoakPlan(run_id="r", duration=120, window=20, g3_throughput=g3, warmup_windows=1)
    runs = windows(6, seconds=20.0, throughput=lambda i: tputs[i], ttft=0.5)
    floor = {m.id: m for m in soak_measurements(runs, [], plan, LIMITS)}["g4.throughput_floor"]
    assert floor.outcome in (Outcome.PASS, Outcome.REPORTED), floor
    assert floor.limit.relative_to == "the soak's first span (window #1)"
    assert floor.evidence[2].startswith("first span (window #1, 1 window): median 845.6 tok/s")
    assert "G3's candidate probe throughput at this concurrency was 1108 tok/s" in \
        "".join(floor.evidence) and "the first span ran at 76.3 % of it" in "".join(
        floor.evidence)


def test_only_a_rehearsals_undecided_trend_rules_are_reported_not_judged():
    """The same six windows: a rehearsal reports what it cannot decide; a full soak's
    MARGINAL stays MARGINAL; a decided FAIL stays FAIL in a rehearsal too."""
    g3, tputs, ttfts = DEMOS[12]
    runs = windows(6, seconds=20.0, throughput=lambda i: tputs[i], ttft=lambda i: ttfts[i])
    rehearsal = SoakPlan(run_id="r", duration=120, window=20, g3_throughput=g3)
    # Six windows planned either way: a 72 h plan of 20 s windows would expect 12,960, and the
    # 12,954 never committed would make every rule an ERROR (#43), not the MARGINAL asked here.
    full = SoakPlan(run_id="r", duration=72 * 3600, window=12 * 3600, g3_throughput=g3)
    assert rehearsal.shortened and not full.shortened
    short = {m.id: m for m in soak_measurements(runs, [], rehearsal, LIMITS)}
    long = {m.id: m for m in soak_measurements(runs, [], full, LIMITS)}
    undecided = [id for id in TREND_RULES if long[id].outcome is Outcome.MARGINAL]
    assert undecided, long
    for id in TREND_RULES:
        if id in undecided:
            assert short[id].outcome is Outcome.REPORTED
            assert short[id].note == f"{REHEARSED}; {long[id].note}"
            assert (short[id].value, short[id].interval) == (long[id].value, long[id].interval)
        else:
            assert short[id] == long[id]
    others = set(short) - set(TREND_RULES) - {"g4.effective_duration"}  # that one is the plan's
    assert {id: short[id] for id in others} == {id: long[id] for id in others}
    # A rehearsal whose windows decide: throughput halved after its first span, quietly, is a
    # FAIL there too (12 windows of 10 s: spans of two).
    slow = windows(12, seconds=10.0, throughput=lambda i: (g3 if i < 2 else g3 / 2) * (
        1 + 0.01 * (i % 2)))
    floor = {m.id: m for m in soak_measurements(slow, [], rehearsal, LIMITS)}[
        "g4.throughput_floor"]
    assert floor.outcome is Outcome.FAIL, floor


def test_the_warm_up_still_counts_its_errors():
    plan = SoakPlan(run_id="r", duration=72 * 3600, window=300, g3_throughput=100.0,
                    warmup_windows=1)
    runs = windows(864)
    runs[0] = runs[0].model_copy(update={"errors": 3, "throughput": 10.0, "ttft_p50": 5.0})
    got = {m.id: m for m in soak_measurements(runs, [], plan, LIMITS)}
    assert got["g4.request_errors"].outcome is Outcome.FAIL
    assert got["g4.throughput_floor"].outcome is Outcome.PASS
    assert got["g4.ttft_drift"].outcome is Outcome.PASS
    assert "window #0 left out" in got["g4.window_spread"].note


def test_ttft_drift_compares_the_first_and_last_hour_in_both_directions():
    first, last, note = drift_spans(windows(864))
    assert len(first) == 12 and len(last) == 12 and last[0].index == 852
    assert note == "first hour vs last hour"

    def ramp(factor):
        return windows(864, ttft=lambda i: 0.1 * (factor if i >= 852 else 1.0))
    assert ttft_drift(ramp(1.05), LIMITS).outcome is Outcome.PASS
    slower = ttft_drift(ramp(1.15), LIMITS)
    assert slower.outcome is Outcome.FAIL and slower.value == pytest.approx(15.0)
    assert ttft_drift(ramp(0.85), LIMITS).outcome is Outcome.FAIL
    assert slower.limit.key == "g4.ttft_drift_max"


def test_short_runs_use_the_first_and_last_sixth_and_say_so():
    short = windows(12, seconds=2.0, ttft=lambda i: 0.2 if i >= 10 else 0.1)
    first, last, note = drift_spans(short)
    assert [w.index for w in first] == [0, 1] and [w.index for w in last] == [10, 11]
    m = ttft_drift(short, LIMITS)
    assert m.outcome is Outcome.FAIL and "1/6" in m.note and "shorter than 2 h" in m.note


def test_a_drift_the_windows_noise_cannot_separate_is_marginal_never_fail_or_pass():
    # The demo's shape (6 windows of 20 s, measured 2026-12-02 on a 2-core VM): window p50s that
    # sit at ~0.88 s or ~0.98 s as the machine goes; first and last windows 14 % apart.
    seen = [0.861, 0.886, 0.892, 0.876, 0.988, 0.983]
    m = ttft_drift(windows(6, seconds=20.0, ttft=lambda i: seen[i]), LIMITS)
    assert m.value == pytest.approx(14.2, abs=0.1)
    assert m.outcome is Outcome.MARGINAL, m
    assert m.interval[0] < 10 < m.interval[1]
    assert "cannot tell a drift of +14.2 %" in m.note
    # On the log scale: room ln(1.1417) - ln(1.10) = 0.0373, noise 0.0396; with n windows per
    # span (6n in the soak, t at 2 (6n - 1)^2 / (18n - 4) degrees of freedom: 2.00 at n = 15)
    # pi * (2.00 * 0.0396 / 0.0373)^2 = 14.2 -> 15 windows per span, x 6 spans x 20 s = 30 min
    assert "about 15 windows per span would decide" in m.note, m.note
    assert "(a soak of about 30 min (1,800 s) at these windows)" in m.note
    steady_but_noisy = [0.870, 0.906, 0.900, 0.887, 0.985, 0.870]
    assert ttft_drift(windows(6, seconds=20.0, ttft=lambda i: steady_but_noisy[i]),
                      LIMITS).outcome is Outcome.MARGINAL


def test_a_long_noisy_soak_decides_both_ways():
    def ttft(i):
        return 0.1 * noisy(i)
    assert ttft_drift(windows(864, ttft=ttft), LIMITS).outcome is Outcome.PASS
    drifted = ttft_drift(windows(864, ttft=lambda i: ttft(i) * (1.25 if i >= 432 else 1.0)),
                         LIMITS)
    assert drifted.outcome is Outcome.FAIL and drifted.interval[0] > 10
    # [decision] confidence sets the interval: wider at 99.9 % than at 95 %, the same figure.
    # (Seeded 3 % noise: noisy() repeats every 3 windows, so its hours' medians never move.)
    rng = random.Random(3)
    jitter = [math.exp(rng.gauss(0, 0.03)) for _ in range(864)]
    near = windows(864, ttft=lambda i: 0.1 * jitter[i] * (1.11 if i >= 432 else 1.0))
    at95, at999 = ttft_drift(near, LIMITS), ttft_drift(near, LIMITS, confidence=0.999)
    assert at95.value == at999.value
    assert at999.interval[0] < at95.interval[0] < at95.interval[1] < at999.interval[1]


def test_snia_stability_over_window_throughput():
    flat = stability(windows(864, throughput=lambda i: 100.0 + (i % 3)))
    assert [m.outcome for m in flat] == [Outcome.PASS, Outcome.PASS]
    decay = stability(windows(864, throughput=lambda i: 100.0 - 30.0 * i / 863))
    assert [m.outcome for m in decay] == [Outcome.FAIL, Outcome.FAIL]
    one_round = stability(windows(864, throughput=lambda i: 70.0 if 344 <= i < 516 else 100.0))
    assert [m.outcome for m in one_round] == [Outcome.FAIL, Outcome.PASS]  # spread, not slope
    # A spread the windows' noise could make is MARGINAL: five windows, one round each.
    noisy = stability(windows(5, seconds=20.0, throughput=lambda i: [452.6, 390.7, 530.1,
                                                                      510.8, 517.6][i]))
    assert noisy[0].value == pytest.approx(29.0, abs=0.1) and noisy[0].outcome is Outcome.MARGINAL
    assert noisy[0].interval[0] < 20.0 < noisy[0].interval[1]
    too_few = stability(windows(4))
    assert {m.outcome for m in too_few} == {Outcome.ERROR} and "5 rounds" in too_few[0].note


def test_total_gap_time_against_gap_max():
    plan = SoakPlan(run_id="r", duration=6 * 300, window=300, started=T0)
    runs = windows(6)
    m = total_gap([gap(T0, T0 + 600), gap(T0, T0 + 600)], LIMITS, runs, plan)
    assert m.outcome is Outcome.PASS and m.coverage.read == 6
    m = total_gap([gap(T0, T0 + 1200), gap(T0, T0 + 1200)], LIMITS, runs, plan)
    assert m.outcome is Outcome.FAIL and m.value == 2400 and m.limit.key == "g4.gap_max"
    # A soak that stopped after 4 windows: how long it was not running after them is unknown.
    m = total_gap([], LIMITS, runs[:4], plan)
    assert m.outcome is Outcome.ERROR and m.coverage.missing == [
        "#4 not committed (the soak stopped before it)",
        "#5 not committed (the soak stopped before it)"]


def test_effective_duration_excludes_gaps_and_a_shortened_run_says_so():
    plan = SoakPlan(run_id="r", duration=72 * 3600, window=300)
    assert duration(windows(864), plan).outcome is Outcome.PASS
    assert duration(windows(800), plan).outcome is Outcome.FAIL
    short = SoakPlan(run_id="r", duration=24, window=2)
    m = duration(windows(12, seconds=2.0), short)
    assert m.outcome is Outcome.PASS and SHORTENED in m.note


def test_a_clean_72_hour_run_passes_every_applicable_rule():
    plan = SoakPlan(run_id="r", duration=72 * 3600, window=300, g3_throughput=100.0)

    def health(i):
        return {VERIFY: ok(verify_errors=0), KERNEL: ok(hits=0),
                SMART: ok(media_errors=0, media_errors_delta=0, critical_warning=0),
                PATHS: HealthReading.not_applicable("local PCIe")}
    out = soak_measurements(windows(864, health=health), [gap(T0, T0 + 60)], plan, LIMITS)
    assert len(out) == 12
    assert {m.outcome for m in out} == {Outcome.PASS, Outcome.NOT_APPLICABLE}


def _rates(make, sims=300, seed=24):
    rng = random.Random(seed)
    got = [make(rng).outcome for _ in range(sims)]
    return {o: got.count(o) / sims for o in (Outcome.PASS, Outcome.MARGINAL, Outcome.FAIL)}


def test_the_trend_rules_risks_on_seeded_noise_are_within_the_stated_risk():
    # 36 windows (12 min of 20 s windows) with 5 % log-normal noise per window, seeded: the
    # rules' one-sided risk at confidence 0.95 is 2.5 %; 300 soaks, so allow Monte Carlo error.
    def soak(rng, drift=0.0, tput=lambda i: 1.0, noise=0.05):
        return windows(36, seconds=20.0,
                       throughput=lambda i: 100.0 * tput(i) * math.exp(rng.gauss(0, noise)),
                       ttft=lambda i: 0.1 * math.exp(rng.gauss(0, 0.05)) * (
                           1 + drift if i >= 18 else 1.0))
    steady = _rates(lambda rng: ttft_drift(soak(rng), LIMITS))
    at_limit = _rates(lambda rng: ttft_drift(soak(rng, drift=0.10), LIMITS))
    far = _rates(lambda rng: ttft_drift(soak(rng, drift=0.30), LIMITS))
    assert steady[Outcome.FAIL] <= 0.05 and at_limit[Outcome.PASS] <= 0.05, (steady, at_limit)
    assert steady[Outcome.PASS] >= 0.5 and far[Outcome.FAIL] >= 0.9, (steady, far)
    span_at_floor = _rates(lambda rng: throughput_floor(
        soak(rng, tput=lambda i: 0.9 if 12 <= i < 18 else 1.0), LIMITS))
    level = _rates(lambda rng: throughput_floor(soak(rng), LIMITS))
    lost = _rates(lambda rng: throughput_floor(
        soak(rng, tput=lambda i: 0.7 if 12 <= i < 18 else 1.0), LIMITS))
    assert span_at_floor[Outcome.PASS] <= 0.05 and level[Outcome.FAIL] <= 0.05
    assert lost[Outcome.FAIL] >= 0.9, lost
    # The floor's reference is the soak's own first span, so its noise is in every comparison,
    # as the drift rule's first span is: at 5 % per window a steady 12-minute soak PASSes about
    # half the time (57 % in 300 seeded soaks; never FAILed), at 3 % all but never MARGINAL.
    # (Held against G3's figure as if it were exact, the old rule PASSed 90 %: it ignored that
    # figure's own noise, and that G3's figure is another load.)
    quiet = _rates(lambda rng: throughput_floor(soak(rng, noise=0.03), LIMITS))
    assert level[Outcome.PASS] >= 0.4 and quiet[Outcome.PASS] >= 0.95, (level, quiet)


# ---- the health rules: what each one reads, and what it says (#43, mutants) -----------------

HEALTH_RULES = {  # rule: (collector, the signal named in its messages, a function of windows)
    "fio verify errors": (VERIFY, "fio verify", lambda ws, absent=None: [
        verify_errors(ws, LIMITS, absent)]),
    "New NVMe media errors": (SMART, "SMART", media_errors),
    "Kernel storage errors": (KERNEL, "kernel log", lambda ws, absent=None: [
        kernel_errors(ws, absent)]),
    "NVMe-oF paths live": (PATHS, "NVMe-oF path", lambda ws, absent=None: [
        paths_live(ws, absent)]),
}
# media_errors judges two figures from the same SMART readings.
NAMES = {"New NVMe media errors": ["New NVMe media errors", "NVMe critical warnings raised"]}
STOPPED = {3: "not committed (the soak stopped before it)"}


@pytest.mark.parametrize("rule", sorted(HEALTH_RULES))
def test_a_health_signal_with_no_reading_at_all_is_an_error_naming_it(rule):
    _, what, judge = HEALTH_RULES[rule]
    got = judge(windows(3))
    assert [m.name for m in got] == NAMES.get(rule, [rule])
    assert {(m.outcome, m.note) for m in got} == {
        (Outcome.ERROR, f"no window has a {what} reading")}


@pytest.mark.parametrize("rule", sorted(HEALTH_RULES))
def test_a_signal_no_window_could_read_names_the_first_reason_and_every_window(rule):
    """Every window's reading failed and one window was never committed: the note gives the
    first window's reason, the evidence every window with its own, the uncommitted one too."""
    collector, what, judge = HEALTH_RULES[rule]
    broken = windows(3, health=lambda i: {collector: HealthReading.failed(f"refused #{i}")})
    got = judge(broken, STOPPED)
    assert [m.name for m in got] == NAMES.get(rule, [rule])
    for m in got:
        assert m.outcome is Outcome.ERROR
        assert m.note == f"{what} could not be read in any window: refused #0"
        assert m.evidence == ["windows read 0 of 4 (0%); not read: #0 refused #0; "
                              "#1 refused #1; #2 refused #2; #3 " + STOPPED[3]]


@pytest.mark.parametrize("rule", sorted(HEALTH_RULES))
def test_a_signal_the_site_lacks_is_not_applicable_for_the_first_windows_reason(rule):
    collector, _, judge = HEALTH_RULES[rule]
    lacking = windows(3, health=lambda i: {collector: HealthReading.not_applicable(
        "no scratch area" if i == 0 else f"still none in window #{i}")})
    got = judge(lacking)
    assert [m.name for m in got] == NAMES.get(rule, [rule])
    assert {(m.outcome, m.note) for m in got} == {(Outcome.NOT_APPLICABLE, "no scratch area")}


def test_a_window_not_read_counts_against_the_rule_with_why():
    """A window with no reading, one whose reading failed without a reason, and one where the
    signal was N/A though other windows had it: each is named, the windows after them read."""
    def kernel(i):
        return {1: {}, 3: {KERNEL: HealthReading.failed("")},
                4: {KERNEL: HealthReading.not_applicable("dmesg cleared")}}.get(
            i, {KERNEL: ok(hits=0)})
    m = kernel_errors(windows(6, health=kernel))
    said = ("windows read 3 of 6 (50%); not read: #1 no reading; #3 could not be read; "
            "#4 not applicable in this window alone: dmesg cleared")
    assert m.outcome is Outcome.ERROR and m.evidence == [said]
    assert m.note == (f"{said}: a verdict needs 100% of windows read; NVMe timeouts/resets/"
                      "reconnects, I/O errors, XFS errors; DESIGN §6: none allowed")


def test_kernel_errors_count_lines_and_say_what_they_look_for():
    m = kernel_errors(windows(6, health=lambda i: {KERNEL: ok(hits=3 if i == 2 else 0)}))
    assert (m.outcome, m.value, m.unit) == (Outcome.FAIL, 3, "lines")
    assert m.note == ("NVMe timeouts/resets/reconnects, I/O errors, XFS errors; "
                      "DESIGN §6: none allowed")


def test_verify_errors_say_how_many_passes_and_count_errors():
    m = verify_errors(windows(6, health=lambda i: {VERIFY: ok(verify_errors=i % 2)}),
                      G4Limits(verify_errors_max=3))
    assert (m.outcome, m.value, m.unit) == (Outcome.PASS, 3, "errors")
    assert m.note == "6 write-then-verify passes"


def test_a_pass_the_storage_refused_fails_whatever_the_max_and_counts_as_an_error():
    def fio(i):
        if i in (1, 2):  # ENOSPC then EIO: each pass refused, the second with 2 mismatches
            return {VERIFY: HealthReading(status="alert", reason=("ENOSPC", "EIO")[i - 1],
                                          values={"verify_errors": 2.0 * (i - 1),
                                                  "job_errors": 1.0})}
        return {VERIFY: ok(verify_errors=0)}
    m = verify_errors(windows(4, health=fio), G4Limits(verify_errors_max=100))
    assert (m.outcome, m.value, m.unit) == (Outcome.FAIL, 4, "errors")  # 2 + 2 refused passes
    assert m.note == ("window #1: ENOSPC; the storage refused 2 of 4 write-then-verify passes "
                      "(windows [1, 2]): each counts as an error, and a job error fails the "
                      "rule whatever g4.verify_errors_max allows")


def smart_at(i, last=5):
    """Readings of a drive with 7 old media errors, 2 new in the last window, an error log
    growing by one entry a window (2 before the soak), warming from 38 to 45 °C."""
    return {SMART: ok(media_errors=7 + 2 * (i == last), media_errors_delta=2 * (i == last),
                      error_log_entries=10 + i, error_log_entries_delta=2 if i == 0 else 1,
                      critical_warning=4 if i in (2, 4) else 0,
                      temperature_max_c=(40, 38, 45, 41, 39, 40)[i])}


def test_media_errors_count_to_the_last_reading_and_show_the_error_log_and_temperature():
    media, warned = media_errors(windows(6, health=smart_at))
    assert (media.name, media.outcome, media.value, media.unit) == (
        "New NVMe media errors", Outcome.FAIL, 2, "errors")
    assert media.evidence == [
        "windows read 6 of 6",
        "error-log entries +7 (not judged: nvme-cli's own queries add some)",  # 15 - (10 - 2)
        "temperature 38-45 °C"]
    assert (warned.name, warned.outcome, warned.value, warned.unit) == (
        "NVMe critical warnings raised", Outcome.FAIL, 2, "windows")
    assert warned.evidence == ["windows read 6 of 6", "critical warning in windows [2, 4]"]
    assert media.note == warned.note == "DESIGN §6: none allowed, not configurable"


def test_a_clean_drive_passes_both_smart_rules_with_no_warning_named():
    media, warned = media_errors(windows(6, health=lambda i: {SMART: ok(
        media_errors=7, media_errors_delta=0, critical_warning=0, error_log_entries=3,
        error_log_entries_delta=0)}))
    assert (media.outcome, media.value, warned.outcome, warned.value) == (
        Outcome.PASS, 0, Outcome.PASS, 0)
    assert media.evidence == ["windows read 6 of 6",
                              "error-log entries +0 (not judged: nvme-cli's own queries add some)"]
    assert warned.evidence == ["windows read 6 of 6"]
    assert media.note == warned.note == "DESIGN §6: none allowed, not configurable"


def test_paths_live_names_the_windows_a_path_was_down_in():
    down = paths_live(windows(6, health=lambda i: {PATHS: ok(live=1 + (i != 4), total=2)}))
    assert (down.outcome, down.value, down.unit) == (Outcome.FAIL, 1, "windows")
    assert down.evidence == ["windows read 6 of 6", "a path was down in windows [4]"]
    up = paths_live(windows(6, health=lambda i: {PATHS: ok(live=2, total=2)}))
    assert (up.outcome, up.evidence) == (Outcome.PASS, ["windows read 6 of 6"])


def test_a_reading_without_the_count_its_rule_judges_was_not_read():
    """The collectors always write their counts; a reading without one (hand-made, or stored
    by another version) was not read: it counts against the rule with why, never as none
    found, and a path reading that does not say how many paths it saw is no path down
    (#43: nothing unmeasured passes)."""
    bare = windows(3, health=lambda i: {c: HealthReading() for c in (VERIFY, SMART, KERNEL,
                                                                       PATHS)})
    media, warned = media_errors(bare)
    smart = "media_errors or media_errors_delta or critical_warning"
    for m, what, count in ((verify_errors(bare, LIMITS), "fio verify", "verify_errors"),
                           (media, "SMART", smart),
                           (warned, "SMART", smart),
                           (kernel_errors(bare), "kernel log", "hits"),
                           (paths_live(bare), "NVMe-oF path", "live or total")):
        why = f"its reading has no {count}"
        assert m.outcome is Outcome.ERROR, m
        assert m.note == f"{what} could not be read in any window: {why}"
        assert m.evidence == [f"windows read 0 of 3 (0%); not read: #0 {why}; #1 {why}; #2 {why}"]
    for values, missing in (({"total": 1.0}, "live"), ({"live": 1.0}, "total")):
        m = paths_live(windows(3, health=lambda i, v=values: {
            PATHS: HealthReading(values=v) if i == 1 else ok(live=1, total=1)}))
        assert (m.outcome, m.evidence[0]) == (
            Outcome.ERROR, f"windows read 2 of 3 (67%); not read: #1 its reading has no {missing}")


def test_a_count_missing_in_one_window_is_not_read_and_a_found_error_still_fails():
    """Two windows counted, one without its count: the count found stands as a FAIL, and the
    window without it is named; none found elsewhere is no PASS while one was not read."""
    kernel = kernel_errors(windows(3, health=lambda i: {KERNEL: (
        ok(hits=2) if i == 0 else HealthReading() if i == 1 else ok(hits=0))}))
    assert (kernel.outcome, kernel.value) == (Outcome.FAIL, 2)
    assert kernel.evidence[0] == "windows read 2 of 3 (67%); not read: #1 its reading has no hits"
    quiet = kernel_errors(windows(3, health=lambda i: {KERNEL: (
        HealthReading() if i == 1 else ok(hits=0))}))
    assert (quiet.outcome, quiet.value) == (Outcome.ERROR, 0)


def test_a_smart_reading_without_its_delta_and_a_refused_pass_without_its_count_are_not_read():
    """Without the delta against the snapshot before it, a window's new media errors are
    unknown (the collector says so itself for its first window); a refused verify pass that
    lacks its mismatch count was not read either."""
    undelta = windows(3, health=lambda i: {SMART: ok(media_errors=7, critical_warning=0)})
    assert [m.outcome for m in media_errors(undelta)] == [Outcome.ERROR, Outcome.ERROR]
    delta = windows(3, health=lambda i: {SMART: ok(media_errors=7 + i, media_errors_delta=1,
                                                   critical_warning=0)})
    assert media_errors(delta)[0].value == 3  # the last reading less the first one's base
    refused = windows(1, health=lambda i: {VERIFY: HealthReading(
        status="alert", values={"job_errors": 1.0}, reason="EROFS")})
    assert verify_errors(refused, LIMITS).outcome is Outcome.ERROR


def test_windows_without_a_reading_beside_ones_saying_not_applicable_are_not_read():
    """N/A is a fact of the site only where every window says so: windows with no reading
    beside them were not read, an ERROR naming them, never NOT APPLICABLE."""
    mixed = windows(3, health=lambda i: {KERNEL: HealthReading.not_applicable("no dmesg")}
                    if i == 0 else {})
    m = kernel_errors(mixed)
    assert m.outcome is Outcome.ERROR
    assert m.note == ("kernel log could not be read in any window: some windows have no "
                      "reading, the others say not applicable")
    assert m.evidence == ["windows read 0 of 3 (0%); not read: #0 not applicable in this window "
                          "alone: no dmesg; #1 no reading; #2 no reading"]


def test_an_unread_span_is_named_once_with_the_window_that_left_it_unread():
    """A span of one window is labelled by it, so its reason does not name it again; a longer
    span names which of its windows was not read."""
    w = windows(4)
    w[1] = w[1].model_copy(update={"requests": 0})
    single = span_coverage([[x] for x in w])
    assert single.describe() == ("spans read 3 of 4 (75%); not read: window #1 the load "
                                 "generator sent no request in it")
    paired = span_coverage([w[:2], w[2:]])
    assert paired.describe() == ("spans read 1 of 2 (50%); not read: windows #0-#1 #1 the load "
                                 "generator sent no request in it")


def test_the_error_log_growth_is_shown_from_the_readings_that_carry_it():
    """Not judged (nvme-cli's own queries add entries), but shown: a reading without the count
    adds none, the first reading's delta is what grew before it."""
    def smart(i, **log):
        return {SMART: ok(media_errors=0, media_errors_delta=0, critical_warning=0, **log)}
    first_bare = windows(3, health=lambda i: smart(i) if i == 0 else smart(i, error_log_entries=4))
    assert media_errors(first_bare)[0].evidence[1] == (
        "error-log entries +4 (not judged: nvme-cli's own queries add some)")
    last_bare = windows(3, health=lambda i: smart(i) if i == 2 else smart(
        i, error_log_entries=2, error_log_entries_delta=2))
    assert media_errors(last_bare)[0].evidence[1] == (
        "error-log entries +0 (not judged: nvme-cli's own queries add some)")
