"""G4 rules over load and time: request errors, gaps, duration; every rule in report order. Pure.

``soak_measurements`` puts them together with the trend rules (gates.soak.trends) and the
health-signal rules (gates.soak.health_rules), in report order.
"""

from __future__ import annotations

import math

from ..core.configuration import G4Limits
from ..core.verdicts import G4, SHORTENED, Limit, Measurement, Outcome
from .health_rules import kernel_errors, media_errors, paths_live, verify_errors
from .rules import Deviation, SoakPlan, WindowRecord, effective_seconds
from .spans import after_warmup
from .trends import stability, throughput_floor, ttft_drift


def request_errors(windows: list[WindowRecord], limits: G4Limits) -> Measurement:
    """Failed requests (errors and timeouts) over the whole soak <= the ceiling."""
    total = sum(w.errors for w in windows)
    bad = [f"window #{w.index}: {w.errors} of {w.requests} failed ({w.timeouts} timeouts)"
           for w in windows if w.errors]
    return Measurement.measured(
        G4["g4.request_errors"].title, total,
        Limit.at_most(limits.request_errors_max, "requests", key="g4.request_errors_max"),
        evidence=bad[:20], note=f"{sum(w.requests for w in windows)} requests, "
                                f"{sum(w.timeouts for w in windows)} timeouts")


def total_gap(deviations: list[Deviation], limits: G4Limits) -> Measurement:
    """Total time the soak was not running <= gap_max."""
    gaps = [d for d in deviations if d.kind == "gap"]
    return Measurement.measured(G4["g4.gap_time"].title, math.fsum(d.seconds for d in gaps),
                                Limit.at_most(limits.gap_max, "s", key="g4.gap_max"),
                                evidence=[d.text for d in gaps][:20],
                                note=f"{len(gaps)} resume(s)")


def duration(windows: list[WindowRecord], plan: SoakPlan) -> Measurement:
    """Effective duration (gaps excluded) >= the planned duration; shortened runs say so."""
    note = f"{len(windows)} of {plan.windows} windows committed"
    if plan.shortened:
        note += f"; {SHORTENED}"
    return Measurement.measured(G4["g4.effective_duration"].title, effective_seconds(windows),
                                Limit.at_least(plan.duration - 1e-6, "s", key="g4.duration"),
                                note=note)


TREND_RULES = ("g4.throughput_floor", "g4.ttft_drift", "g4.window_spread", "g4.window_slope")
REHEARSED = ("a shortened rehearsal judges only what its minutes can decide: this trend rule's "
             "interval crosses its limit, so it is reported, not judged (a decided PASS or FAIL "
             "stands; a rehearsal never counts towards a sign-off, the full soak decides)")


def rehearsed(measured: Measurement) -> Measurement:
    """A shortened soak's undecided trend rule: REPORTED with its limit, interval and reason.

    Measured on this VM (bench/README.md §7, bench/soak_risk.py on recorded windows): a
    2-minute rehearsal PASSes a drift-free soak's drift 0.4 % of the time and a steady floor 8 %
    (48 minutes of 20-second windows: 80 % and 99 %), so its trend rules are MARGINAL whatever
    the array does; a MARGINAL there says nothing about the array and would
    end every rehearsal the same way. Only MARGINAL changes: a rehearsal that could decide
    keeps its PASS or FAIL, and the rehearsal mark keeps the record from any ACCEPT.
    """
    if measured.outcome is not Outcome.MARGINAL:
        return measured
    return measured.model_copy(update={"outcome": Outcome.REPORTED,
                                       "note": f"{REHEARSED}; {measured.note}"})


def soak_measurements(windows: list[WindowRecord], deviations: list[Deviation], plan: SoakPlan,
                      limits: G4Limits, spread_max: float = 20.0, slope_max: float = 10.0,
                      confidence: float = 0.95) -> list[Measurement]:
    """Every G4 rule over the committed windows, in report order, under its declared id.

    Errors, verify and health count over every window; throughput and TTFT leave the
    plan's warm-up out.
    """
    judged, warm = after_warmup(windows, plan.warmup_windows)
    spread, slope = (m.model_copy(update={"note": "; ".join(t for t in (m.note, warm) if t)})
                     for m in stability(judged, spread_max, slope_max, confidence=confidence))
    media, warnings = media_errors(windows)
    ruled = [("g4.effective_duration", duration(windows, plan)),
             ("g4.request_errors", request_errors(windows, limits)),
             ("g4.verify_errors", verify_errors(windows, limits)),
             ("g4.media_errors", media), ("g4.critical_warnings", warnings),
             ("g4.kernel_errors", kernel_errors(windows)), ("g4.paths_live", paths_live(windows)),
             ("g4.throughput_floor", throughput_floor(judged, limits, confidence, warm,
                                                      plan.g3_throughput)),
             ("g4.ttft_drift", ttft_drift(judged, limits, confidence, warm)),
             ("g4.window_spread", spread), ("g4.window_slope", slope),
             ("g4.gap_time", total_gap(deviations, limits))]
    if plan.shortened:
        ruled = [(id, rehearsed(m) if id in TREND_RULES else m) for id, m in ruled]
    return [G4[id].stamp(m) for id, m in ruled]
