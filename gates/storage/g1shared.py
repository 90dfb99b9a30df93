"""G1 on a shared array, over several runs: the 1 -> N client scaling curve of the KV-restore
pattern, and one host's KV restore while a neighbour writes a declared load. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..charts import ClientsPoint, neighbour_comparison
from ..charts import scaling_curve as scaling_chart
from ..core.configuration import G1Limits
from ..core.verdicts import Limit, Measurement
from .fio import percentile_from_bins, samples_support
from .g1 import StepOutcome
from .g1hosts import aggregate_bw, host_figures, merged_bins, planned
from .jobs import shared_steps as shared_steps  # the steps these rules judge

# The neighbour must have written at least this share of its declared rate, or the restore was
# not measured under the load the site declared.
NEIGHBOUR_DELIVERED_MIN = 0.9


@dataclass(frozen=True)
class ScalePoint:
    """The KV-restore figures with ``clients`` hosts reading at once."""

    clients: int
    aggregate_bw: float  # bytes/s
    p99_ns: float | None  # of the merged histogram; None where N cannot support it


def scale_point(clients: int, step: StepOutcome) -> ScalePoint | None:
    """One level of the curve, or None when its run measured nothing."""
    figures = host_figures(step)
    if not figures:
        return None
    bins = merged_bins(figures)
    p99 = percentile_from_bins(bins, 99) if samples_support(sum(bins.values()), 99) else None
    return ScalePoint(clients, aggregate_bw(figures), p99)


def scaling_curve(steps: dict[int, StepOutcome]) -> list[ScalePoint]:
    """The levels that measured something, by client count."""
    points = [scale_point(n, step) for n, step in sorted(steps.items())]
    return [p for p in points if p is not None]


def _unread(step: StepOutcome) -> str:
    """Why a level's aggregate is not every planned host's ("" where it is): a host left out
    would make the curve bend where the array did not."""
    if step.problem():
        return step.problem()
    cov = planned(step)
    return cov.describe() if cov is not None and not cov.complete else ""


def scaling(steps: dict[int, StepOutcome]) -> Measurement:
    """The curve as one reported figure: N hosts' aggregate as a % of N times one host's."""
    name = "KV-restore scaling, 1 to N hosts"
    failed = [f"{n} hosts: {_unread(s)}" for n, s in sorted(steps.items()) if _unread(s)]
    evidence = [e for s in steps.values() for e in s.evidence]
    points = scaling_curve(steps)
    if failed or len(points) < 2 or points[0].clients != 1:
        return Measurement.error(name, "; ".join(failed) or "fewer than two levels measured",
                                 evidence=evidence)
    one, top = points[0], points[-1]
    efficiency = top.aggregate_bw / (top.clients * one.aggregate_bw) * 100 \
        if one.aggregate_bw else 0.0
    curve = ", ".join(f"{p.clients}: {p.aggregate_bw / 1e9:.3g} GB/s" + (
        f" (p99 {p.p99_ns / 1e3:,.0f} µs)" if p.p99_ns else "") for p in points)
    m = Measurement.reported(name, efficiency, "%", note=(
        f"{top.clients} hosts' aggregate as a share of {top.clients} x one host's; "
        f"aggregate by hosts: {curve}"))
    return m.model_copy(update={"evidence": evidence})


@dataclass(frozen=True)
class NeighbourFigures:
    """The first host's restore alone and beside the neighbour, and what the neighbour wrote."""

    alone_bw: float
    loaded_bw: float
    alone_p99_ns: float | None
    loaded_p99_ns: float | None
    written_bw: float


def _p99(step: StepOutcome) -> float | None:
    bins = merged_bins(host_figures(step))
    return percentile_from_bins(bins, 99) if samples_support(sum(bins.values()), 99) else None


def neighbour_figures(alone: StepOutcome, loaded: StepOutcome) -> NeighbourFigures | None:
    """Both runs' figures for the reading host, or None where either measured nothing."""
    reader_alone, reader_loaded = host_figures(alone), host_figures(loaded)
    writer = host_figures(loaded, "neighbour", "write")
    if len(reader_alone) != 1 or len(reader_loaded) != 1 or not writer:
        return None
    return NeighbourFigures(reader_alone[0].bw, reader_loaded[0].bw, _p99(alone), _p99(loaded),
                            sum(w.bw for w in writer))


def _us(ns: float | None) -> str:
    return f"{ns / 1e3:,.0f} µs" if ns else "too few I/Os for a p99"


def neighbour(alone: StepOutcome | None, loaded: StepOutcome | None, rate: float | None,
              limits: G1Limits, band: float = 0.0) -> Measurement:
    """The reading host's KV-restore bandwidth beside the neighbour, as a % of it alone."""
    name = "KV restore while a neighbour writes, % of alone"
    limit = Limit.at_least(limits.neighbour_restore_min, "%", key="g1.neighbour_restore_min",
                           marginal=band)
    if alone is None or loaded is None or rate is None:
        return Measurement.not_applicable(name, "needs two [fio] hosts and a declared load "
                                          "(site.toml [fio] neighbour_write_rate)")
    evidence = [*alone.evidence, *loaded.evidence]
    problem = alone.problem() or loaded.problem()
    found = None if problem else neighbour_figures(alone, loaded)
    if found is None:
        return Measurement.error(name, problem or "fio reported no results for the reading "
                                 "host or the neighbour", limit, evidence=evidence)
    said = (f"alone {found.alone_bw / 1e9:.3g} GB/s, p99 {_us(found.alone_p99_ns)}; beside "
            f"the neighbour {found.loaded_bw / 1e9:.3g} GB/s, p99 {_us(found.loaded_p99_ns)}; "
            f"the neighbour wrote {found.written_bw / 1e6:,.0f} MB/s of the "
            f"{rate / 1e6:,.0f} MB/s declared")
    if found.written_bw < NEIGHBOUR_DELIVERED_MIN * rate:
        return Measurement.error(name, f"the declared load was not applied: {said} (at least "
                                 f"{NEIGHBOUR_DELIVERED_MIN:.0%} needed)", limit,
                                 evidence=evidence)
    ratio = found.loaded_bw / found.alone_bw * 100 if found.alone_bw else 0.0
    return Measurement.measured(name, ratio, limit, evidence=evidence, note=said)


def shared_charts(scaling: dict[int, StepOutcome], alone: StepOutcome | None,
                  loaded: StepOutcome | None, limits: G1Limits,
                  rate: float | None) -> list[tuple[str, str]]:
    """The shared array's charts: the 1 -> N scaling curve and the neighbour comparison, each
    only when its runs measured something."""
    charts = []
    points = scaling_curve(scaling)
    if len(points) > 1:
        charts.append(("KV restore from 1 to N client hosts: aggregate bandwidth and merged p99",
                       scaling_chart([ClientsPoint(clients=p.clients, aggregate_bw=p.aggregate_bw,
                                                   p99_ns=p.p99_ns) for p in points],
                                     limits.hosts_aggregate_bw_min)))
    found = neighbour_figures(alone, loaded) if alone and loaded and rate else None
    if found:
        charts.append(("KV restore without and with a neighbour's writes",
                       neighbour_comparison(found.alone_bw, found.loaded_bw, found.alone_p99_ns,
                                            found.loaded_p99_ns, rate)))
    return charts
