"""G4 rules over load and time: request errors, gaps, duration; every rule in report order. Pure.

``soak_measurements`` puts them together with the trend rules (gates.soak.trends, stability)
and the health-signal rules (gates.soak.health_rules), in report order. Each rule over windows
expects every window the plan did (those of the warm-up left to the rules that judge them): one
the soak never committed is not read, and counts against it (gates.soak.readings).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..core.configuration import G4Limits
from ..core.verdicts import G4, SHORTENED, Limit, Measurement, Outcome
from .health_rules import kernel_errors, media_errors, paths_live, verify_errors
from .readings import (
    LOAD_COVERAGE_MIN,
    clock_coverage,
    coverage,
    not_committed,
    planned_coverage,
    requests_not_read,
    undecided,
)
from .rules import SoakDeviation, SoakPlan, WindowRecord
from .spans import after_warmup
from .stability import stability
from .trends import throughput_floor, ttft_drift


def request_errors(windows: list[WindowRecord], limits: G4Limits,
                   absent: Mapping[int, str] | None = None) -> Measurement:
    """Failed requests (errors and timeouts) over the whole soak <= the ceiling.

    A window the load generator sent nothing in counted no errors: it was not read, and counts
    against the rule; a FAIL in the windows read stands (more windows only add errors).
    """
    total = sum(w.errors for w in windows)
    bad = [f"window #{w.index}: {w.errors} of {w.requests} failed ({w.timeouts} timeouts)"
           for w in windows if w.errors]
    measured = Measurement.measured(
        G4["g4.request_errors"].title, total,
        Limit.at_most(limits.request_errors_max, "requests", key="g4.request_errors_max"),
        evidence=bad[:20], note=f"{sum(w.requests for w in windows)} requests, "
                                f"{sum(w.timeouts for w in windows)} timeouts")
    return coverage(windows, requests_not_read, absent).judge(measured, LOAD_COVERAGE_MIN)


def total_gap(deviations: list[SoakDeviation], limits: G4Limits, windows: list[WindowRecord],
              plan: SoakPlan) -> Measurement:
    """Total time the soak was not running <= gap_max.

    Over the plan's windows: the gaps are the time between them that a resume recorded, so a
    window whose clock ran backwards (the time before it unknown), or one never committed,
    counts against the rule.
    """
    gaps = [d for d in deviations if d.kind == "gap"]
    measured = Measurement.measured(G4["g4.gap_time"].title, math.fsum(d.seconds for d in gaps),
                                    Limit.at_most(limits.gap_max, "s", key="g4.gap_max"),
                                    evidence=[d.text for d in gaps][:20],
                                    note=f"{len(gaps)} resume(s)")
    return clock_coverage(windows, plan).judge(measured, LOAD_COVERAGE_MIN)


def duration(windows: list[WindowRecord], plan: SoakPlan) -> Measurement:
    """Effective duration (gaps excluded) >= the planned duration; shortened runs say so.

    Over the plan's windows: one not committed, or whose clock ran backwards, is not read (its
    time under load is unknown) and is not counted in the effective duration.
    """
    cov = planned_coverage(windows, plan)
    note = f"{len(windows)} of {plan.windows} windows committed"
    if plan.shortened:
        note += f"; {SHORTENED}"
    known = math.fsum(w.seconds for w in windows if w.index in cov.read)
    measured = Measurement.measured(G4["g4.effective_duration"].title, known,
                                    Limit.at_least(plan.duration - 1e-6, "s",
                                                   key="g4.duration"), note=note)
    # A window not committed surely ran no load; one committed whose length the clock lost
    # may have run its whole window: a FAIL stands only if it would at that length too.
    lost = sum(1 for w in windows if w.index not in cov.read)
    if measured.limit.contains(known + lost * plan.window):
        return undecided(cov, measured)
    return cov.judge(measured, LOAD_COVERAGE_MIN)


def _past(measured: Measurement, id: str) -> bool:
    """The point sits past the limit on the worse side: a span's throughput under the floor,
    or a TTFT that rose by more than the drift allows."""
    limit, value = measured.limit, measured.value
    if limit is None or value is None:
        return False
    if id == "g4.throughput_floor":
        return limit.lo is not None and value < limit.lo
    return id == "g4.ttft_drift" and limit.hi is not None and value > limit.hi


def past_limit(measured: Measurement, id: str) -> str:
    """Words saying the point is past the limit on the worse side ("" where it is not)."""
    if not _past(measured, id):
        return ""
    return (f"its point ({measured.value:.3g} {measured.limit.unit}) is past the limit "
            f"({measured.limit}) but its interval is not: too few windows to tell that from "
            "noise")


def mostly_worse(measured: Measurement, id: str) -> bool:
    """The interval lies mostly past the limit on the worse side: the point is farther past the
    limit than the interval reaches back over it (a 60 % drop in [10, 95] % against a 90 %
    floor), not a point a hair past it (a +10.02 % drift in [-2.9, 24.6] % against 10 %)."""
    limit, value, interval = measured.limit, measured.value, measured.interval
    if interval is None or not _past(measured, id):
        return False
    if id == "g4.throughput_floor":
        return limit.lo - value > max(interval) - limit.lo
    return value - limit.hi > limit.hi - min(interval)


TREND_RULES = ("g4.throughput_floor", "g4.ttft_drift", "g4.window_spread", "g4.window_slope")
REHEARSED = ("a shortened rehearsal judges only what its minutes can decide: this trend rule's "
             "interval crosses its limit, so it is reported, not judged (a decided PASS or FAIL "
             "stands; a rehearsal never counts towards a sign-off, the full soak decides)")


def rehearsed(measured: Measurement, id: str) -> Measurement:
    """A shortened soak's undecided trend rule: REPORTED with its limit, interval and reason.

    Measured on this VM (bench/README.md §7, bench/soak_risk.py on recorded windows): a
    2-minute rehearsal PASSes a drift-free soak's drift 0.4 % of the time and a steady floor 8 %
    (48 minutes of 20-second windows: 80 % and 99 %), so its trend rules are MARGINAL whatever
    the array does; a MARGINAL there says nothing about the array and would
    end every rehearsal the same way. Only MARGINAL changes: a rehearsal that could decide
    keeps its PASS or FAIL, and the rehearsal mark keeps the record from any ACCEPT.

    Two MARGINALs stay MARGINAL. One whose interval lies mostly past the limit on the worse
    side (`mostly_worse`: a throughput down 60 % whose wide interval still reaches the floor):
    REPORTED prints as a rehearsal's PASS, and a drop that large is no pass. A point merely past
    the limit is not enough (a drift of +10.02 % in [-2.9, 24.6] %: 1 of the 6 fresh-clone demos
    of 2026-12-06 on a steady simulator): the windows' noise gives a steady array such points,
    and a verdict on them re-rolls from run to run (docs/measurements.md, "Same site, same
    verdict?"); it is reported, its point named as past the limit. And one capped by windows
    not read: that is what was not measured, not what minutes cannot decide.
    """
    if measured.outcome is not Outcome.MARGINAL:
        return measured
    if measured.coverage is not None and not measured.coverage.complete:
        return measured
    if mostly_worse(measured, id):
        return measured
    note = "; ".join(t for t in (REHEARSED, past_limit(measured, id), measured.note) if t)
    return measured.model_copy(update={"outcome": Outcome.REPORTED, "note": note})


def soak_measurements(windows: list[WindowRecord], deviations: list[SoakDeviation],
                      plan: SoakPlan, limits: G4Limits, spread_max: float = 20.0,
                      slope_max: float = 10.0, confidence: float = 0.95) -> list[Measurement]:
    """Every G4 rule over the plan's windows, in report order, under its declared id.

    Errors, verify and health count over every window; throughput and TTFT leave the
    plan's warm-up out. A window the plan expected and the soak did not commit counts
    against every rule over windows.
    """
    absent = not_committed(windows, plan)
    later = {i: why for i, why in absent.items() if i >= plan.warmup_windows}
    judged, warm = after_warmup(windows, plan.warmup_windows)
    spread, slope = (m.model_copy(update={"note": "; ".join(t for t in (m.note, warm) if t)})
                     for m in stability(judged, spread_max, slope_max, confidence=confidence,
                                        absent=later))
    media, warnings = media_errors(windows, absent)
    ruled = [("g4.effective_duration", duration(windows, plan)),
             ("g4.request_errors", request_errors(windows, limits, absent)),
             ("g4.verify_errors", verify_errors(windows, limits, absent)),
             ("g4.media_errors", media), ("g4.critical_warnings", warnings),
             ("g4.kernel_errors", kernel_errors(windows, absent)),
             ("g4.paths_live", paths_live(windows, absent)),
             ("g4.throughput_floor", throughput_floor(judged, limits, confidence, warm,
                                                      plan.g3_throughput, absent=later)),
             ("g4.ttft_drift", ttft_drift(judged, limits, confidence, warm, absent=later)),
             ("g4.window_spread", spread), ("g4.window_slope", slope),
             ("g4.gap_time", total_gap(deviations, limits, windows, plan))]
    if plan.shortened:
        ruled = [(id, rehearsed(m, id) if id in TREND_RULES else m) for id, m in ruled]
    return [G4[id].stamp(m) for id, m in ruled]
