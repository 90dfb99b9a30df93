"""Issue #43, "every rule accounts for all of its inputs", for G4's rules over load and time.

Before: the TTFT drift took its medians over the windows that had a TTFT and PASSed; a window
the load generator sent nothing in counted 0 request errors (PASS); the floor said "no output
tokens" of a window that had no throughput figure at all; the gap and duration rules added up
windows whose clock had stepped back. Now each committed window (after the warm-up, for the
trend rules) is expected, and one without a figure is "not read" with why and counts against
the rule through its Coverage (gates.soak.readings). And a rehearsal's undecided floor whose
interval lies mostly past the limit (a large drop) stays MARGINAL instead of REPORTED, which the
gate read as PASS; a point a hair past the limit is reported, naming it.
"""

import math

import pytest

from gates.core.configuration import G4Limits
from gates.core.verdicts import (
    G4,
    SHORTENED,
    Coverage,
    Limit,
    Measurement,
    Outcome,
    RequestOutcome,
    RequestRecord,
    gate_verdict,
)
from gates.core.verdicts.measures import FOUND, ONE_READING
from gates.soak import SoakPlan, SoakRunner
from gates.soak.clock import FakeClock
from gates.soak.load_rules import REHEARSED, past_limit, rehearsed, soak_measurements
from gates.soak.readings import (
    clock_coverage,
    coverage,
    not_committed,
    planned_coverage,
    requests_not_read,
    span_coverage,
    throughput_not_read,
    ttft_not_read,
    undecided,
)
from gates.soak.rules import (
    HOUR,
    KERNEL,
    PATHS,
    SMART,
    VERIFY,
    HealthReading,
    WindowRecord,
    gap,
)
from gates.soak.spans import (
    after_warmup,
    noise_df,
    quantile,
    span_length,
    span_variance,
    spans,
    window_noise,
    windows_to_decide,
)
from gates.store import Store

T0 = 1_800_000_000.0
# Every G4 rule over many inputs (all but the carrier that says why the soak could not run).
RULES = [id for id, d in G4.by_id.items() if d.over != ONE_READING and id != "g4.complete"]


def ok(**values):
    return HealthReading(values={k: float(v) for k, v in values.items()})


CLEAN = {VERIFY: ok(verify_errors=0), KERNEL: ok(hits=0),
         SMART: ok(media_errors=0, media_errors_delta=0, critical_warning=0,
                   error_log_entries=0, error_log_entries_delta=0),
         PATHS: HealthReading.not_applicable("local PCIe: no fabric")}
FABRIC = CLEAN | {PATHS: ok(live=2, total=2)}  # every health rule applies


def windows(rates, seconds=300.0, ttft=0.1, health=CLEAN):
    return [WindowRecord(index=i, start=T0 + seconds * i, end=T0 + seconds * (i + 1),
                         requests=10, output_tokens=int(r * seconds), throughput=r,
                         ttft_p50=ttft, ttft_p99=2 * ttft, health=dict(health))
            for i, r in enumerate(rates)]


def judged(runs, plan=None, deviations=()):
    plan = plan or SoakPlan(run_id="r", duration=300.0 * len(runs), window=300.0)
    return {m.id: m for m in soak_measurements(runs, list(deviations), plan, G4Limits())}


class Load:
    """Four requests per window; ``answer(index)`` says how they end: "ok", "refused" (every
    request failed: the engine stopped answering) or "nothing" (the load generator sent none)."""

    def __init__(self, clock, answer):
        self.clock, self.answer = clock, answer

    def run(self, index, seconds):
        self.clock.sleep(seconds)
        how = self.answer(index)
        if how == "nothing":
            return []
        return [RequestRecord(request_id=f"w{index}-{k}", t0=0.0, ttft=0.1 if how == "ok"
                              else None, e2e=1.0, content_times=[0.1, 1.0] if how == "ok"
                              else [], output_tokens=500 if how == "ok" else 0,
                              outcome=RequestOutcome.OK if how == "ok"
                              else RequestOutcome.HTTP_ERROR) for k in range(4)]


def real_soak(tmp_path, answer, n=8, on_window=None):
    clock = FakeClock()
    with Store(tmp_path / "out") as store:
        store.begin_run("soak-1", "test site")
        plan = SoakPlan(run_id="soak-1", duration=n * 20.0, window=20.0)
        runner = SoakRunner.start(store, plan, Load(clock, answer), clock=clock,
                                  on_window=on_window and (lambda w, s: on_window(w, clock)))
        runner.run()
        return {m.id: m for m in runner.measurements(G4Limits())}


def test_windows_whose_requests_all_failed_are_not_left_out_of_the_drift(tmp_path):
    """An engine that answered nothing but errors in windows 3-5 of 8: before, the drift took
    its medians over the other five and PASSed."""
    got = real_soak(tmp_path, lambda i: "refused" if 3 <= i <= 5 else "ok")
    drift = got["g4.ttft_drift"]
    assert drift.outcome is Outcome.ERROR, drift
    assert drift.evidence[0] == "windows read 5 of 8 (62%); not read: " + "; ".join(
        f"#{i} no request succeeded (4 of 4 failed, 0 timeouts)" for i in (3, 4, 5))
    assert drift.note.startswith(drift.evidence[0] + ": a verdict needs 100% of windows read")
    # Requests were sent and none came back: the windows delivered 0 tok/s, a reading the
    # floor FAILs (more spans cannot undo it), and the errors are counted.
    assert got["g4.throughput_floor"].outcome is Outcome.FAIL
    assert got["g4.throughput_floor"].evidence[0] == "spans read 6 of 6"
    assert got["g4.request_errors"].outcome is Outcome.FAIL


def test_windows_the_load_generator_sent_nothing_in_count_against_every_load_rule(tmp_path):
    """Before: 0 errors counted in them (request errors PASS) and the drift PASSed."""
    got = real_soak(tmp_path, lambda i: "nothing" if 3 <= i <= 5 else "ok")
    why = "the load generator sent no request in it"
    for id in ("g4.request_errors", "g4.ttft_drift", "g4.window_spread", "g4.window_slope"):
        m = got[id]
        assert m.outcome is Outcome.ERROR, (id, m)
        assert m.evidence[0] == "windows read 5 of 8 (62%); not read: " + "; ".join(
            f"#{i} {why}" for i in (3, 4, 5)), (id, m.evidence)
        assert m.coverage.missing == [f"#{i} {why}" for i in (3, 4, 5)]
    floor = got["g4.throughput_floor"]  # spans of 1/6 of the run: #3, #4 and #5 in three
    assert floor.outcome is Outcome.ERROR and floor.coverage.what == "spans", floor
    assert all(f"#{i} {why}" in "".join(floor.coverage.missing) for i in (3, 4, 5))


def test_windows_without_a_throughput_figure_are_not_read_not_idle():
    """Before: the floor FAILed them as "no output tokens in 300 s", which nobody measured."""
    runs = windows([100.0] * 8)
    for i in (3, 4, 5):
        runs[i] = runs[i].model_copy(update={"throughput": None, "ttft_p50": None})
    got = judged(runs)
    floor = got["g4.throughput_floor"]
    assert floor.outcome is Outcome.ERROR, floor
    assert not any("no output tokens" in e for e in floor.evidence)
    assert floor.coverage.read < floor.coverage.expected
    said = "; ".join(floor.coverage.missing)
    assert all(f"#{i} no throughput recorded (throughput None)" in said for i in (3, 4, 5))
    for id in ("g4.window_spread", "g4.window_slope"):
        assert got[id].outcome is Outcome.ERROR and "#3 no throughput recorded" in \
            got[id].evidence[0], got[id]


def test_a_clock_that_stepped_back_leaves_the_gap_time_unknown(tmp_path):
    """A resume after a reboot whose clock came back 1000 s early: its gap reads 0 s (as the
    runner's gap() gives it), and before the fix the gap time PASSed on it."""
    runs = windows([100.0] * 8)
    for i in range(5, 8):
        runs[i] = runs[i].model_copy(update={"start": runs[i].start - 1000,
                                             "end": runs[i].end - 1000})
    resumed = gap(runs[4].end, runs[5].start)
    assert resumed.seconds == 0
    got = judged(runs, deviations=[resumed])
    m = got["g4.gap_time"]
    assert m.outcome is Outcome.ERROR, m
    assert m.coverage.missing == ["#5 starts 1e+03 s before the window before it ended "
                                  "(the clock stepped back): the time between is unknown"]
    # Each window's own length is still read: the duration is the windows', and stands.
    assert got["g4.effective_duration"].outcome is Outcome.PASS
    # The same step on the real runner, between two windows of one run.
    def step_back(window, clock):
        if window.index == 4:
            clock.t -= 1000
    live = real_soak(tmp_path, lambda i: "ok", on_window=step_back)
    assert live["g4.gap_time"].outcome is Outcome.ERROR
    assert live["g4.gap_time"].coverage.missing[0].startswith("#5 starts 1e+03 s before")


def test_the_duration_is_over_the_plans_windows():
    """A window never committed is named; one whose clock reads no length (ending before it
    began) is not read, where before its negative length was summed (and a FAIL could PASS
    by it, or the reverse, on a clock's say-so)."""
    plan = SoakPlan(run_id="r", duration=8 * 300.0, window=300.0)
    m = judged(windows([100.0] * 6), plan)["g4.effective_duration"]
    assert m.outcome is Outcome.FAIL and m.value == 1800.0
    assert m.coverage.missing == ["#6 not committed (the soak stopped before it)",
                                  "#7 not committed (the soak stopped before it)"]
    runs = windows([100.0] * 8)
    runs[2] = runs[2].model_copy(update={"end": runs[2].start - 10})
    m = judged(runs, plan)["g4.effective_duration"]
    assert m.outcome is Outcome.ERROR and m.coverage.missing == [
        f"#2 its clock reads {runs[2].start:.3f} to {runs[2].end:.3f}"], m


def test_a_rehearsals_large_drop_is_marginal_not_reported():
    """12 windows of 20 s on a machine moving +-40 % between windows; throughput fell to about
    half after the first span. The floor cannot decide at that noise; before, the rehearsal
    made it REPORTED, and G4 read PASS through the drop."""
    rates = [100, 140, 70, 120, 60, 50, 75, 40, 65, 45, 70, 50]
    plan = SoakPlan(run_id="r", duration=12 * 20.0, window=20.0)
    assert plan.shortened
    got = judged(windows(rates, seconds=20.0), plan)
    floor = got["g4.throughput_floor"]
    assert floor.outcome is Outcome.MARGINAL, floor
    assert floor.value < 50 and floor.interval[0] < 90 < floor.interval[1]
    assert not floor.note.startswith(REHEARSED)
    assert gate_verdict([m.outcome for m in got.values()]) is not Outcome.PASS
    # The same rehearsal without the drop: undecided at that noise, and said so, not judged.
    level = judged(windows([100, 140, 130, 110, 95, 150, 135, 100, 120, 125, 140, 105],
                           seconds=20.0), plan)["g4.throughput_floor"]
    assert level.outcome is Outcome.REPORTED and level.note.startswith(REHEARSED), level
    assert "past the limit" not in level.note


@pytest.mark.parametrize(("value", "interval", "said"), [
    (10.02, (-2.9, 24.6), Outcome.REPORTED),  # a fresh-clone demo's drift, 2026-12-06
    (22.9, (5.0, 41.0), Outcome.MARGINAL),  # past the limit by more than it reaches back
    (-12.0, (-30.0, 9.0), Outcome.REPORTED),  # fell past the limit: a cold first span
])
def test_a_rehearsals_drift_is_marginal_only_where_its_interval_lies_mostly_past_the_limit(
        value, interval, said):
    drift = Measurement.measured("TTFT p50 drift", value, Limit(lo=-10, hi=10, unit="%"),
                                 interval=interval)
    assert drift.outcome is Outcome.MARGINAL
    read = Coverage(range(5), read=range(5), what="windows").judge(drift)
    got = rehearsed(read, "g4.ttft_drift")
    assert got.outcome is said, got
    if said is Outcome.REPORTED and value > 10:
        assert got.note.startswith(f"{REHEARSED}; its point (10 %) is past the limit"), got.note
    # A window not read keeps it MARGINAL whatever the point: what was not measured.
    gap = Coverage(range(5), read=range(4), what="windows").judge(drift, 0.5)
    assert rehearsed(gap, "g4.ttft_drift").outcome is Outcome.MARGINAL


def found(got):
    """The measurements that say what a rule found (those stamping holds to coverage)."""
    return {id: m for id, m in got.items() if m.outcome in FOUND}


@pytest.mark.parametrize("duration", [72 * 3600.0, 8 * 300.0])
def test_a_healthy_soak_judges_every_rule_through_its_coverage(duration):
    """Stamping (Declared.stamp refuses a found outcome without its coverage of the
    declared unit): a steady soak, full length or a rehearsal, raises nothing and PASSes; a
    rehearsal's REPORTED went through the coverage too."""
    n = round(duration / 300.0)
    plan = SoakPlan(run_id="r", duration=duration, window=300.0, g3_throughput=100.0)
    got = judged(windows([100.0 * (1.02 if i % 2 else 0.98) for i in range(n)], health=FABRIC),
                 plan, [gap(T0, T0 + 60)])
    assert set(found(got)) == set(RULES), got  # a fabric site: every rule judged
    for id, m in found(got).items():
        assert m.coverage is not None and m.coverage.what == G4[id].over, (id, m)
        assert m.coverage.read == m.coverage.expected, (id, m.coverage)
    assert got["g4.throughput_floor"].coverage.what == "spans"
    outcomes = {m.outcome for m in got.values()}
    assert outcomes <= {Outcome.PASS, Outcome.REPORTED}, got
    if plan.shortened:
        assert Outcome.REPORTED in outcomes  # the rehearsal shows what it could not decide
    else:
        assert gate_verdict([m.outcome for m in got.values()]) is Outcome.PASS


@pytest.mark.parametrize("duration", [72 * 3600.0, 8 * 300.0])
def test_windows_the_plan_expected_and_nobody_committed_count_against_every_rule(
        duration):
    """A soak judged after its last 2 planned windows never ran (it stopped, and was judged
    as it stood): before, every rule but the duration judged the windows it had and PASSed (a
    rehearsal's trend rules REPORTED, which the gate reads as a pass). Now each names them."""
    n = round(duration / 300.0)
    plan = SoakPlan(run_id="r", duration=duration, window=300.0, g3_throughput=100.0)
    steady = [100.0 * (1.02 if i % 2 else 0.98) for i in range(n)]
    got = judged(windows(steady, health=FABRIC)[:-2], plan)
    for id in RULES:
        m = got[id]
        assert m.outcome not in (Outcome.PASS, Outcome.REPORTED), (id, m)
        assert m.coverage is not None and m.coverage.what == G4[id].over, (id, m)
        said = " ".join(m.coverage.missing)
        assert f"#{n - 2}" in said and "not committed" in said, (id, said)
    assert got["g4.request_errors"].coverage.missing == [
        f"#{i} not committed (the soak stopped before it)" for i in (n - 2, n - 1)]
    # The windows surely ran no load: the duration FAILs; every other rule could not tell.
    assert got["g4.effective_duration"].outcome is Outcome.FAIL
    assert {got[id].outcome for id in RULES if id != "g4.effective_duration"} == {Outcome.ERROR}


@pytest.mark.parametrize("duration", [72 * 3600.0, 8 * 300.0])
def test_a_window_nothing_could_be_read_in_counts_against_every_rule_it_feeds(
        duration):
    """Window #5 committed, but nothing in it read: no request sent (so no throughput or
    TTFT) and every health collector failed. Each rule that reads those is not PASS, naming
    #5; the duration and the gap time, which read its clock, stand."""
    n = round(duration / 300.0)
    plan = SoakPlan(run_id="r", duration=duration, window=300.0, g3_throughput=100.0)
    runs = windows([100.0 * (1.02 if i % 2 else 0.98) for i in range(n)], health=FABRIC)
    runs[5] = runs[5].model_copy(update={
        "requests": 0, "output_tokens": 0, "throughput": None, "ttft_p50": None,
        "ttft_p99": None, "health": {c: HealthReading.failed(f"{c} timed out")
                                     for c in (VERIFY, KERNEL, SMART, PATHS)}})
    got = judged(runs, plan)
    for id in RULES:
        m = got[id]
        if id in ("g4.effective_duration", "g4.gap_time"):
            assert m.outcome is Outcome.PASS and m.coverage.read == n, (id, m)
            continue
        assert m.outcome not in (Outcome.PASS, Outcome.REPORTED), (id, m)
        assert m.coverage is not None and m.coverage.what == G4[id].over, (id, m)
        assert "#5 " in " ".join(m.coverage.missing), (id, m.coverage)
    assert got["g4.media_errors"].coverage.missing == ["#5 smart timed out"]
    assert got["g4.request_errors"].coverage.missing == [
        "#5 the load generator sent no request in it"]


# ---- how the trend rules read the windows in time (gates.soak.spans) -------------------------

def test_the_warm_up_note_names_its_first_and_last_window_and_its_time():
    runs = windows([100.0] * 8)
    judged_, note = after_warmup(runs, 3)
    assert [w.index for w in judged_] == [3, 4, 5, 6, 7]
    assert note == ("window #0-#2 left out as the warm-up (15 min (900 s); "
                    "its requests still count for errors)")
    assert after_warmup(runs, 2)[1].startswith("window #0-#1 left out as the warm-up (10 min")
    assert after_warmup(runs, 1)[1].startswith("window #0 left out as the warm-up (5 min")


def test_no_warm_up_leaves_every_window_and_says_nothing():
    # The note is joined into the trend rules' notes wherever it is not empty.
    runs = windows([100.0] * 4)
    assert after_warmup(runs, 0) == (runs, "")


@pytest.mark.parametrize(("total", "length", "note"), [
    (2 * HOUR, HOUR, "spans of an hour"),  # 2 h itself is not "shorter than 2 h"
    (2.5 * HOUR, HOUR, "spans of an hour"),
    (2 * HOUR - 60, 1190.0, "run shorter than 2 h: spans of 1/6 of the run (1190 s each), "
                            "not hours"),
    (600.0, 100.0, "run shorter than 2 h: spans of 1/6 of the run (100 s each), not hours")])
def test_a_run_of_two_hours_or_more_is_compared_hour_by_hour(total, length, note):
    assert span_length(total) == (length, note)


def test_a_window_belongs_to_the_span_it_starts_in():
    # 600 s: spans of 100 s. #1 starts at 99.5 s, inside the first span, though it runs on.
    seconds = [99.5, 100.5, 100.0, 100.0, 100.0, 100.0]
    starts = [T0 + sum(seconds[:i]) for i in range(6)]
    runs = [WindowRecord(index=i, start=s, end=s + d)
            for i, (s, d) in enumerate(zip(starts, seconds, strict=True))]
    got, _ = spans(runs)
    assert [[w.index for w in s] for s in got] == [[0, 1], [2], [3], [4], [5]]


def test_a_run_of_a_few_seconds_still_has_six_spans_and_one_of_no_length_has_one():
    short = [WindowRecord(index=i, start=T0 + i, end=T0 + i + 1) for i in range(6)]
    assert [len(s) for s in spans(short)[0]] == [1] * 6  # spans of 1 s each
    # Windows whose clock read no length: nothing to divide, all in one span (no error).
    still = [WindowRecord(index=i, start=T0, end=T0) for i in range(3)]
    assert [[w.index for w in s] for s in spans(still)[0]] == [[0, 1, 2]]


def test_window_noise_needs_two_windows_and_reads_them_on_the_log():
    assert window_noise([]) == window_noise([100.0]) == 0.0
    # Two windows, one twice the other: half the squared log step, on the log.
    assert window_noise([100.0, 200.0]) == pytest.approx(math.log(2) / math.sqrt(2))
    assert window_noise([50.0, 100.0, 50.0]) == pytest.approx(math.log(2) / math.sqrt(2))


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_window_noise_refuses_a_window_without_output_naming_it(bad):
    with pytest.raises(ValueError) as refused:
        window_noise([100.0, bad, 120.0])
    assert str(refused.value) == f"window noise needs positive values, not {bad!r}"


def test_a_median_of_three_or_more_windows_is_not_a_mean():
    # One or two windows: the median is their mean (1/n); from three, (pi / 2) / n.
    assert [span_variance(n) for n in (1, 2)] == [1.0, 0.5]
    assert span_variance(3) == pytest.approx(math.pi / 6)
    assert span_variance(100) == pytest.approx(math.pi / 200)


def test_the_noises_degrees_of_freedom_as_von_neumann_gives_them():
    # The docstring's figures: 2.9 for the demo's 5 windows, 575 for a 72 h soak's 864.
    assert noise_df(5) == pytest.approx(32 / 11) and 575 < noise_df(864) < 576
    assert noise_df(2) == 1.0 and noise_df(3) == pytest.approx(8 / 5)
    assert noise_df(1) == noise_df(0) == 0.0  # fewer than two windows: no noise at all


@pytest.mark.parametrize(("noise", "room", "need"), [
    (0.0, 0.1, 1),  # a machine that does not move: one window per span decides
    (0.01, 0.1, 1),
    (0.1, 0.4, 2),  # at 1 window the noise comes from the 6 spans' 6 windows: t(3.6 df)
    (0.4, 1.0, 2),
    (1.0, 2.0, 4),  # a point far from its limit at a noise as large
    (0.2, 0.1, 49)])
def test_windows_to_decide_is_the_fewest_windows_per_span_that_would(noise, room, need):
    assert windows_to_decide(noise, room, 0.95) == need


def test_a_half_width_exactly_at_the_room_decides():
    # The room itself is inside: the interval's half-width need not be under it.
    for n in (1, 2, 5):
        room = quantile(0.95, 6 * n) * 0.1 * math.sqrt(2 * span_variance(n))
        assert windows_to_decide(0.1, room, 0.95) == n


def test_no_room_or_more_than_ten_thousand_windows_per_span_is_none():
    assert windows_to_decide(0.1, 0.0, 0.95) is None  # the point sits on the limit
    assert windows_to_decide(0.1, -0.01, 0.95) is None
    # Noises either side of 10,000 windows per span at a room of 0.02 (log).
    assert windows_to_decide(0.57568, 0.02, 0.95) == 10_000
    assert windows_to_decide(0.57571, 0.02, 0.95) is None


# ---- the load rules' own words and limits (gates.soak.load_rules) ----------------------------

def test_request_errors_say_the_requests_and_timeouts_and_show_twenty_windows():
    runs = [w.model_copy(update={"errors": 2, "timeouts": 1}) for w in windows([100.0] * 25)]
    m = judged(runs)["g4.request_errors"]
    assert m.outcome is Outcome.FAIL and m.value == 50
    assert m.unit == "requests" and str(m.limit) == "x <= 0 requests"
    assert m.note == "250 requests, 25 timeouts"
    assert m.evidence == ["windows read 25 of 25"] + [
        f"window #{i}: 2 of 10 failed (1 timeouts)" for i in range(20)]


def test_the_gap_time_says_its_resumes_and_shows_twenty_gaps():
    gaps = [gap(T0 + 10_000 * k, T0 + 10_000 * k + 60) for k in range(22)]
    m = judged(windows([100.0] * 8), deviations=gaps)["g4.gap_time"]
    assert m.outcome is Outcome.PASS and m.value == 22 * 60.0
    assert m.unit == "s" and str(m.limit) == "x <= 1800 s"
    assert m.note == "22 resume(s)"
    assert m.evidence == ["windows read 8 of 8"] + [d.text for d in gaps[:20]]


def test_a_shortened_soaks_duration_says_its_windows_and_that_it_is_shortened():
    m = judged(windows([100.0] * 8))["g4.effective_duration"]
    assert m.outcome is Outcome.PASS
    assert m.note == f"8 of 8 windows committed; {SHORTENED}"


def test_the_stability_rules_take_their_limits_and_confidence_from_the_caller():
    plan = SoakPlan(run_id="r", duration=8 * 300.0, window=300.0, warmup_windows=1)
    runs = windows([100.0 * (1.02 if i % 2 else 0.98) for i in range(8)])
    got = judged(runs, plan)  # the SNIA defaults: spread 20 %, slope 10 %
    assert (str(got["g4.window_spread"].limit), str(got["g4.window_slope"].limit)) == (
        "x <= 20 %", "x <= 10 %")
    spread, slope = got["g4.window_spread"], got["g4.window_slope"]
    assert "its 95 % interval [0, 29.1] %" in spread.note
    # The warm-up's note follows the rule's own, after "; ".
    warm = ("window #0 left out as the warm-up (5 min (300 s); "
            "its requests still count for errors)")
    assert spread.note.endswith(f"(a longer soak) decide; {warm}"), spread.note
    assert slope.note == warm
    asked = {m.id: m for m in soak_measurements(runs, [], plan, G4Limits(), spread_max=25.0,
                                                slope_max=5.0, confidence=0.8)}
    spread, slope = asked["g4.window_spread"], asked["g4.window_slope"]
    assert (str(spread.limit), str(slope.limit)) == ("x <= 25 %", "x <= 5 %")
    assert spread.interval[1] == pytest.approx(20.55, abs=0.01)  # 80 %: narrower than 29.1


def test_the_first_window_after_the_warm_up_not_committed_counts_against_the_trend_rules():
    plan = SoakPlan(run_id="r", duration=8 * 300.0, window=300.0, warmup_windows=1)
    runs = windows([100.0] * 8)
    del runs[1]
    got = judged(runs, plan)
    for id in ("g4.ttft_drift", "g4.window_spread", "g4.window_slope"):
        assert got[id].outcome is Outcome.ERROR, (id, got[id])
        assert got[id].coverage.missing == ["#1 not committed (later windows were)"], id


def drift_of(value, interval):
    """A TTFT drift as the rule gives it, over 5 windows all read."""
    m = Measurement.measured("TTFT p50 drift", value, Limit(lo=-10, hi=10, unit="%"),
                             interval=interval)
    return Coverage(range(5), read=range(5), what="windows").judge(m)


def floor_of(value, interval):
    """A throughput floor of 90 (% of G3's) as the rule gives it, over 5 spans all read."""
    m = Measurement.measured("Throughput floor", value, Limit.at_least(90.0, "%"),
                             interval=interval)
    return Coverage(range(5), read=range(5), what="spans").judge(m)


def test_a_point_past_the_limit_is_named_in_full():
    drift = drift_of(10.02, (-2.9, 24.6))
    said = ("its point (10 %) is past the limit (-10 <= x <= 10 %) but its interval is not: "
            "too few windows to tell that from noise")
    assert past_limit(drift, "g4.ttft_drift") == said
    assert rehearsed(drift, "g4.ttft_drift").note == f"{REHEARSED}; {said}"


@pytest.mark.parametrize(("id", "measured"), [
    ("g4.ttft_drift", drift_of(10.0, (-5.0, 30.0))),
    ("g4.throughput_floor", floor_of(90.0, (70.0, 110.0)))])
def test_a_point_on_the_limit_is_not_past_it(id, measured):
    # The limits are inclusive: a drift of exactly 10 % or a floor of exactly 90 % is within.
    assert measured.outcome is Outcome.MARGINAL
    assert past_limit(measured, id) == ""
    got = rehearsed(measured, id)
    assert got.outcome is Outcome.REPORTED and got.note == REHEARSED


def test_a_figure_not_measured_is_past_no_limit():
    m = Measurement.error("TTFT p50 drift", "no window read", Limit(lo=-10, hi=10, unit="%"))
    assert past_limit(m, "g4.ttft_drift") == past_limit(m, "g4.throughput_floor") == ""


@pytest.mark.parametrize(("id", "measured", "said"), [
    # Past the floor by 5, the interval reaching back 20 over it: a hair, reported.
    ("g4.throughput_floor", floor_of(85.0, (60.0, 110.0)), Outcome.REPORTED),
    # Exactly as far past the limit as the interval reaches back: not mostly past.
    ("g4.throughput_floor", floor_of(80.0, (50.0, 100.0)), Outcome.REPORTED),
    ("g4.ttft_drift", drift_of(20.0, (0.0, 40.0)), Outcome.REPORTED),
    # A little farther past than the interval reaches back: mostly past, MARGINAL.
    ("g4.throughput_floor", floor_of(79.0, (50.0, 100.0)), Outcome.MARGINAL),
    ("g4.ttft_drift", drift_of(21.0, (0.0, 40.0)), Outcome.MARGINAL)])
def test_a_rehearsal_keeps_marginal_only_where_the_point_is_farther_past_than_its_interval_reaches_back(  # noqa: E501
        id, measured, said):
    assert measured.outcome is Outcome.MARGINAL
    assert rehearsed(measured, id).outcome is said


def test_a_soak_half_a_second_short_of_its_plan_is_short():
    plan = SoakPlan(run_id="r", duration=8 * 300.0, window=300.0)
    runs = windows([100.0] * 8)
    runs[7] = runs[7].model_copy(update={"end": runs[7].end - 0.5})
    m = judged(runs, plan)["g4.effective_duration"]
    assert m.outcome is Outcome.FAIL and m.value == 2399.5
    assert m.unit == "s" and m.limit.key == "g4.duration"  # the record names the limit's key


def test_a_window_whose_length_was_lost_undoes_a_fail_only_if_a_whole_window_could():
    """#7 never ran and #2's clock lost its length: 6 windows known (1800 s) and #2 at most a
    whole window (300 s) still fall short of 2400 s, so the FAIL stands."""
    plan = SoakPlan(run_id="r", duration=8 * 300.0, window=300.0)
    runs = windows([100.0] * 7)
    runs[2] = runs[2].model_copy(update={"end": runs[2].start - 10})
    m = judged(runs, plan)["g4.effective_duration"]
    assert m.outcome is Outcome.FAIL and m.value == 1800.0, m
    assert m.note == f"7 of 8 windows committed; {SHORTENED}"
    assert m.evidence[0].startswith("windows read 6 of 8 (75%); not read: #2 its clock reads")


# ---- which windows and spans each rule read, and why not (gates.soak.readings) ---------------

SKIPPED = "not committed (later windows were)"
STOPPED = "not committed (the soak stopped before it)"
NO_LOAD = "the load generator sent no request in it"


def test_windows_never_committed_are_skipped_before_the_last_committed_and_stopped_after():
    plan = SoakPlan(run_id="r", duration=6 * 300.0, window=300.0)
    kept = [w for w in windows([100.0] * 6) if w.index in (1, 3)]
    assert not_committed(kept, plan) == {0: SKIPPED, 2: SKIPPED, 4: STOPPED, 5: STOPPED}
    assert not_committed(kept, plan, first=3) == {4: STOPPED, 5: STOPPED}
    # Nothing committed: the soak stopped before every window, it skipped none.
    assert not_committed([], plan) == {i: STOPPED for i in range(6)}


def test_a_window_of_a_single_request_is_read_by_every_load_rule():
    one = windows([100.0])[0].model_copy(update={"requests": 1})
    assert requests_not_read(one) == throughput_not_read(one) == ttft_not_read(one) == ""
    none = one.model_copy(update={"requests": 0})
    assert [f(none) for f in (requests_not_read, throughput_not_read, ttft_not_read)] == [
        NO_LOAD] * 3
    assert coverage([one, none], requests_not_read).failed == {none.index: NO_LOAD}


@pytest.mark.parametrize("p50", [0.0, -0.1, math.inf, math.nan, None])
def test_a_ttft_of_no_time_is_not_read_and_says_whether_any_request_succeeded(p50):
    # A p50 of 0 s (or less) is no first token measured, not an instant one.
    w = windows([100.0])[0].model_copy(update={"ttft_p50": p50, "errors": 9, "timeouts": 2})
    assert ttft_not_read(w) == f"no TTFT recorded (p50 {p50})"
    refused = w.model_copy(update={"errors": 10})
    assert ttft_not_read(refused) == "no request succeeded (10 of 10 failed, 2 timeouts)"


def test_the_spans_the_soak_never_ran_are_one_unit_named_by_their_windows():
    runs = windows([100.0] * 5)
    blocks = [runs[0:2], runs[2:4], runs[4:5]]
    them = "not committed (the soak stopped before them)"
    cov = span_coverage(blocks, {i: STOPPED for i in (5, 6, 7)})
    assert cov.expected == ("windows #0-#1", "windows #2-#3", "window #4", "windows #5-#7")
    assert cov.failed == {"windows #5-#7": them}
    assert cov.read == {"windows #0-#1", "windows #2-#3", "window #4"}
    for after, label in (((5,), "window #5"), ((5, 6), "windows #5-#6")):
        cov = span_coverage(blocks, {i: STOPPED for i in after})
        assert (cov.expected[-1], cov.failed) == (label, {label: them}), after


def test_a_window_skipped_leaves_the_span_it_would_have_started_in_unread():
    runs = windows([100.0] * 6)
    # Before the first committed window: the first span (there is none before it).
    cov = span_coverage([runs[1:3], runs[3:6]], {0: SKIPPED})
    assert cov.failed == {"windows #1-#2": f"#0 {SKIPPED}"}
    assert cov.read == {"windows #3-#5"}
    # Between two spans: the one begun before it.
    cov = span_coverage([runs[0:3], runs[4:6]], {3: SKIPPED})
    assert cov.failed == {"windows #0-#2": f"#3 {SKIPPED}"}


def test_a_span_names_five_windows_not_read_and_counts_the_rest():
    runs = [w.model_copy(update={"throughput": None}) for w in windows([100.0] * 8)]
    why = "no throughput recorded (throughput None)"
    five = "; ".join(f"#{i} {why}" for i in range(5))
    assert span_coverage([runs[:5], runs[5:7], runs[7:]]).failed == {
        "windows #0-#4": five, "windows #5-#6": f"#5 {why}; #6 {why}", "window #7": why}
    assert span_coverage([runs[:7]]).failed == {"windows #0-#6": f"{five}; and 2 more"}


def test_an_undecided_rule_shows_its_figure_over_the_windows_read_and_its_own_note():
    cov = Coverage(range(4), read=range(3), failed={3: NO_LOAD}, what="windows")
    spread = Measurement.measured("Window spread", 5.0, Limit.at_most(20.0, "%"),
                                  note="rounds of 1 window")
    got = undecided(cov, spread)
    assert got.outcome is Outcome.ERROR
    assert got.note == (
        f"windows read 3 of 4 (75%); not read: #3 {NO_LOAD}: a verdict needs 100% of windows "
        "read; over those read alone it would be PASS, which the windows not read could "
        "change; rounds of 1 window")


def test_the_clock_of_each_window_decides_whether_its_time_is_known():
    """#1 lasted no time (read: nothing says it did not run); #3 began exactly the clock's
    slack before #2 ended (read); #4 ended before it began, #5's start and #6's end are not
    on the clock (not read, by the gap time or the duration); #7 is held against #5's end,
    the last the clock read, not #6's infinite one."""
    plan = SoakPlan(run_id="r", duration=8 * 300.0, window=300.0)
    runs = windows([100.0] * 8)
    runs[1] = runs[1].model_copy(update={"end": runs[1].start})
    runs[3] = runs[3].model_copy(update={"start": runs[2].end - 1.0})
    runs[4] = runs[4].model_copy(update={"end": runs[4].start - 10})
    runs[5] = runs[5].model_copy(update={"start": math.nan})
    runs[6] = runs[6].model_copy(update={"end": math.inf})
    unknown = {4: "its clock reads 1800001200.000 to 1800001190.000",
               5: "its clock reads nan to 1800001800.000",
               6: "its clock reads 1800001800.000 to inf"}
    for cov in (clock_coverage(runs, plan), planned_coverage(runs, plan)):
        assert cov.failed == unknown
        assert cov.read == {0, 1, 2, 3, 7}
