"""Coverage: which of a rule's inputs were read, which failed and why. Pure: no I/O.

A rule over windows, repetitions, pairs, ranks or files judges only what it read; what it
could not read counts against it, never as a gap in the evidence. Coverage is PASS only at
full coverage; below the rule's declared minimum share it is ERROR naming what was not read;
between the minimum and full it is MARGINAL with the share. A FAIL the rule found in what it
read stands: coverage only caps a better outcome, it never lifts a worse one.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field

from .verdict import SEVERITY, Covered, Measurement, Outcome

NAMED = 5  # units named in a description; the rest are counted
NO_READING = "no reading"  # why, for an expected unit neither read nor failed


def _label(unit: Hashable) -> str:
    return f"#{unit}" if isinstance(unit, int) else str(unit)


@dataclass(frozen=True, init=False)
class Coverage:
    """Units expected, those read, and those that failed with why; unread ones are missing.

    ``what`` is the plural noun of a unit ("windows", "repetitions"): the description reads
    "windows read 6 of 8 (75 %); not read: #3 ENOSPC (28); #4 …".
    """

    expected: tuple[Hashable, ...]
    read: frozenset[Hashable] = frozenset()
    failed: Mapping[Hashable, str] = field(default_factory=dict)
    what: str = "units"

    def __init__(self, expected: Iterable[Hashable], read: Iterable[Hashable] = (),
                 failed: Mapping[Hashable, str] | None = None, what: str = "units"):
        units, done, bad = tuple(expected), frozenset(read), dict(failed or {})
        if len(set(units)) != len(units):
            raise ValueError(f"{what}: a unit is expected twice in {units}")
        stray = (done | set(bad)) - set(units)
        if stray:
            raise ValueError(f"{what}: {sorted(map(_label, stray))} read or failed but not "
                             "expected")
        if both := done & set(bad):
            raise ValueError(f"{what}: {sorted(map(_label, both))} both read and failed")
        for name, value in (("expected", units), ("read", done), ("failed", bad),
                            ("what", what)):
            object.__setattr__(self, name, value)

    @property
    def missing(self) -> dict[Hashable, str]:
        """Every expected unit not read, in expected order, with why (failed or no reading)."""
        return {u: self.failed.get(u, NO_READING) for u in self.expected if u not in self.read}

    @property
    def share(self) -> float:
        """The share of expected units read, 0 to 1 (0 where nothing was expected)."""
        return len(self.read) / len(self.expected) if self.expected else 0.0

    @property
    def complete(self) -> bool:
        """Every expected unit read; nothing expected is never complete (nothing measured)."""
        return bool(self.expected) and len(self.read) == len(self.expected)

    def covered(self) -> Covered:
        """What the record carries: the counts, and the first NAMED units not read with why
        (the rest counted)."""
        missing = [f"{_label(u)} {why}" for u, why in self.missing.items()]
        more = [f"and {len(missing) - NAMED} more"] if len(missing) > NAMED else []
        return Covered(what=self.what, expected=len(self.expected), read=len(self.read),
                       missing=missing[:NAMED] + more)

    def describe(self) -> str:
        """One line for the report: how many were read, and which were not and why."""
        return self.covered().describe()

    def cap(self, minimum: float = 1.0) -> Outcome:
        """The best outcome this coverage allows: PASS at full, ERROR below minimum, else
        MARGINAL. minimum is a share in (0, 1]; 1 makes every gap an ERROR."""
        if not 0.0 < minimum <= 1.0:
            raise ValueError(f"a minimum coverage is a share in (0, 1], not {minimum}")
        if self.complete:
            return Outcome.PASS
        if not self.read or self.share < minimum:
            return Outcome.ERROR
        return Outcome.MARGINAL

    def judge(self, measured: Measurement, minimum: float = 1.0) -> Measurement:
        """The rule's measurement over what was read, capped by this coverage and showing it.

        The coverage line leads the evidence. The outcome is the more severe of the rule's own
        and the cap, so a FAIL found in the units read stands: use it for rules whose FAIL
        more units could not undo (counts that only grow), and cap before judging elsewhere.
        """
        cap = self.cap(minimum)
        # Full coverage caps nothing: a REPORTED figure (ranked after PASS) stays REPORTED.
        worse = measured.outcome if cap is Outcome.PASS else min(measured.outcome, cap,
                                                                 key=SEVERITY.index)
        note = measured.note
        if worse is not measured.outcome and cap is Outcome.ERROR:
            note = (f"{self.describe()}: a verdict needs {minimum:.0%} of {self.what} read"
                    + (f"; {note}" if note else ""))
        elif worse is not measured.outcome:
            note = (f"{self.describe()}: at least the {minimum:.0%} a verdict needs, but "
                    f"only a complete one may PASS" + (f"; {note}" if note else ""))
        return measured.model_copy(update={"outcome": worse, "note": note,
                                           "evidence": [self.describe(), *measured.evidence],
                                           "coverage": self.covered()})
