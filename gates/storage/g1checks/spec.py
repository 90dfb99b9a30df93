"""The one shape of a G1 configuration check, and the function that runs it.

A CheckSpec names the collected fact a check judges, what site.toml [topology] or thresholds.toml
[g1] expects of it, the Limit that follows, and a reader that turns the fact into a Reading.
`judge` runs the shape every check shares: NOT APPLICABLE with the reason when the site does not
have the thing, ERROR with what went wrong when the fact could not be collected, else the
reading held against the Limit. Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce
from typing import Any, NamedTuple

from ...core.configuration import G1Limits, Site
from ...core.verdicts import Limit, Measurement
from ..collector import Found
from ..inventory import Inventory


class Reading(NamedTuple):
    """The figure a reader took from a collected fact, and the note that explains it."""

    value: float
    note: str = ""


class Unmeasured(NamedTuple):
    """Why a collected fact holds no figure to judge: the check is an ERROR."""

    reason: str


class NotApplicable(NamedTuple):
    """Why the check does not apply, found only once the fact is seen."""

    reason: str


ReadResult = Reading | Unmeasured | NotApplicable


@dataclass(frozen=True)
class Case:
    """What a reader sees: the collected value, what the site expects, its Limit and the run."""

    got: Any
    want: Any
    limit: Limit | None
    inv: Inventory
    site: Site
    limits: G1Limits | None


def _nothing(inv: Inventory, site: Site, limits: G1Limits | None) -> None:
    return None


@dataclass(frozen=True)
class CheckSpec:
    """One array-wide configuration check, declared rather than written out."""

    name: str  # the measurement name in reports: never change it
    fact: str  # the Inventory field the check judges (dotted: a field of a field)
    read: Callable[[Case], ReadResult]
    limit: Callable[[Any, G1Limits | None], Limit | None]
    want: Callable[[Inventory, Site, G1Limits | None], Any] = _nothing
    # NOT APPLICABLE reason when the site expects nothing; "" = the check always applies.
    unset: str | Callable[[Inventory], str] = ""
    # Whether that reason wins over the collector's own reason for skipping the fact.
    site_first: bool = False


def topology(key: str) -> Callable[[Inventory, Site, G1Limits | None], Any]:
    """A `want` that reads site.toml [topology] key."""
    return lambda inv, site, limits: getattr(site.topology, key)


def exact(unit: str, key: str, per: float = 1) -> Callable[[Any, G1Limits | None], Limit | None]:
    """A `limit`: x == want / per, or no Limit when the site sets no value."""
    def limit(want: Any, limits: G1Limits | None) -> Limit | None:
        return None if want is None else Limit(lo=want / per, hi=want / per, unit=unit, key=key)
    return limit


def none_of(unit: str = "", key: str | None = None) -> Callable[..., Limit]:
    """A `limit` for categorical checks, which count what does not conform: x <= 0."""
    return lambda *_: Limit.at_most(0, unit, key=key)


def unavailable(name: str, found: Found, limit: Limit | None = None) -> Measurement | None:
    """N/A or ERROR for a fact that was skipped or could not be collected; None if it is there."""
    if found.skipped:
        return Measurement.not_applicable(name, found.skipped)
    if found.error or found.value is None:
        return Measurement.error(name, found.error or "not collected", limit,
                                 evidence=found.evidence)
    return None


def measure(name: str, result: ReadResult, limit: Limit | None,
            evidence: list[str]) -> Measurement:
    """The Measurement a reader's result stands for."""
    match result:
        case Unmeasured(reason):
            return Measurement.error(name, reason, limit, evidence=evidence)
        case NotApplicable(reason):
            return Measurement.not_applicable(name, reason)
    return Measurement.measured(name, result.value, limit, evidence=evidence,
                                note=result.note)


def _unset(want: Any) -> bool:
    # 0 is a value (RAID0); an empty filesystem or option list is not.
    return want is None or (isinstance(want, str | list) and not want)


def judge(spec: CheckSpec, inv: Inventory, site: Site,
          limits: G1Limits | None = None) -> Measurement:
    """The spec's Measurement for this inventory, site and thresholds."""
    found = reduce(getattr, spec.fact.split("."), inv)  # "gds.platform": a nested fact
    want = spec.want(inv, site, limits)
    if spec.unset and _unset(want) and (spec.site_first or not found.skipped):
        reason = spec.unset if isinstance(spec.unset, str) else spec.unset(inv)
        return Measurement.not_applicable(spec.name, reason)
    limit = spec.limit(want, limits)
    if gone := unavailable(spec.name, found, limit):
        return gone
    case = Case(found.value, want, limit, inv, site, limits)
    return measure(spec.name, spec.read(case), limit, found.evidence)
