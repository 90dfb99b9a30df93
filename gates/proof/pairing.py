"""Two scrapes paired series by series: how much a series the proof reads moved in the probe, or
why that cannot be said. Pure.

The rules (README, "The storage-read proof"): names compare format-normalised (':' and '_'
alike: prometheus/client_python#1177; a counter's "_total" optional: OpenMetrics adds it where
the text format and the Rust crate may not); a series must be in both scrapes — absent from
`before` only as a new child of a family `before` holds with the same label names, or of a
family the engine creates on first use when `before` is provably a scrape of the same engine;
declared TYPEs agree (untyped, unknown and undeclared are one); both values are finite counts;
a fall, a series' start time that moved, or the engine's start time that moved is a restart:
an ERROR unless the protocol expects one between the scrapes, and then the engine's start time
must show it and every series counts from the restart.
"""

from __future__ import annotations

import math

from .promtext import MetricSet, Sample

START_TIME = "process_start_time_seconds"  # prometheus_client / Rust prometheus process collector
_LOOSE = ("untyped", "unknown")


class PairingError(ValueError):
    """A series the proof reads whose delta cannot be taken; the message names it."""


def canonical(name: str) -> str:
    """A sample name as both formats and both colon spellings give it: ':' as '_', no "_total"."""
    return name.replace(":", "_").removesuffix("_total")


def _key(s: Sample) -> tuple[str, tuple[tuple[str, str], ...]]:
    return canonical(s.name), tuple(sorted(s.labels.items()))


def _starts(m: MetricSet) -> dict:
    """Start times by series: OpenMetrics _created apart, text-format *_created gauges."""
    out = {}
    for s in [*m.created, *(x for x in m.samples if x.name.endswith("_created"))]:
        name = s.name.removesuffix("_created")
        out[(canonical(name), tuple(sorted(s.labels.items())))] = s.value
    return out


def _count(s: Sample, when: str) -> float:
    if not math.isfinite(s.value) or s.value < 0:
        raise PairingError(f"{s.key} = {s.value!r} in the {when} scrape: not a count (a counter "
                           "is finite and never negative)")
    return s.value


class Pairing:
    """The before and after scrapes of one phase, indexed for deltas; before None = totals."""

    def __init__(self, before: MetricSet | None, after: MetricSet, restart_expected: bool = False):
        self.before, self.after, self.restart_expected = before, after, restart_expected
        self.same_engine = False  # set by the caller: before shares a series of its families
        if before is None:
            self.old, self.shapes, self.restart = {}, {}, ""
            return
        self.old = {_key(s): s for s in before.samples}
        self.shapes: dict[str, set[frozenset[str]]] = {}
        for s in before.samples:
            self.shapes.setdefault(canonical(s.name), set()).add(frozenset(s.labels))
        # Families before declares without a series yet: labelled, no child incremented.
        self.declared = {canonical(n) for n in before.types}
        self.starts = (_starts(before), _starts(after))
        self.restart = self._restart()

    def _restart(self) -> str:
        was = {_key(s): s.value for s in self.before.select(START_TIME)}
        moved = [f"{s.key} {was[_key(s)]:.0f} -> {s.value:.0f}" for s in
                 self.after.select(START_TIME) if _key(s) in was and s.value != was[_key(s)]]
        return "; ".join(moved)

    def has(self, s: Sample) -> bool:
        """Whether the before scrape holds this series (names normalised)."""
        return _key(s) in self.old

    def delta(self, s: Sample, lazy: bool = False) -> float:
        """How much s rose between the scrapes; PairingError naming it when that is unknown."""
        now = _count(s, "after")
        if self.before is None:
            return now  # totals since the engine started, by request
        old = self.old.get(_key(s))
        if old is None:
            self._new_child(s, lazy)
            return self._restarted(s, now, 0.0)
        self._same_type(s, old)
        was = _count(old, "before")
        start = [m.get(_key(s)) for m in self.starts]
        if now < was or None not in start and start[0] != start[1]:
            if self.restart_expected and self.restart:
                return now
            fell = f"fell from {was:,.6g} to {now:,.6g}" if now < was else \
                f"was created anew ({start[0]} -> {start[1]})"
            raise PairingError(f"{s.key} {fell} between the scrapes: the counter was reset "
                               f"(an engine restart{': ' + self.restart if self.restart else '?'})"
                               "; its delta is not the probe's")
        return self._restarted(s, now, was)

    def _restarted(self, s: Sample, now: float, was: float) -> float:
        if self.restart_expected:
            if not self.restart:
                raise PairingError(f"{s.key}: a restart between the scrapes was expected, but "
                                   f"the engine's start time ({START_TIME}) does not show one")
            return now  # everything since the restart
        if self.restart:
            raise PairingError(f"the engine restarted between the scrapes ({self.restart}): "
                               f"{s.key} does not count the probe alone")
        return now - was

    def _new_child(self, s: Sample, lazy: bool) -> None:
        shapes = self.shapes.get(canonical(s.name))
        if shapes is None:
            base = canonical(s.name.rsplit("_", 1)[0]) if s.name.endswith(
                ("_sum", "_count", "_bucket")) else canonical(s.name)
            if base in self.declared or lazy and self.same_engine:
                return  # declared without a child yet, or created on first use by this engine
            raise PairingError(f"{s.key} is in the after scrape only: its family is not in the "
                               "before scrape, so its whole lifetime would count as the probe's "
                               "(scrape both from the same engine, in one format)")
        if frozenset(s.labels) not in shapes:
            had = " or ".join(sorted(",".join(sorted(x)) or "none" for x in shapes))
            raise PairingError(f"{s.key}: its labels ({','.join(sorted(s.labels))}) are not "
                               f"the before scrape's ({had}): a scraper added or dropped labels "
                               "(instance, job?), so the series cannot be paired")

    def _same_type(self, s: Sample, old: Sample) -> None:
        now, was = self.after.type_of(s.name), self.before.type_of(old.name)
        if now != was and now not in _LOOSE and was not in _LOOSE:
            raise PairingError(f"{s.key}: TYPE {was} in the before scrape, {now} in the after "
                               "scrape: a delta of two kinds of metric means nothing")

    def vanished(self, after: list[Sample], before: list[Sample]) -> list[str]:
        """Of a rule's series in the before scrape, those the after scrape lacks."""
        now = {_key(s) for s in after}
        return [s.key for s in before if _key(s) not in now]
