"""G4 soak (DESIGN §6): the window model and the rules over committed windows. Pure: no I/O.

Times are seconds on the runner's clock (epoch seconds for the real one). A window's health
signals are HealthReadings keyed by collector name; the rules read the names below.
"""

from __future__ import annotations

import math
import statistics
from typing import Literal

from pydantic import BaseModel, Field

from ._settings import G4Limits
from ._steady import SteadyStateUnavailable, least_squares_slope, round_averages
from ._verdict import Limit, Measurement

GATE = "g4"
SHORTENED = "shortened: not a 72-hour sign-off"
# Collector names the rules read (gates._health produces readings under these names).
VERIFY, SMART, KERNEL, PATHS, PROCESS, FREE_SPACE = (
    "fio_verify", "smart", "kernel_log", "nvme_paths", "process", "free_space")
HOUR = 3600.0

Status = Literal["ok", "alert", "not applicable", "error"]


class HealthReading(BaseModel):
    """One collector's reading for one window; N/A and error readings say why."""

    status: Status = "ok"
    values: dict[str, float] = Field(default_factory=dict)
    reason: str = ""
    details: list[str] = Field(default_factory=list)  # e.g. verify offsets, kernel lines

    @classmethod
    def not_applicable(cls, reason: str) -> HealthReading:
        """A collector that cannot apply here, with the reason."""
        return cls(status="not applicable", reason=reason)

    @classmethod
    def failed(cls, reason: str) -> HealthReading:
        """A collector that should apply but could not read its signal this window."""
        return cls(status="error", reason=reason)


class WindowRecord(BaseModel):
    """One committed window: load figures and every health reading."""

    index: int = Field(ge=0)
    start: float
    end: float
    requests: int = 0
    errors: int = 0  # every request that did not end ok (timeouts included)
    timeouts: int = 0
    output_tokens: int = 0
    throughput: float | None = None  # output tokens/s over the window's wall time
    ttft_p50: float | None = None  # seconds
    ttft_p99: float | None = None
    health: dict[str, HealthReading] = Field(default_factory=dict)

    @property
    def seconds(self) -> float:
        """The window's length on the clock."""
        return self.end - self.start

    def value(self, collector: str, key: str) -> float | None:
        """A collector's value, None when it did not apply or failed this window."""
        reading = self.health.get(collector)
        return reading.values.get(key) if reading else None


class Deviation(BaseModel):
    """Something the run did not do as planned: a gap (crash, reboot) or a shortened run."""

    kind: Literal["gap", "shortened", "window"]
    seconds: float = 0.0
    start: float | None = None
    end: float | None = None
    text: str


class SoakPlan(BaseModel):
    """What a soak run was asked to do; stored once so that a resume runs the same plan."""

    run_id: str
    duration: float = Field(gt=0)
    window: float = Field(gt=0)
    nominal_duration: float = 72 * HOUR  # thresholds.toml g4.duration
    nominal_window: float = 300.0
    g3_throughput: float | None = None  # output tok/s at the G3 operating point
    started: float | None = None  # clock time the soak began (a crash in window 0 is a gap)

    @property
    def windows(self) -> int:
        """Windows the run must commit (a partial last window counts as a whole one)."""
        return max(1, math.ceil(self.duration / self.window - 1e-9))

    @property
    def shortened(self) -> bool:
        """Whether the duration is below thresholds.toml's: a rehearsal, not a sign-off."""
        return self.duration < self.nominal_duration

    def deviations(self) -> list[Deviation]:
        """The plan's own deviations from thresholds.toml."""
        out = []
        if self.shortened:
            out.append(Deviation(kind="shortened", text=f"{SHORTENED} (ran {self.duration:g} s "
                                 f"of the {self.nominal_duration:g} s in thresholds.toml)"))
        if self.window != self.nominal_window:
            out.append(Deviation(kind="window", text=f"window {self.window:g} s instead of "
                                 f"thresholds.toml's {self.nominal_window:g} s"))
        return out


def gap(last_end: float, resumed_at: float) -> Deviation:
    """The deviation for a resume: the time between the last committed window and now."""
    length = max(0.0, resumed_at - last_end)
    return Deviation(kind="gap", seconds=length, start=last_end, end=resumed_at,
                     text=f"not running for {length:.0f} s (crash or reboot); resumed after the "
                          f"last committed window; excluded from the effective duration")


def effective_seconds(windows: list[WindowRecord]) -> float:
    """Time under load: the sum of committed windows, gaps excluded."""
    return math.fsum(w.seconds for w in windows)


# ---- rules ------------------------------------------------------------------------------

def _readings(windows: list[WindowRecord], name: str) -> list[tuple[WindowRecord, HealthReading]]:
    return [(w, w.health[name]) for w in windows if name in w.health]


def _unmeasured(name: str, pairs: list[tuple[WindowRecord, HealthReading]],
                what: str) -> Measurement | None:
    """N/A (with the collector's reason) or ERROR when no window has a usable reading."""
    if any(r.status in ("ok", "alert") for _, r in pairs):
        return None
    if not pairs:
        return Measurement.error(name, f"no window has a {what} reading")
    failed = [r for _, r in pairs if r.status == "error"]
    if failed:
        return Measurement.error(name, f"{what} could not be read in any window: "
                                       f"{failed[0].reason}")
    return Measurement.not_applicable(name, pairs[0][1].reason)


def _gaps_in(name: str, pairs: list[tuple[WindowRecord, HealthReading]]) -> list[str]:
    bad = [w.index for w, r in pairs if r.status == "error"]
    return [f"{name}: not read in {len(bad)} window(s), first #{bad[0]}"] if bad else []


def request_errors(windows: list[WindowRecord], limits: G4Limits) -> Measurement:
    """Failed requests (errors and timeouts) over the whole soak <= the ceiling."""
    total = sum(w.errors for w in windows)
    bad = [f"window #{w.index}: {w.errors} of {w.requests} failed ({w.timeouts} timeouts)"
           for w in windows if w.errors]
    return Measurement.measured(
        "Soak request errors", total,
        Limit.at_most(limits.request_errors_max, "requests", key="g4.request_errors_max"),
        evidence=bad[:20], note=f"{sum(w.requests for w in windows)} requests, "
                                f"{sum(w.timeouts for w in windows)} timeouts")


def verify_errors(windows: list[WindowRecord], limits: G4Limits) -> Measurement:
    """fio verify=crc32c failures over the whole soak <= verify_errors_max."""
    name, pairs = "fio verify errors", _readings(windows, VERIFY)
    if (early := _unmeasured(name, pairs, "fio verify")) is not None:
        return early
    total = sum(r.values.get("verify_errors", 0) for _, r in pairs)
    offsets = [f"window #{w.index}: {d}" for w, r in pairs for d in r.details]
    passes = sum(r.status in ("ok", "alert") for _, r in pairs)
    return Measurement.measured(
        name, total, Limit.at_most(limits.verify_errors_max, "errors",
                                   key="g4.verify_errors_max"),
        evidence=offsets[:20] + _gaps_in("fio verify", pairs),
        note=f"{passes} write-then-verify passes")


def media_errors(windows: list[WindowRecord]) -> list[Measurement]:
    """No new SMART media errors and no critical warning raised during the soak."""
    names = ("New NVMe media errors", "NVMe critical warnings raised")
    pairs = _readings(windows, SMART)
    if (early := _unmeasured(names[0], pairs, "SMART")) is not None:
        return [early, early.model_copy(update={"name": names[1]})]
    read = [(w, r) for w, r in pairs if r.status in ("ok", "alert")]
    first, last = read[0][1].values, read[-1][1].values
    # The first reading's delta is against the snapshot taken before window 0 (or resume).
    base = first.get("media_errors", 0) - first.get("media_errors_delta", 0)
    new = last.get("media_errors", 0) - base
    logs = last.get("error_log_entries", 0) - (first.get("error_log_entries", 0)
                                               - first.get("error_log_entries_delta", 0))
    warned = [w.index for w, r in read if r.values.get("critical_warning", 0)]
    gaps = _gaps_in("SMART", pairs)
    temps = [r.values["temperature_max_c"] for _, r in read if "temperature_max_c" in r.values]
    evidence = [f"error-log entries +{logs:.0f} (not judged: nvme-cli's own queries add some)",
                *([f"temperature {min(temps):.0f}-{max(temps):.0f} °C"] if temps else []), *gaps]
    zero = "DESIGN §6: none allowed, not configurable"
    return [Measurement.measured(names[0], new, Limit.at_most(0, "errors"), evidence=evidence,
                                 note=zero),
            Measurement.measured(names[1], len(warned), Limit.at_most(0, "windows"), note=zero,
                                 evidence=[f"critical warning in windows {warned[:20]}"]
                                 if warned else [])]


def kernel_errors(windows: list[WindowRecord]) -> Measurement:
    """No NVMe timeouts, resets, reconnects, I/O errors or XFS errors in the kernel log."""
    name, pairs = "Kernel storage errors", _readings(windows, KERNEL)
    if (early := _unmeasured(name, pairs, "kernel log")) is not None:
        return early
    hits = sum(r.values.get("hits", 0) for _, r in pairs)
    lines = [f"window #{w.index}: {d}" for w, r in pairs for d in r.details]
    return Measurement.measured(name, hits, Limit.at_most(0, "lines"),
                                evidence=lines[:20] + _gaps_in("kernel log", pairs),
                                note="NVMe timeouts/resets/reconnects, I/O errors, XFS errors; "
                                     "DESIGN §6: none allowed")


def paths_live(windows: list[WindowRecord]) -> Measurement:
    """Every NVMe-oF path live at the end of every window."""
    name, pairs = "NVMe-oF paths live", _readings(windows, PATHS)
    if (early := _unmeasured(name, pairs, "NVMe-oF path")) is not None:
        return early
    down = [w.index for w, r in pairs if r.status in ("ok", "alert")
            and r.values.get("live", 0) < r.values.get("total", 0)]
    return Measurement.measured(name, len(down), Limit.at_most(0, "windows"),
                                evidence=[f"a path was down in windows {down[:20]}"] if down
                                else _gaps_in("NVMe-oF paths", pairs))


def throughput_floor(windows: list[WindowRecord], limits: G4Limits,
                     g3_throughput: float | None) -> Measurement:
    """Every window's output throughput >= the floor (% of G3's)."""
    name = "Lowest window throughput"
    if not g3_throughput or g3_throughput <= 0:
        return Measurement.error(name, "no G3 output throughput to hold the windows against")
    floor = limits.throughput_floor / 100 * g3_throughput
    limit = Limit.at_least(floor, "tok/s", key="g4.throughput_floor",
                           relative_to=f"{limits.throughput_floor:g} % of G3's "
                                       f"{g3_throughput:.4g} tok/s")
    if not windows:
        return Measurement.error(name, "no committed window", limit)
    rates = [(w.throughput or 0.0, w.index) for w in windows]
    below = [f"window #{i}: {t:.4g} tok/s" for t, i in rates if t < floor]
    return Measurement.measured(name, min(rates)[0], limit, evidence=below[:20],
                                note=f"{len(below)} of {len(windows)} windows below the floor")


def drift_spans(windows: list[WindowRecord]) -> tuple[list[WindowRecord], list[WindowRecord], str]:
    """The first and last hour of effective time (1/6 of the run each below 2 h), and a note."""
    total = effective_seconds(windows)
    span, note = HOUR, "first hour vs last hour"
    if total < 2 * HOUR:
        span = total / 6
        note = (f"run shorter than 2 h: first 1/6 vs last 1/6 of the run ({span:.0f} s each), "
                "not hours")
    first, last, at = [], [], 0.0
    for w in windows:
        if at < span:
            first.append(w)
        if at + w.seconds > total - span:
            last.append(w)
        at += w.seconds
    return first, last, note


def ttft_drift(windows: list[WindowRecord], limits: G4Limits) -> Measurement:
    """TTFT p50 drift, last span vs first, within ±ttft_drift_max (median of window p50s)."""
    name = "TTFT p50 drift"
    limit = Limit(lo=-limits.ttft_drift_max, hi=limits.ttft_drift_max, unit="%",
                  key="g4.ttft_drift_max")
    first, last, note = drift_spans(windows)
    a = [w.ttft_p50 for w in first if w.ttft_p50 is not None]
    b = [w.ttft_p50 for w in last if w.ttft_p50 is not None]
    if not a or not b:
        return Measurement.error(name, f"no TTFT in the {'first' if not a else 'last'} span "
                                       f"({note})", limit)
    early, late = statistics.median(a), statistics.median(b)
    # Both directions count: a soak's point is that the operating point does not move.
    return Measurement.measured(name, (late - early) / early * 100, limit, note=note,
                                evidence=[f"median window TTFT p50: {early * 1e3:.4g} ms "
                                          f"({len(a)} windows) -> {late * 1e3:.4g} ms "
                                          f"({len(b)} windows)"])


def stability(windows: list[WindowRecord], spread_max: float = 20.0, slope_max: float = 10.0,
              keys: tuple[str, str] = ("g1.steady_state_spread_max",
                                       "g1.steady_state_slope_max")) -> list[Measurement]:
    """SNIA spread and slope over 5 rounds of per-window throughput (gates._steady arithmetic)."""
    names = ("Window throughput spread (SNIA)", "Window throughput slope (SNIA)")
    limits = (Limit.at_most(spread_max, "%", key=keys[0]), Limit.at_most(slope_max, "%",
                                                                         key=keys[1]))
    try:
        rounds = round_averages([w.throughput or 0.0 for w in windows])
        mean = sum(rounds) / len(rounds)
        if mean <= 0:
            raise SteadyStateUnavailable("no output throughput in any window (mean 0)")
    except SteadyStateUnavailable as exc:
        return [Measurement.error(n, str(exc), lim) for n, lim in zip(names, limits, strict=True)]
    spread = (max(rounds) - min(rounds)) / mean * 100
    slope = abs(least_squares_slope(rounds)) * (len(rounds) - 1) / mean * 100
    evidence = [f"round averages (tok/s): {', '.join(f'{r:.4g}' for r in rounds)}"]
    return [Measurement.measured(names[0], spread, limits[0], evidence=evidence),
            Measurement.measured(names[1], slope, limits[1], evidence=evidence)]


def total_gap(deviations: list[Deviation], limits: G4Limits) -> Measurement:
    """Total time the soak was not running <= gap_max."""
    gaps = [d for d in deviations if d.kind == "gap"]
    return Measurement.measured("Total gap time", math.fsum(d.seconds for d in gaps),
                                Limit.at_most(limits.gap_max, "s", key="g4.gap_max"),
                                evidence=[d.text for d in gaps][:20],
                                note=f"{len(gaps)} resume(s)")


def duration(windows: list[WindowRecord], plan: SoakPlan) -> Measurement:
    """Effective duration (gaps excluded) >= the planned duration; shortened runs say so."""
    note = f"{len(windows)} of {plan.windows} windows committed"
    if plan.shortened:
        note += f"; {SHORTENED}"
    return Measurement.measured("Effective soak duration", effective_seconds(windows),
                                Limit.at_least(plan.duration - 1e-6, "s", key="g4.duration"),
                                note=note)


def soak_measurements(windows: list[WindowRecord], deviations: list[Deviation], plan: SoakPlan,
                      limits: G4Limits, spread_max: float = 20.0,
                      slope_max: float = 10.0) -> list[Measurement]:
    """Every G4 rule over the committed windows, in report order."""
    return [duration(windows, plan), request_errors(windows, limits),
            verify_errors(windows, limits), *media_errors(windows), kernel_errors(windows),
            paths_live(windows), throughput_floor(windows, limits, plan.g3_throughput),
            ttft_drift(windows, limits), *stability(windows, spread_max, slope_max),
            total_gap(deviations, limits)]
