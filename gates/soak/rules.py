"""G4 soak (DESIGN §6): the window model and the rules over its health readings. Pure: no I/O.

Times are seconds on the runner's clock (epoch seconds for the real one). A window's health
signals are HealthReadings keyed by collector name; the rules read the names below. The rules
over load and time are in gates.soak.load_rules.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, Field

from ..core import G4, SHORTENED, G4Limits, Limit, Measurement

GATE = "g4"
# Collector names the rules read (gates.soak.health produces readings under these names).
VERIFY, SMART, KERNEL, PATHS, PROCESS, FREE_SPACE = (
    "fio_verify", "smart", "kernel_log", "nvme_paths", "process", "free_space")
HOUR = 3600.0
# The sign-off duration (DESIGN §6): a soak planned shorter is a rehearsal, whatever its verdict.
# A constant here, not thresholds.toml's [g4] duration: that file is the performer's to edit,
# and a soak held against it would look full at whatever length the file was edited to.
SIGNOFF_SECONDS = 72 * HOUR  # 259,200 s

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

    kind: Literal["gap", "shortened", "duration", "window"]
    seconds: float = 0.0
    start: float | None = None
    end: float | None = None
    text: str


def span(seconds: float) -> str:
    """A duration for people, with its exact seconds: "2 min (120 s)", "72 h (259,200 s)"."""
    for unit, factor in (("h", HOUR), ("min", 60.0)):
        if seconds >= factor:
            return f"{seconds / factor:.4g} {unit} ({seconds:,.10g} s)"
    return f"{seconds:.4g} s"


class StartOptions(BaseModel):
    """The run options a soak started with: `kvgate soak resume` continues with the same ones."""

    force: bool = False  # --force: run past an upstream gate that did not pass
    site: str = ""  # the site file it read (absolute); "" for kvgate's embedded default
    thresholds: str = ""
    metrics_port: int | None = None  # --soak-metrics-port
    checklist_id: str = ""


class SoakPlan(BaseModel):
    """What a soak run was asked to do; stored once so that a resume runs the same plan."""

    run_id: str
    duration: float = Field(gt=0)  # the effective planned duration, whatever set it
    window: float = Field(gt=0)
    # The first windows the throughput and TTFT rules leave out; 0 in plans stored before it.
    warmup_windows: int = Field(default=0, ge=0)
    duration_source: str = ""  # what set the duration, e.g. "thresholds.toml [g4] duration"
    nominal_duration: float = SIGNOFF_SECONDS  # thresholds.toml g4.duration
    nominal_window: float = 300.0
    g3_throughput: float | None = None  # output tok/s at the G3 operating point
    started: float | None = None  # clock time the soak began (a crash in window 0 is a gap)
    started_with: StartOptions = Field(default_factory=StartOptions)

    @property
    def windows(self) -> int:
        """Windows the run must commit (a partial last window counts as a whole one)."""
        return max(1, math.ceil(self.duration / self.window - 1e-9))

    @property
    def shortened(self) -> bool:
        """Below the 72 h sign-off duration, whatever set it: a rehearsal, not a sign-off.

        Decided here and only here (the status, the duration rule, the deviation and the
        report's banner all read it); never against thresholds.toml, which can be edited.
        """
        return self.duration < SIGNOFF_SECONDS

    def _set_by(self) -> str:
        return f", set by {self.duration_source}" if self.duration_source else ""

    def headline(self) -> str:
        """The G4 report's headline: the planned duration against the sign-off duration."""
        of = "of" if self.shortened else "against"
        return (f"Soak of {span(self.duration)} {of} the {SIGNOFF_SECONDS / HOUR:g} h sign-off "
                f"duration: {'shortened' if self.shortened else 'full length'}{self._set_by()}")

    def deviations(self) -> list[Deviation]:
        """The plan's own deviations: shortened below 72 h, or other than thresholds.toml."""
        out = []
        if self.shortened:
            out.append(Deviation(kind="shortened", text=(
                f"{SHORTENED}; planned {span(self.duration)} of the "
                f"{span(SIGNOFF_SECONDS)} sign-off duration{self._set_by()}")))
        elif self.duration != self.nominal_duration:
            out.append(Deviation(kind="duration", text=(
                f"duration {span(self.duration)} instead of thresholds.toml's "
                f"{span(self.nominal_duration)}{self._set_by()}")))
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


# ---- rules over the health readings -----------------------------------------------------

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


def verify_errors(windows: list[WindowRecord], limits: G4Limits) -> Measurement:
    """fio verify=crc32c failures over the whole soak <= verify_errors_max."""
    name, pairs = G4["g4.verify_errors"].title, _readings(windows, VERIFY)
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
    names = (G4["g4.media_errors"].title, G4["g4.critical_warnings"].title)
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
    name, pairs = G4["g4.kernel_errors"].title, _readings(windows, KERNEL)
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
    name, pairs = G4["g4.paths_live"].title, _readings(windows, PATHS)
    if (early := _unmeasured(name, pairs, "NVMe-oF path")) is not None:
        return early
    down = [w.index for w, r in pairs if r.status in ("ok", "alert")
            and (r.values.get("live", 0) < r.values.get("total", 0)
                 or not r.values.get("total", 0))]
    return Measurement.measured(name, len(down), Limit.at_most(0, "windows"),
                                evidence=[f"a path was down in windows {down[:20]}"] if down
                                else _gaps_in("NVMe-oF paths", pairs))
