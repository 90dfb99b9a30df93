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

import pytest

from gates.core.configuration import G4Limits
from gates.core.verdicts import (
    G4,
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
from gates.soak.load_rules import REHEARSED, rehearsed, soak_measurements
from gates.soak.rules import KERNEL, PATHS, SMART, VERIFY, HealthReading, WindowRecord, gap
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
