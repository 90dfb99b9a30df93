"""G1 storage performance: fio reports turned into Measurements against thresholds. Pure."""

from __future__ import annotations

from ..core.configuration import Ceilings, G1Limits
from ..core.quantities import bandwidth_unit
from ..core.verdicts import G1, Cause, Deviation, Limit, Measurement
from .fio import FioReport, combine, samples_support
from .fioerrors import EILSEQ
from .g1cover import HostEntries, latencies, moved, over_hosts
from .g1steady import steady_state as steady_state  # the suite's rule, in its own module
from .g1step import BW_JOBS, BW_TITLES, StepOutcome, mib, no_job


def _efficiency(bw: float, ceiling: float | None, label: str) -> str:
    if not ceiling:
        return ""
    return f"{bw / ceiling * 100:.0f} % of the {ceiling / 1e9:.3g} GB/s ceiling" + (
        f" ({label})" if label else "")


# Other I/O on the target's device below both of these is noise (journal, logs), not contention.
OTHER_IO_FLOOR = 16 * 1024**2
OTHER_IO_SHARE = 0.10  # of what fio itself moved in the job


def restore_bw(step: StepOutcome) -> float:
    """Bytes/s the KV-restore job read, summed over its jobs and hosts (the pre-flight's input);
    call it on a step without a problem()."""
    return combine(step.report.named("kvrestore"), "read").bw_bytes


def other_io(title: str, device: str, device_io: tuple[int, int] | None,
             report: FioReport | None, buffered: bool = False) -> Deviation | None:
    """A deviation when the target's device moved bytes during a job that fio did not (None if
    not).

    Another process on the array (a second run, a backup, another tenant) takes its share of the
    bandwidth fio measures, and nothing else would show it. A job fio ran while the device's
    counters could not be read (device_io None) is one nobody watched: not_watched says so.
    """
    if not device or report is None:
        return None
    if device_io is None:
        return not_watched(f"the counters of {device} (/sys/class/block/{device}/stat) could "
                           f"not be read around '{title}'")
    entries = report.entries()
    fio_read, fio_write = (sum(getattr(j, d).io_bytes for j in entries) for d in ("read", "write"))
    read, write = device_io
    other_read, other_write = max(0, read - fio_read), max(0, write - fio_write)
    other = other_read + other_write
    if other <= max(OTHER_IO_FLOOR, OTHER_IO_SHARE * (fio_read + fio_write)):
        return None
    return Deviation(cause=Cause.OTHER_IO, text=(
        f"other I/O on the target's device {device} during '{title}': {mib(other)} that fio "
        f"did not do (read {mib(other_read)}, written {mib(other_write)} beyond fio's "
        f"{mib(fio_read)} read, {mib(fio_write)} written): another process used the device, "
        "so this job's figures may be low"
        + ("; with direct = false, fio's own buffered writes may land in a later job"
           if buffered else "")))


def not_watched(why: str) -> Deviation:
    """The deviation of a run whose target's device kvgate could not watch (why): other
    processes' I/O during a job, which other_io names, would go unseen."""
    return Deviation(cause=Cause.IO_NOT_WATCHED,
                     text=f"other processes' I/O on the target was not watched: {why}")


def bandwidth(key: str, step: StepOutcome, limits: G1Limits, ceilings: Ceilings,
              band: float = 0.0) -> Measurement:
    """A bandwidth job's summed bytes/s against its minimum, with efficiency vs the ceiling."""
    return G1[BW_JOBS[key][0]].stamp(_bandwidth(key, step, limits, ceilings, band))


def _bandwidth(key: str, step: StepOutcome, limits: G1Limits, ceilings: Ceilings,
               band: float) -> Measurement:
    title, limit_key, direction = BW_TITLES[key]
    floor = getattr(limits, limit_key)
    unit, scale = bandwidth_unit(floor)
    limit = Limit.at_least(floor / scale, unit, key=f"g1.{limit_key}", marginal=band)
    evidence = step.evidence

    def measured(per_job: list[HostEntries]) -> Measurement:
        # A sum over hosts: a host not read could only add to it, so no figure stands without it.
        bw = combine(per_job[0].entries(), direction).bw_bytes
        ceiling = ceilings.read_bw if direction == "read" else ceilings.write_bw
        return Measurement.measured(title, bw / scale, limit, evidence=evidence,
                                    note=_efficiency(bw, ceiling, ceilings.label))
    return over_hosts(step, [key], moved(direction), measured,
                      lambda why: Measurement.error(title, why, limit, evidence=evidence))


def qd1_latency(step: StepOutcome, limits: G1Limits, band: float = 0.0) -> Measurement:
    """99th-percentile completion latency of 4 KiB random reads at QD1, if N supports it."""
    return G1["g1.randread_qd1_p99"].stamp(_qd1_latency(step, limits, band))


def _qd1_latency(step: StepOutcome, limits: G1Limits, band: float) -> Measurement:
    limit_us = limits.randread_4k_qd1_p99_max * 1e6
    limit = Limit.at_most(limit_us, "µs", key="g1.randread_4k_qd1_p99_max", marginal=band)
    name = "4 KiB random read QD1 p99 latency"
    evidence = step.evidence

    def error(why: str) -> Measurement:
        return Measurement.error(name, why, limit, evidence=evidence)

    def measured(per_job: list[HostEntries]) -> Measurement:
        # The hosts' histograms merged: another host's I/Os could move the p99 either way.
        clat = combine(per_job[0].entries(), "read").clat_ns
        if not samples_support(clat.N, 99):
            return error(f"only {clat.N} I/Os; a p99 needs at least 1000 (run longer: "
                         "site.toml [fio] runtime)")
        p99 = clat.percentile_ns(99)
        if p99 is None:
            return error("fio reported no latency percentiles")
        p50 = clat.percentile_ns(50) or 0
        return Measurement.measured(name, p99 / 1e3, limit, evidence=evidence,
                                    note=f"N = {clat.N}; p50 {p50 / 1e3:.0f} µs")
    return over_hosts(step, ["randread-qd1"], latencies, measured, error)


def qd_sweep(step: StepOutcome, limits: G1Limits, depths: list[int],
             band: float = 0.0) -> Measurement:
    """4 KiB random-read IOPS at the deepest queue of the sweep; the curve goes in the note."""
    return G1["g1.randread_iops"].stamp(_qd_sweep(step, limits, depths, band),
                                        max(depths) if depths else None)


def _qd_sweep(step: StepOutcome, limits: G1Limits, depths: list[int],
              band: float) -> Measurement:
    limit = Limit.at_least(limits.randread_4k_iops_min, "IO/s", key="g1.randread_4k_iops_min",
                           marginal=band)
    name = f"4 KiB random read IOPS at QD{max(depths)}" if depths else "4 KiB random read IOPS"
    evidence = step.evidence

    def error(why: str) -> Measurement:
        return Measurement.error(name, why, limit, evidence=evidence)
    if not depths:
        return error(step.problem() or "no queue depths to sweep (site.toml [fio] qd_sweep)")

    def measured(per_job: list[HostEntries]) -> Measurement:
        # IOPS add over hosts at each depth: a host is read when it sent every depth.
        curve = {qd: combine(e.entries(), "read").iops for qd, e in zip(depths, per_job,
                                                                           strict=True)}
        note = "IOPS by queue depth: " + ", ".join(f"QD{q} {v:,.0f}" for q, v in curve.items())
        return Measurement.measured(name, curve[max(depths)], limit, evidence=evidence,
                                    note=note)
    return over_hosts(step, [f"randread-qd{qd}" for qd in depths], moved("read"), measured,
                      error)


def verify_errors(step: StepOutcome) -> Measurement:
    """Blocks the write-then-verify job read back other than written: none is allowed."""
    return G1["g1.verify_errors"].stamp(_verify_errors(step))


def _verify_errors(step: StepOutcome) -> Measurement:
    # A fixed 0, no thresholds key: no site accepts an array that returns other bytes.
    limit, name, evidence = Limit.at_most(0, "blocks"), G1["g1.verify_errors"].title, step.evidence
    if step.problem():  # EIO, ENOSPC ...: nothing (or not all) was verified
        return Measurement.error(name, step.problem(), limit, evidence=evidence)
    jobs = step.report.named("verify")
    if not jobs:
        return Measurement.error(name, no_job("verify"), limit, evidence=evidence)
    failures = step.verify_failures
    bad = max(sum(j.total_err for j in jobs), len(failures),
              int(any(j.error == EILSEQ for j in jobs)))
    written, read = (combine(jobs, d).io_bytes for d in ("write", "read"))
    checked = f"{mib(read)} read back of {mib(written)} written"
    if not bad and (not written or read < written):  # unread bytes are unverified, not good
        return Measurement.error(name, f"the verify job checked only {checked}", limit,
                                 evidence=evidence)
    where = "; ".join(f.describe() for f in failures[:3]) + (
        f" (and {len(failures) - 3} more)" if len(failures) > 3 else "")
    note = (f"{bad} block{'s' * (bad != 1)} read back other than written, {checked}"
            + (f": {where}" if where else "")) if bad else f"every block as written, {checked}"
    return Measurement.measured(name, bad, limit, evidence=evidence, note=note)
