"""G1 on a shared array: the figures of several fio client hosts, from fio's own per-client
results (client_stats) and its "All clients" sum. Pure.

A buyer of an array that serves several GPU servers asks what each host got, what all got
together, how far the slowest fell behind the fastest, and how the tail latency of every I/O
looks: the tail comes from the hosts' json+ latency histograms merged bin by bin (fio.merge_bins),
never from an average of the hosts' own percentiles. Each rule is over the hosts the step
planned the job on (g1cover): one fio sent nothing from, or whose entry ended with an error or
moved nothing, is named and the figure over the others is not the array's (ERROR).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..core.configuration import G1Limits
from ..core.quantities import bandwidth_unit
from ..core.verdicts import Coverage, Limit, Measurement
from .fio import ALL_CLIENTS, Latency, combine, merge_bins, percentile_from_bins, samples_support
from .fiohosts import HostProbe, down, other_versions
from .g1 import StepOutcome
from .g1cover import coverage, host_entries, latencies, moved, over_hosts

# fio's "All clients" bandwidth is its summed bytes over the longest client's runtime, rounded to
# whole bytes/s (fio 3.33 stat.c sum_group_stats / client.c): ours must agree within this share.
ALL_CLIENTS_TOLERANCE = 0.005
JOB = "kvrestore"  # the job these rules judge on every host


@dataclass(frozen=True)
class HostFigure:
    """One host's figures for one job: fio's own, as that host's server reported them."""

    host: str
    bw: float  # bytes/s
    iops: float
    io_bytes: int
    runtime_ms: int
    clat: Latency


def host_figures(step: StepOutcome, job: str = "kvrestore",
                 direction: str = "read") -> list[HostFigure]:
    """Each host's figures for a job, in the order fio reported them ([] for a local run)."""
    if step.problem():
        return []
    entries = [e for e in step.report.named(job) if e.hostname]
    figures = []
    for host in dict.fromkeys(e.hostname for e in entries):
        part = combine([e for e in entries if e.hostname == host], direction)
        figures.append(HostFigure(host, part.bw_bytes, part.iops, part.io_bytes, part.runtime,
                                  part.clat_ns))
    return figures


def aggregate_bw(figures: list[HostFigure]) -> float:
    """Every host's bytes over the longest host's runtime: what the array served to all."""
    longest = max((f.runtime_ms for f in figures), default=0)
    return sum(f.io_bytes for f in figures) / (longest / 1e3) if longest else 0.0


def merged_bins(figures: list[HostFigure]) -> dict[str, int]:
    """The hosts' json+ completion-latency histograms summed bin by bin."""
    return merge_bins([f.clat for f in figures])


def _gbps(bw: float) -> str:
    return f"{bw / 1e9:.3g} GB/s"


def fio_servers(probes: list[HostProbe], client: str) -> Measurement:
    """Every [fio] host answered, with the client's fio version (counts the hosts that differ)."""
    name = "fio servers on the [fio] hosts"
    limit = Limit.at_most(0, "hosts", key="fio.hosts")
    evidence = [p.evidence for p in probes if p.evidence]
    if not probes:
        return Measurement.not_applicable(name, "fio runs on this machine alone "
                                          "(site.toml [fio] hosts is empty)")
    if problem := down(probes):
        return Measurement.error(name, problem, limit, evidence=evidence)
    others = other_versions(probes, client)
    said = "; ".join(f"{p.host} answers {p.version}" for p in others)
    note = (f"{said}, the client is {client}: one fio version on every host, or the figures "
            "compare different instruments") if others else \
        f"{len(probes)} hosts answered, each {client}: " + ", ".join(
            f"{p.host} ({p.hostname})" for p in probes)
    return Measurement.measured(name, len(others), limit, evidence=evidence, note=note)


def planned(step: StepOutcome, job: str = JOB) -> Coverage | None:
    """The planned hosts the job gave a figure from; None where the report cannot say."""
    try:
        return coverage([host_entries(step.report, job)], moved("read")) if step.report \
            else None
    except ValueError:
        return None


def per_host(step: StepOutcome, title: str = "KV-restore read") -> list[Measurement]:
    """Each host's bandwidth, with its IOPS: reported, for the buyer to see every server; a
    planned host fio gave no figure from is an ERROR naming why."""
    cov = planned(step)
    unread = [Measurement.error(f"{title} on {host}", why, evidence=step.evidence)
              for host, why in (cov.missing.items() if cov else ())]
    return [Measurement.reported(f"{title} on {f.host}", f.bw / 1e9, "GB/s",
                                 note=f"{f.iops:,.0f} IOPS, {f.io_bytes / 1024**2:,.0f} MiB "
                                 f"in {f.runtime_ms / 1e3:.1f} s")
            for f in host_figures(step) if cov is None or f.host in cov.read] + unread


def aggregate(step: StepOutcome, limits: G1Limits, band: float = 0.0) -> Measurement:
    """The KV-restore bandwidth of every host at once, checked against fio's "All clients"."""
    name = "KV-restore aggregate bandwidth, every host at once"
    floor = limits.hosts_aggregate_bw_min
    unit, scale = bandwidth_unit(floor or 1e9)
    limit = Limit.at_least(floor / scale, unit, key="g1.hosts_aggregate_bw_min",
                           marginal=band) if floor else None

    def error(why: str) -> Measurement:
        return Measurement.error(name, why, limit, evidence=step.evidence)
    # A sum over hosts: one not read could only add to it (over_hosts: ERROR naming it).
    return over_hosts(step, [JOB], moved("read"),
                      lambda _: _aggregate(step, name, limit, scale, unit), error)


def _aggregate(step: StepOutcome, name: str, limit: Limit | None, scale: float,
               unit: str) -> Measurement:
    figures = host_figures(step)
    if not figures:
        return Measurement.error(name, "fio reported no per-host 'kvrestore' results",
                                 limit, evidence=step.evidence)
    total = aggregate_bw(figures)
    note = f"{len(figures)} hosts: " + ", ".join(f"{f.host} {_gbps(f.bw)}" for f in figures)
    fio_all = [e for e in step.report.client_stats if e.jobname == ALL_CLIENTS]
    if fio_all:
        theirs = fio_all[0].read.bw_bytes
        if abs(theirs - total) > ALL_CLIENTS_TOLERANCE * max(total, 1):
            return Measurement.error(name, f"fio's 'All clients' says {_gbps(theirs)}, the "
                                     f"hosts' own results add up to {_gbps(total)}: {note}",
                                     limit, evidence=step.evidence)
        note += f"; fio's 'All clients' {_gbps(theirs)}"
    if limit is None:
        return Measurement.reported(name, total / scale, unit, note=note + " (no limit: "
                                    "thresholds.toml [g1] hosts_aggregate_bw_min is unset)")
    return Measurement.measured(name, total / scale, limit, evidence=step.evidence, note=note)


def merged_p99(step: StepOutcome) -> Measurement:
    """The 99th-percentile completion latency of every host's I/Os: merged histograms."""
    name = "KV-restore p99 latency, every host's I/Os merged"

    def error(why: str) -> Measurement:
        return Measurement.error(name, why, evidence=step.evidence)
    # Another host's I/Os could move a merged percentile either way: every host, or none.
    return over_hosts(step, [JOB], latencies, lambda _: _merged_p99(step, name, error),
                      error)


def _merged_p99(step: StepOutcome, name: str,
                error: Callable[[str], Measurement]) -> Measurement:
    figures = host_figures(step)
    if not figures:
        return error("fio reported no per-host results")
    bins = merged_bins(figures)
    n = sum(bins.values())
    if not samples_support(n, 99):
        return error(f"only {n} I/Os in the hosts' histograms; a p99 needs at least 1000")
    own = ", ".join(f"{f.host} {(f.clat.percentile_ns(99) or 0) / 1e3:,.0f} µs" for f in figures)
    m = Measurement.reported(name, percentile_from_bins(bins, 99) / 1e3, "µs", note=(
        f"N = {n} from {len(figures)} hosts' json+ histograms merged bin by bin; each host's "
        f"own p99: {own}"))
    return m.model_copy(update={"evidence": step.evidence})


def spread(step: StepOutcome, limits: G1Limits, band: float = 0.0) -> Measurement:
    """The straggler spread: the fastest host's bandwidth less the slowest's, % of the fastest."""
    name = "KV-restore straggler spread across hosts"
    limit = Limit.at_most(limits.hosts_spread_max, "%", key="g1.hosts_spread_max",
                          marginal=band)

    def error(why: str) -> Measurement:
        return Measurement.error(name, why, limit, evidence=step.evidence)
    # A host not read may be the slowest: no spread stands without every planned host.
    return over_hosts(step, [JOB], moved("read"), lambda _: _spread(step, name, limit, error),
                      error)


def _spread(step: StepOutcome, name: str, limit: Limit,
            error: Callable[[str], Measurement]) -> Measurement:
    figures = host_figures(step)
    if len(figures) < 2:
        return error(f"{len(figures)} host(s) reported: a spread needs two")
    fast, slow = max(figures, key=lambda f: f.bw), min(figures, key=lambda f: f.bw)
    first, last = min(figures, key=lambda f: f.runtime_ms), max(figures,
                                                               key=lambda f: f.runtime_ms)
    pct = (fast.bw - slow.bw) / fast.bw * 100 if fast.bw else 100.0
    return Measurement.measured(name, pct, limit, evidence=step.evidence, note=(
        f"fastest {fast.host} {_gbps(fast.bw)}, slowest {slow.host} {_gbps(slow.bw)}; first "
        f"done {first.host} after {first.runtime_ms / 1e3:.2f} s, last done {last.host} after "
        f"{last.runtime_ms / 1e3:.2f} s"))
