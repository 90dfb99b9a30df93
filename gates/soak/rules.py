"""G4 soak (DESIGN §6): the window model, the plan and its deviations. Pure: no I/O.

Times are seconds on the runner's clock (epoch seconds for the real one). A window's health
signals are HealthReadings keyed by collector name; the rules read the names below. The rules
over health readings are in gates.soak.health_rules, those over load and time in
gates.soak.load_rules.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, Field

from ..core.verdicts import SHORTENED, Cause, Deviation

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


Kind = Literal["gap", "shortened", "duration", "window"]
# The cause each kind is in a gate record (gates.core.verdicts.CAUSES says what it does).
CAUSE_OF: dict[str, Cause] = {"gap": Cause.SOAK_GAP, "shortened": Cause.SHORTENED,
                              "duration": Cause.SOAK_DURATION, "window": Cause.SOAK_WINDOW}


class SoakDeviation(BaseModel):
    """Something the soak did not do as planned: a gap (crash, reboot) or a shortened run.

    The soak's own store keeps these (with a gap's times); the gate record gets ``typed``.
    """

    kind: Kind
    seconds: float = 0.0
    start: float | None = None
    end: float | None = None
    text: str

    @property
    def typed(self) -> Deviation:
        """This deviation as a gate record holds it: its cause by its kind, not by its words."""
        return Deviation(cause=CAUSE_OF[self.kind], text=self.text)


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

    def deviations(self) -> list[SoakDeviation]:
        """The plan's own deviations: shortened below 72 h, or other than thresholds.toml."""
        out = []
        if self.shortened:
            out.append(SoakDeviation(kind="shortened", text=(
                f"{SHORTENED}; planned {span(self.duration)} of the "
                f"{span(SIGNOFF_SECONDS)} sign-off duration{self._set_by()}")))
        elif self.duration != self.nominal_duration:
            out.append(SoakDeviation(kind="duration", text=(
                f"duration {span(self.duration)} instead of thresholds.toml's "
                f"{span(self.nominal_duration)}{self._set_by()}")))
        if self.window != self.nominal_window:
            out.append(SoakDeviation(kind="window", text=f"window {self.window:g} s instead of "
                                 f"thresholds.toml's {self.nominal_window:g} s"))
        return out


def gap(last_end: float, resumed_at: float) -> SoakDeviation:
    """The deviation for a resume: the time between the last committed window and now."""
    length = max(0.0, resumed_at - last_end)
    return SoakDeviation(kind="gap", seconds=length, start=last_end, end=resumed_at,
                     text=f"not running for {length:.0f} s (crash or reboot); resumed after the "
                          f"last committed window; excluded from the effective duration")


def effective_seconds(windows: list[WindowRecord]) -> float:
    """Time under load: the sum of committed windows, gaps excluded."""
    return math.fsum(w.seconds for w in windows)
