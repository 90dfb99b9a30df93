"""Declared measurements: each gate names what it measures once, by id; display names derive.

An id such as "g3.ttft_p50_reduction" is the machine key a suite, a test or the summary selects
by; a measurement taken per concurrency level carries the level beside the id (`at`), and its
display name ("TTFT p50 reduction @ concurrency 8") is derived from the declaration and never
parsed back. Asking for an id no gate declared raises, as OpenHTF's unknown measurement does.

A gate's verdict needs every measurement it declares (`Declarations.complete`): each id, at
every level its dimension (`Per`) requires for the run, unless the id only carries why a gate
could not run, or a fact of the site excuses it (`Need`). Where a declaration names that fact,
a NOT APPLICABLE for any other reason ("the tool could not run") is an ERROR. What is missing
makes the gate INCOMPLETE: one ERROR measurement naming every missing id and check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .verdict import Limit, Measurement, Outcome

INCOMPLETE = "INCOMPLETE"  # the completeness measurement's note starts so
ONE_READING = "one reading"  # a rule over a single input: read, or an ERROR
# The outcomes that say what a rule found in its inputs: a rule over many inputs gives them only
# through its Coverage, so what it could not read counts against it (issue #43).
FOUND = (Outcome.PASS, Outcome.MARGINAL, Outcome.FAIL, Outcome.REPORTED)


@dataclass(frozen=True)
class Scope:
    """What a gate ran on, for its declarations: the site (with the gate's arms), the limits."""

    site: Any
    thresholds: Any


@dataclass(frozen=True)
class Per:
    """A dimension a measurement is taken per, and the levels a complete record needs at it."""

    name: str
    levels: Callable[[Scope], Sequence[int]] | None = None  # None: any one level will do

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Need:
    """What a complete record needs of one declared id beyond being there at every level."""

    carrier: bool = False  # it only says why a gate could not run: never required
    # The fact of the site that makes the id not apply, as its reason ("" = it applies here).
    excuse: Callable[[Scope], str] | None = None


@dataclass(frozen=True)
class Declared:
    """One measurement a gate takes: its id, its title, and the dimension it is taken per."""

    id: str
    title: str
    per: str | Per = ""  # "concurrency": one measurement per level, "<title> @ concurrency N"
    form: str = "{title} @ {per} {at}"  # the display name of one level
    # What the rule is over, required of every declaration: the plural noun of its inputs
    # ("windows", "repetitions", "pairs", "ranks", "files", "hosts") or ONE_READING. A rule
    # over many gives what it found only with their Coverage (stamp refuses it otherwise).
    over: str = field(kw_only=True)

    def name(self, at: int | None = None) -> str:
        """The display name, for a level when the measurement is taken per level."""
        if at is None:  # a per-level measurement whose level is unknown (an early ERROR)
            return self.title
        if not self.per:
            raise ValueError(f"measurement {self.id} is taken once: it has no {at!r} level")
        return self.form.format(title=self.title, per=self.per, at=at)

    def stamp(self, m: Measurement, at: int | None = None) -> Measurement:
        """The measurement under this declaration's id, level and derived name.

        ValueError for what a rule over many inputs found without their coverage, or for a PASS
        over fewer than all of them: a rule cannot be written that drops what it could not read.
        """
        if self.over != ONE_READING and m.outcome in FOUND:
            if m.coverage is None:
                raise ValueError(f"{self.id} is a rule over {self.over}: judge what it found "
                                 "through their Coverage (gates.core.verdicts), so those it "
                                 "could not read count against it")
            if m.coverage.what != self.over:
                raise ValueError(f"{self.id} is a rule over {self.over}, not over "
                                 f"{m.coverage.what}")
        if m.outcome is Outcome.PASS and m.coverage is not None and not m.coverage.complete:
            raise ValueError(f"{self.id}: a PASS over {m.coverage.describe()}")
        return m.model_copy(update={"id": self.id, "at": at, "name": self.name(at)})

    def measured(self, value: float, limit: Limit, *, at: int | None = None,
                 **kw) -> Measurement:
        """A value judged against its limit (Measurement.measured under this id)."""
        return self.stamp(Measurement.measured(self.name(at), value, limit, **kw), at)

    def error(self, reason: str, limit: Limit | None = None, *, at: int | None = None,
              **kw) -> Measurement:
        """Could not be measured (Measurement.error under this id)."""
        return self.stamp(Measurement.error(self.name(at), reason, limit, **kw), at)

    def blocked(self, reason: str, *, at: int | None = None) -> Measurement:
        """Not measured because an upstream gate did not pass."""
        return self.stamp(Measurement.blocked(self.name(at), reason), at)

    def reported(self, value: float, unit: str, *, at: int | None = None,
                 note: str = "") -> Measurement:
        """A figure shown for the record, held against no limit."""
        return self.stamp(Measurement.reported(self.name(at), value, unit, note=note), at)

    def not_applicable(self, reason: str, *, at: int | None = None) -> Measurement:
        """Does not apply to this site, with the reason."""
        return self.stamp(Measurement.not_applicable(self.name(at), reason), at)


class Declarations:
    """A gate's declared measurements, looked up by id; an unknown id is an error.

    Each gate also declares "<gate>.complete": the carrier of what a run left unmeasured.
    """

    def __init__(self, gate: str, declared: Iterable[Declared]):
        self.gate = gate
        self.by_id: dict[str, Declared] = {}
        self.needs: dict[str, Need] = {}
        complete = Declared(f"{gate}.complete", "Every declared measurement taken",
                            over="declared measurements")
        for d in [*declared, complete]:
            if not d.id.startswith(f"{gate}.") or d.id in self.by_id:
                raise ValueError(f"{d.id}: a {gate} id must start with '{gate}.' and be unique")
            self.by_id[d.id] = d
        self.require(complete.id, carrier=True)

    def require(self, id: str, carrier: bool = False,
                excuse: Callable[[Scope], str] | None = None) -> None:
        """Declare what a complete record needs of an id (the default: it, at every level)."""
        self.needs[self[id].id] = Need(carrier, excuse)

    def __getitem__(self, id: str) -> Declared:
        try:
            return self.by_id[id]
        except KeyError:
            raise KeyError(f"unknown measurement {id!r}: {self.gate} declares "
                           + ", ".join(sorted(self.by_id))) from None

    def select(self, measurements: Iterable[Measurement], *ids: str) -> list[Measurement]:
        """The measurements taken under these ids, in their order; every id must be declared."""
        wanted = {self[i].id for i in ids}
        return [m for m in measurements if m.id in wanted]

    def by_level(self, measurements: Iterable[Measurement], id: str) -> dict[int, float]:
        """The measured values of a per-level id, keyed by level (unmeasured ones left out)."""
        return {m.at: m.value for m in self.select(measurements, id)
                if m.at is not None and m.value is not None}

    def required(self, scope: Scope) -> list[tuple[Declared, int | None]]:
        """Every (declaration, level) a complete record of this gate needs on this site; the
        level is None where any one will do."""
        out: list[tuple[Declared, int | None]] = []
        for d in self.by_id.values():
            need = self.needs.get(d.id, Need())
            if need.carrier or (need.excuse is not None and need.excuse(scope)):
                continue
            levels = d.per.levels(scope) if isinstance(d.per, Per) and d.per.levels else None
            out += [(d, level) for level in levels] if levels is not None else [(d, None)]
        return out

    def _excused(self, m: Measurement, scope: Scope) -> Measurement:
        """A NOT APPLICABLE the site does not excuse is an ERROR: it could not be measured."""
        need = self.needs.get(m.id or "")
        if m.outcome is not Outcome.NOT_APPLICABLE or need is None or need.excuse is None \
                or need.excuse(scope):
            return m
        return m.model_copy(update={"outcome": Outcome.ERROR, "note": (
            f"not measured, although it applies to this site: {m.note}")})

    def complete(self, measurements: Iterable[Measurement], scope: Scope,
                 not_run: Sequence[str] = ()) -> list[Measurement]:
        """The measurements a record holds: unexcused NOT APPLICABLEs turned ERROR, and one
        INCOMPLETE ERROR naming every required id (or level) missing and every check not run.
        """
        out = [self._excused(m, scope) for m in measurements]
        taken = {(m.id, m.at) for m in out} | {(m.id, None) for m in out}
        # A carrier that says the gate was BLOCKED (its upstream, its workload) stands for every
        # measurement the gate never attempted: the verdict is BLOCKED, not INCOMPLETE.
        blocked = any(m.outcome is Outcome.BLOCKED and self.needs.get(m.id or "", Need()).carrier
                      for m in out)
        missing = [] if blocked else [d.id if level is None else f"{d.id} @ {d.per} {level}"
                                      for d, level in self.required(scope)
                                      if (d.id, level) not in taken]
        parts = ([f"not measured: {', '.join(missing)}"] if missing else []) + (
            [f"checks not run: {', '.join(not_run)}"] if not_run else [])
        if parts:
            out.append(self[f"{self.gate}.complete"].error(
                f"{INCOMPLETE}: " + "; ".join(parts) + " (a gate's verdict needs every "
                "measurement it declares: run its checks whole)"))
        return out
