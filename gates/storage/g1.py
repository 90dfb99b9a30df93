"""G1 storage performance: fio reports turned into Measurements against thresholds. Pure."""

from __future__ import annotations

from pydantic import BaseModel

from ..core.configuration import Ceilings, G1Limits
from ..core.quantities import bandwidth_unit
from ..core.statistics import SteadyState, SteadyStateUnavailable, snia_steady_state
from ..core.verdicts import G1, Limit, Measurement
from .fio import FioReport, combine, samples_support
from .fioerrors import EILSEQ, VerifyFailure

# fio job → (declared measurement id, its thresholds key, direction). The steady-state ids are
# the bandwidth id's stem + "_steady_spread" / "_steady_slope".
BW_JOBS = {
    "seqread": ("g1.seq_read_bw", "seq_read_bw_min", "read"),
    "seqwrite": ("g1.seq_write_bw", "seq_write_bw_min", "write"),
    "kvrestore": ("g1.kv_restore_bw", "kv_restore_bw_min", "read"),
}
BW_TITLES = {key: (G1[id].title, limit_key, direction)
             for key, (id, limit_key, direction) in BW_JOBS.items()}


def _efficiency(bw: float, ceiling: float | None, label: str) -> str:
    if not ceiling:
        return ""
    return f"{bw / ceiling * 100:.0f} % of the {ceiling / 1e9:.3g} GB/s ceiling" + (
        f" ({label})" if label else "")


def _no_job(*names: str) -> str:
    # A job missing from the report measured nothing: that is an ERROR, never a 0 that FAILs.
    return f"fio reported no job named {', '.join(repr(n) for n in names)}"


class StepOutcome(BaseModel):
    """What the suite hands the pure G1 rules: fio's report, or why there is none."""

    report: FioReport | None = None
    error: str = ""
    evidence: list[str] = []
    verify_failures: list[VerifyFailure] = []

    def problem(self) -> str:
        """Why no figure can be taken from this step, or ""."""
        return self.error or ("" if self.report else "fio produced no report")


# Other I/O on the target's device below both of these is noise (journal, logs), not contention.
OTHER_IO_FLOOR = 16 * 1024**2
OTHER_IO_SHARE = 0.10  # of what fio itself moved in the job


def restore_bw(step: StepOutcome) -> float:
    """Bytes/s the KV-restore job read, summed over its jobs and hosts (the pre-flight's input);
    call it on a step without a problem()."""
    return combine(step.report.named("kvrestore"), "read").bw_bytes


def other_io(title: str, device: str, device_io: tuple[int, int] | None,
             report: FioReport | None, buffered: bool = False) -> str:
    """A deviation when the target's device moved bytes during a job that fio did not ("" if not).

    Another process on the array (a second run, a backup, another tenant) takes its share of the
    bandwidth fio measures, and nothing else would show it.
    """
    if not device or device_io is None or report is None:
        return ""
    entries = report.entries()
    fio_read, fio_write = (sum(getattr(j, d).io_bytes for j in entries) for d in ("read", "write"))
    read, write = device_io
    other_read, other_write = max(0, read - fio_read), max(0, write - fio_write)
    other = other_read + other_write
    if other <= max(OTHER_IO_FLOOR, OTHER_IO_SHARE * (fio_read + fio_write)):
        return ""
    return (f"other I/O on the target's device {device} during '{title}': {_mib(other)} that fio "
            f"did not do (read {_mib(other_read)}, written {_mib(other_write)} beyond fio's "
            f"{_mib(fio_read)} read, {_mib(fio_write)} written): another process used the "
            "device, so this job's figures may be low"
            + ("; with direct = false, fio's own buffered writes may land in a later job"
               if buffered else ""))


def _mib(n: float) -> str:
    return f"{n / 1024**2:,.0f} MiB"


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
    report, evidence = step.report, step.evidence
    if step.problem():
        return Measurement.error(title, step.problem(), limit, evidence=evidence)
    if not report.named(key):
        return Measurement.error(title, _no_job(key), limit, evidence=evidence)
    bw = combine(report.named(key), direction).bw_bytes
    ceiling = ceilings.read_bw if direction == "read" else ceilings.write_bw
    return Measurement.measured(title, bw / scale, limit, evidence=evidence,
                                note=_efficiency(bw, ceiling, ceilings.label))


def steady_state(key: str, step: StepOutcome, limits: G1Limits,
                 band: float = 0.0) -> list[Measurement]:
    """The two SNIA rules for a bandwidth job, recomputed from fio's steady-state window."""
    stem = BW_JOBS[key][0].removesuffix("_bw")
    spread, slope = _steady_state(key, step, limits, band)
    return [G1[f"{stem}_steady_spread"].stamp(spread), G1[f"{stem}_steady_slope"].stamp(slope)]


def _steady_state(key: str, step: StepOutcome, limits: G1Limits,
                  band: float) -> list[Measurement]:
    title = BW_TITLES[key][0].replace(" bandwidth", "")
    spread_limit = Limit.at_most(limits.steady_state_spread_max, "%", marginal=band,
                                 key="g1.steady_state_spread_max")
    slope_limit = Limit.at_most(limits.steady_state_slope_max, "%", marginal=band,
                                key="g1.steady_state_slope_max")
    names = (f"{title}: steady-state spread", f"{title}: steady-state slope")
    evidence = step.evidence
    if step.problem():
        return [Measurement.error(n, step.problem(), lim, evidence=evidence)
                for n, lim in zip(names, (spread_limit, slope_limit), strict=True)]
    entries = [j for j in step.report.named(key) if j.steadystate]
    if not entries:
        return [Measurement.error(n, "fio reported no steady-state block", lim, evidence=evidence)
                for n, lim in zip(names, (spread_limit, slope_limit), strict=True)]
    # One block per host in client/server mode: every host must be steady, so judge the worst.
    try:
        judged = [(j.hostname, snia_steady_state(j.steadystate.data.bw, j.steadystate.attained,
                                                 j.steadystate.ss)) for j in entries]
    except SteadyStateUnavailable as exc:
        return [Measurement.error(n, str(exc), lim, evidence=evidence)
                for n, lim in zip(names, (spread_limit, slope_limit), strict=True)]

    def describe(host: str | None, ss: SteadyState) -> str:
        return (f"{host}: " if host and len(judged) > 1 else "") + ss.describe()

    spread_host, spread_ss = max(judged, key=lambda h: h[1].spread_pct)
    slope_host, slope_ss = max(judged, key=lambda h: h[1].slope_pct)
    spread = Measurement.measured(names[0], spread_ss.spread_pct, spread_limit,
                                  evidence=evidence, note=describe(spread_host, spread_ss))
    slope = Measurement.measured(names[1], slope_ss.slope_pct, slope_limit, evidence=evidence,
                                 note=describe(slope_host, slope_ss))
    unsteady = [(host, ss) for host, ss in judged if not ss.fio_attained]
    if unsteady:
        # fio's own criterion judges one-second samples; the SNIA rounds decide. Say it anyway.
        spread.note = describe(*unsteady[0]) + " (fio's per-second criterion is reported, " \
            "the SNIA rounds decide)"
    if not limits.steady_state_required:
        return [Measurement.not_applicable(m.name, f"reported only (g1.steady_state_required "
                                           f"is false): {m.value:.3g} % — {m.note}")
                for m in (spread, slope)]
    return [spread, slope]


def qd1_latency(step: StepOutcome, limits: G1Limits, band: float = 0.0) -> Measurement:
    """99th-percentile completion latency of 4 KiB random reads at QD1, if N supports it."""
    return G1["g1.randread_qd1_p99"].stamp(_qd1_latency(step, limits, band))


def _qd1_latency(step: StepOutcome, limits: G1Limits, band: float) -> Measurement:
    limit_us = limits.randread_4k_qd1_p99_max * 1e6
    limit = Limit.at_most(limit_us, "µs", key="g1.randread_4k_qd1_p99_max", marginal=band)
    name = "4 KiB random read QD1 p99 latency"
    evidence = step.evidence
    if step.problem():
        return Measurement.error(name, step.problem(), limit, evidence=evidence)
    if not step.report.named("randread-qd1"):
        return Measurement.error(name, _no_job("randread-qd1"), limit, evidence=evidence)
    clat = combine(step.report.named("randread-qd1"), "read").clat_ns
    if not samples_support(clat.N, 99):
        return Measurement.error(name, f"only {clat.N} I/Os; a p99 needs at least 1000 "
                                 "(run longer: site.toml [fio] runtime)", limit,
                                 evidence=evidence)
    p99 = clat.percentile_ns(99)
    if p99 is None:
        return Measurement.error(name, "fio reported no latency percentiles", limit,
                                 evidence=evidence)
    p50 = clat.percentile_ns(50) or 0
    return Measurement.measured(name, p99 / 1e3, limit, evidence=evidence,
                                note=f"N = {clat.N}; p50 {p50 / 1e3:.0f} µs")


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
    if step.problem():
        return Measurement.error(name, step.problem(), limit, evidence=evidence)
    if not depths:
        return Measurement.error(name, "no queue depths to sweep (site.toml [fio] qd_sweep)",
                                 limit, evidence=evidence)
    missing = [f"randread-qd{qd}" for qd in depths if not step.report.named(f"randread-qd{qd}")]
    if missing:
        return Measurement.error(name, _no_job(*missing), limit, evidence=evidence)
    curve = {qd: combine(step.report.named(f"randread-qd{qd}"), "read").iops for qd in depths}
    note = "IOPS by queue depth: " + ", ".join(f"QD{q} {v:,.0f}" for q, v in curve.items())
    return Measurement.measured(name, curve[max(depths)], limit, evidence=evidence, note=note)


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
        return Measurement.error(name, _no_job("verify"), limit, evidence=evidence)
    failures = step.verify_failures
    bad = max(sum(j.total_err for j in jobs), len(failures),
              int(any(j.error == EILSEQ for j in jobs)))
    written, read = (combine(jobs, d).io_bytes for d in ("write", "read"))
    checked = f"{_mib(read)} read back of {_mib(written)} written"
    if not bad and (not written or read < written):  # unread bytes are unverified, not good
        return Measurement.error(name, f"the verify job checked only {checked}", limit,
                                 evidence=evidence)
    where = "; ".join(f.describe() for f in failures[:3]) + (
        f" (and {len(failures) - 3} more)" if len(failures) > 3 else "")
    note = (f"{bad} block{'s' * (bad != 1)} read back other than written, {checked}"
            + (f": {where}" if where else "")) if bad else f"every block as written, {checked}"
    return Measurement.measured(name, bad, limit, evidence=evidence, note=note)
