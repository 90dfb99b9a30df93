"""Declared measurements: each gate names what it measures once, by id; display names derive.

An id such as "g3.ttft_p50_reduction" is the machine key a suite, a test or the summary selects
by; a measurement taken per concurrency level carries the level beside the id (`at`), and its
display name ("TTFT p50 reduction @ concurrency 8") is derived from the declaration and never
parsed back. Asking for an id no gate declared raises, as OpenHTF's unknown measurement does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .verdict import Limit, Measurement


@dataclass(frozen=True)
class Declared:
    """One measurement a gate takes: its id, its title, and the dimension it is taken per."""

    id: str
    title: str
    per: str = ""  # "concurrency": one measurement per level, named "<title> @ concurrency N"
    form: str = "{title} @ {per} {at}"  # the display name of one level

    def name(self, at: int | None = None) -> str:
        """The display name, for a level when the measurement is taken per level."""
        if at is None:  # a per-level measurement whose level is unknown (an early ERROR)
            return self.title
        if not self.per:
            raise ValueError(f"measurement {self.id} is taken once: it has no {at!r} level")
        return self.form.format(title=self.title, per=self.per, at=at)

    def stamp(self, m: Measurement, at: int | None = None) -> Measurement:
        """The measurement under this declaration's id, level and derived name."""
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

    def not_applicable(self, reason: str, *, at: int | None = None) -> Measurement:
        """Does not apply to this site, with the reason."""
        return self.stamp(Measurement.not_applicable(self.name(at), reason), at)


class Declarations:
    """A gate's declared measurements, looked up by id; an unknown id is an error."""

    def __init__(self, gate: str, declared: Iterable[Declared]):
        self.gate = gate
        self.by_id: dict[str, Declared] = {}
        for d in declared:
            if not d.id.startswith(f"{gate}.") or d.id in self.by_id:
                raise ValueError(f"{d.id}: a {gate} id must start with '{gate}.' and be unique")
            self.by_id[d.id] = d

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
