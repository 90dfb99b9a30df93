"""The verdict core: limits, measurements, outcomes and the gate verdict. Pure: no I/O."""

from __future__ import annotations

import enum
import math

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator


class Outcome(enum.StrEnum):
    """What one measurement, or a whole gate, came to."""

    PASS = "PASS"
    FAIL = "FAIL"
    MARGINAL = "MARGINAL"
    ERROR = "ERROR"
    BLOCKED = "BLOCKED"
    NOT_APPLICABLE = "NOT APPLICABLE"
    # A figure the record carries for the reader (G2's absolute baseline figures), held
    # against no limit: it is measured, and counts neither way in the verdict.
    REPORTED = "REPORTED"


# Failures first in every table; the order a reader needs to act on.
SEVERITY = [Outcome.FAIL, Outcome.ERROR, Outcome.BLOCKED, Outcome.MARGINAL,
            Outcome.PASS, Outcome.REPORTED, Outcome.NOT_APPLICABLE]
EXIT_CODES = {Outcome.PASS: 0, Outcome.FAIL: 1, Outcome.MARGINAL: 1,
              Outcome.ERROR: 2, Outcome.BLOCKED: 3, Outcome.NOT_APPLICABLE: 2,
              Outcome.REPORTED: 2}


def _fmt(x: float) -> str:
    # 4 significant digits, but never "2e+05" for a limit such as 200000 IO/s.
    return f"{x:.0f}" if 1e4 <= abs(x) < 1e16 else f"{x:.4g}"


class Limit(BaseModel):
    """A structured bound such as ``x >= 10.5 GB/s`` or ``0 <= x <= 10 %``."""

    model_config = ConfigDict(frozen=True)

    lo: float | None = None
    hi: float | None = None
    lo_inclusive: bool = True
    hi_inclusive: bool = True
    unit: str = ""
    # Relative limits compare against an upstream figure, e.g. "G2 TTFT p50".
    relative_to: str | None = None
    # Guard band as a fraction of the bound: a pass this close to it is MARGINAL.
    marginal: float = Field(default=0.0, ge=0.0, lt=1.0)
    key: str | None = None

    @model_validator(mode="after")
    def _has_a_bound(self) -> Limit:
        name = f"limit {self.key}" if self.key else "limit"
        if self.lo is None and self.hi is None:
            raise ValueError(f"{name} has neither a lower nor an upper bound")
        if any(b is not None and math.isnan(b) for b in (self.lo, self.hi)):
            # Every comparison with NaN is false: such a limit would pass any value.
            raise ValueError(f"{name} has a bound that is not a number (NaN)")
        if self.lo is not None and self.hi is not None and (
                self.lo > self.hi
                or (self.lo == self.hi and not (self.lo_inclusive and self.hi_inclusive))):
            raise ValueError(f"{name}: no value can pass: lower bound {self.lo} vs upper bound "
                             f"{self.hi}")
        return self

    @classmethod
    def at_least(cls, lo: float, unit: str = "", key: str | None = None, **kw) -> Limit:
        """A lower bound, inclusive unless told otherwise."""
        return cls(lo=lo, unit=unit, key=key, **kw)

    @classmethod
    def at_most(cls, hi: float, unit: str = "", key: str | None = None, **kw) -> Limit:
        """An upper bound, inclusive unless told otherwise."""
        return cls(hi=hi, unit=unit, key=key, **kw)

    def contains(self, value: float) -> bool:
        """Whether value lies within the bounds."""
        if math.isnan(value):
            return False
        below = self.lo is not None and (value < self.lo or
                                         (value == self.lo and not self.lo_inclusive))
        if below:
            return False
        return not (self.hi is not None
                    and (value > self.hi or (value == self.hi and not self.hi_inclusive)))

    def margin(self, value: float) -> float:
        """Signed distance to the nearest bound: positive inside, negative outside."""
        gaps = []
        if self.lo is not None:
            gaps.append(value - self.lo)
        if self.hi is not None:
            gaps.append(self.hi - value)
        return min(gaps)

    def _beyond(self, interval: tuple[float, float]) -> bool:
        lo, hi = min(interval), max(interval)
        return ((self.hi is not None and lo >= self.hi and not self.contains(lo))
                or (self.lo is not None and hi <= self.lo and not self.contains(hi)))

    def in_guard_band(self, value: float) -> bool:
        """Whether a passing value lies within the marginal band of a bound (a value the
        limit does not contain is in no band: it fails)."""
        return self.contains(value) and any(
            bound is not None and abs(value - bound) < self.marginal * abs(bound)
            for bound in (self.lo, self.hi))

    def judge(self, value: float, interval: tuple[float, float] | None = None) -> Outcome:
        """PASS, FAIL or MARGINAL for a point value and its optional confidence interval.

        With an interval, PASS needs all of it inside the limit and FAIL all of it beyond one
        bound: what the interval cannot tell from the limit is MARGINAL, whichever side the
        point fell on.
        """
        if interval is not None and not all(self.contains(v) for v in interval):
            return Outcome.FAIL if self._beyond(interval) else Outcome.MARGINAL
        if not self.contains(value):
            return Outcome.FAIL
        return Outcome.MARGINAL if self.in_guard_band(value) else Outcome.PASS

    def __str__(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        lo_op = "<=" if self.lo_inclusive else "<"
        hi_op = "<=" if self.hi_inclusive else "<"
        if self.lo is not None and self.hi is not None:
            text = f"{_fmt(self.lo)} {lo_op} x {hi_op} {_fmt(self.hi)}{unit}"
        elif self.lo is not None:
            text = f"x {'>=' if self.lo_inclusive else '>'} {_fmt(self.lo)}{unit}"
        else:
            text = f"x {hi_op} {_fmt(self.hi)}{unit}"
        return text + (f" (relative to {self.relative_to})" if self.relative_to else "")


class Covered(BaseModel):
    """What a rule read of its inputs, as the record carries it (gates.core.verdicts.Coverage
    makes it): so many of its windows, repetitions, pairs, ranks or files read, the rest named
    with why. A PASS needs every one read (Measurement refuses anything less)."""

    model_config = ConfigDict(frozen=True)

    what: str  # the plural noun of a unit: "windows", "repetitions", "pairs"
    expected: int = Field(ge=0)
    read: int = Field(ge=0)
    missing: list[str] = Field(default_factory=list)  # "#3 ENOSPC (28)": a unit and why

    @model_validator(mode="after")
    def _consistent(self) -> Covered:
        if self.read > self.expected:
            raise ValueError(f"{self.what}: {self.read} read of {self.expected} expected")
        return self

    @property
    def complete(self) -> bool:
        """Every expected unit read; nothing expected is never complete."""
        return self.expected > 0 and self.read == self.expected

    def describe(self) -> str:
        """One line: "pairs read 6 of 8 (75%); not read: #3 …" or "pairs read 8 of 8"."""
        head = f"{self.what} read {self.read} of {self.expected}"
        if self.complete:
            return head
        share = f" ({self.read / self.expected:.0%})" if self.expected else ""
        named = f"; not read: {'; '.join(self.missing)}" if self.missing else ""
        return head + share + named


class Measurement(BaseModel):
    """One measured figure held against its limit, with the evidence behind it."""

    name: str
    value: float | None = None
    unit: str = ""
    limit: Limit | None = None
    outcome: Outcome
    # The declared id and level (gates.core.measures) that suites and the summary select by;
    # left out of the JSON when unset, so records of undeclared checks read as before.
    id: str | None = Field(default=None, exclude_if=lambda v: v is None)
    at: int | None = Field(default=None, exclude_if=lambda v: v is None)
    interval: tuple[float, float] | None = None
    # How often, at most, the truth lies beyond one given end of the interval: for G3's gains the
    # sequential plan's risk counted over all its looks (not the stopping look's own level,
    # which the plan's stopping on it makes optimistic), so a reader can bound an order read
    # from two intervals (kvgate compare); unset for older records.
    interval_miss: float | None = Field(default=None, gt=0.0, lt=0.5,
                                        exclude_if=lambda v: v is None)
    evidence: list[str] = Field(default_factory=list)
    note: str = ""
    # Which of its inputs the rule read (Coverage.judge sets it); left out of the JSON when
    # unset, so the records of rules over one reading, and older records, read as before.
    coverage: Covered | None = Field(default=None, exclude_if=lambda v: v is None)

    @model_validator(mode="after")
    def _pass_reads_everything(self) -> Measurement:
        if self.outcome is Outcome.PASS and self.coverage is not None \
                and not self.coverage.complete:
            raise ValueError(f"{self.name}: a PASS needs every one of its {self.coverage.what} "
                             f"read, and {self.coverage.describe()}")
        return self

    @classmethod
    def measured(cls, name: str, value: float, limit: Limit, *, evidence: list[str] = (),
                 note: str = "", interval: tuple[float, float] | None = None) -> Measurement:
        """A value judged against its limit."""
        return cls(name=name, value=value, unit=limit.unit, limit=limit,
                   outcome=limit.judge(value, interval), interval=interval,
                   evidence=list(evidence), note=note)

    @classmethod
    def error(cls, name: str, reason: str, limit: Limit | None = None, *,
              evidence: list[str] = ()) -> Measurement:
        """A figure that could not be measured; the reason says why."""
        return cls(name=name, unit=limit.unit if limit else "", limit=limit,
                   outcome=Outcome.ERROR, note=reason, evidence=list(evidence))

    @classmethod
    def blocked(cls, name: str, reason: str, limit: Limit | None = None) -> Measurement:
        """A figure not measured because an upstream gate did not pass."""
        return cls(name=name, limit=limit, unit=limit.unit if limit else "",
                   outcome=Outcome.BLOCKED, note=reason)

    @classmethod
    def reported(cls, name: str, value: float, unit: str, *, note: str = "") -> Measurement:
        """A measured figure shown for the record, held against no limit."""
        if not math.isfinite(value):
            raise ValueError(f"{name}: a reported figure must be finite, not {value}")
        return cls(name=name, value=value, unit=unit, outcome=Outcome.REPORTED, note=note)

    @classmethod
    def not_applicable(cls, name: str, reason: str) -> Measurement:
        """A check that does not apply to this site, with the reason."""
        return cls(name=name, outcome=Outcome.NOT_APPLICABLE, note=reason)

    @computed_field  # in the JSON too: a buyer's tools read margins without re-deriving them
    @property
    def margin(self) -> float | None:
        """Distance to the limit in the measurement's unit (positive = inside)."""
        if self.value is None or self.limit is None:
            return None
        return self.limit.margin(self.value)


def gate_verdict(outcomes: list[Outcome]) -> Outcome:
    """The gate verdict from its measurements' outcomes; nothing measured is never a PASS."""
    # Outcome(...) so that plain strings ("NOT APPLICABLE") are compared as outcomes too.
    counted = [o for o in map(Outcome, outcomes)
               if o not in (Outcome.NOT_APPLICABLE, Outcome.REPORTED)]
    for worst in (Outcome.FAIL, Outcome.ERROR, Outcome.BLOCKED, Outcome.MARGINAL):
        if worst in counted:
            return worst
    return Outcome.PASS if counted else Outcome.ERROR


def failures_first(measurements: list[Measurement]) -> list[Measurement]:
    """Measurements ordered for a reader: FAIL, ERROR, BLOCKED, MARGINAL, PASS, N/A."""
    return sorted(measurements, key=lambda m: SEVERITY.index(m.outcome))
