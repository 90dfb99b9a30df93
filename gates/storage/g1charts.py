"""G1's charts from the fio results: what the bandwidth, latency and sweep charts show. Pure."""

from __future__ import annotations

from ..charts import (
    Bar,
    LatencyCurve,
    SweepPoint,
    bandwidth_vs_ceiling,
    latency_percentiles,
    queue_depth_sweep,
)
from ..core.configuration import Ceilings, G1Limits
from .fio import combine, samples_support
from .g1 import BW_TITLES, StepOutcome

# fio's default percentile_list: used when a job's clat_ns carries no percentile table.
FIO_PERCENTILES = (1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 99.5, 99.9, 99.95, 99.99)


def bandwidth_bars(outcomes: dict[str, StepOutcome], limits: G1Limits) -> list[Bar]:
    """Every G1 bandwidth job with its summed bandwidth (None when it measured nothing)."""
    bars = []
    for key, (title, limit_key, direction) in BW_TITLES.items():
        step = outcomes.get(key)
        entries = step.report.named(key) if step and not step.problem() else []
        bars.append(Bar(label=title.removesuffix(" bandwidth"), direction=direction,
                        measured=combine(entries, direction).bw_bytes if entries else None,
                        floor=getattr(limits, limit_key)))
    return bars


def _latency_jobs(outcomes: dict[str, StepOutcome], depths: list[int]) -> list[tuple]:
    jobs = [("randread-qd1", "randread-qd1", "QD1 latency job")]
    jobs += [("qd-sweep", f"randread-qd{qd}", f"QD{qd} sweep") for qd in depths]
    return [(outcomes[key].report.named(job), label) for key, job, label in jobs
            if key in outcomes and not outcomes[key].problem()]


def latency_curves(outcomes: dict[str, StepOutcome], depths: list[int]) -> list[LatencyCurve]:
    """Read completion-latency percentiles of the QD1 job and the sweep, as far as N supports."""
    curves = []
    for entries, label in _latency_jobs(outcomes, depths):
        clat = combine(entries, "read").clat_ns if entries else None
        if not clat or not clat.N:
            continue
        listed = sorted(float(k) for k in clat.percentile) if clat.percentile else FIO_PERCENTILES
        # A percentile the sample count cannot support would be drawn as if it were measured.
        found = {p: clat.percentile_ns(p) for p in listed if samples_support(clat.N, p)}
        found = {p: v for p, v in found.items() if v}
        if found:
            curves.append(LatencyCurve(label=label, samples=clat.N, percentiles=found))
    return curves


def sweep_points(step: StepOutcome | None, depths: list[int]) -> list[SweepPoint]:
    """IOPS and p99 per queue depth of the sweep, for the depths fio reported."""
    if step is None or step.problem():
        return []
    points = []
    for qd in depths:
        entries = step.report.named(f"randread-qd{qd}")
        if entries:
            read = combine(entries, "read")
            p99 = read.clat_ns.percentile_ns(99) if samples_support(read.clat_ns.N, 99) else None
            points.append(SweepPoint(depth=qd, iops=read.iops, p99_ns=p99))
    return points


def g1_charts(outcomes: dict[str, StepOutcome], limits: G1Limits, ceilings: Ceilings,
              depths: list[int]) -> list[tuple[str, str]]:
    """The G1 report's (title, svg) charts, each only when its jobs measured something."""
    charts = []
    bars = bandwidth_bars(outcomes, limits)
    if any(b.measured is not None for b in bars):
        ceiling = " and the site's ceiling" if ceilings.read_bw or ceilings.write_bw else ""
        charts.append((f"fio bandwidth per job against its minimum{ceiling}",
                       bandwidth_vs_ceiling(bars, ceilings)))
    curves = latency_curves(outcomes, depths)
    if curves:
        charts.append(("Completion-latency percentiles, 4 KiB random read",
                       latency_percentiles(curves, limits.randread_4k_qd1_p99_max * 1e9)))
    points = sweep_points(outcomes.get("qd-sweep"), depths)
    if len(points) > 1:
        charts.append(("Queue-depth sweep: IOPS and p99 latency",
                       queue_depth_sweep(points, limits.randread_4k_iops_min)))
    return charts

