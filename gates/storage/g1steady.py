"""G1's steady-state rules: the SNIA spread and slope of a bandwidth job, recomputed from fio's
steady-state window on every planned host and judged on the worst. Pure."""

from __future__ import annotations

from ..core.configuration import G1Limits
from ..core.statistics import SteadyState, SteadyStateUnavailable, snia_steady_state
from ..core.verdicts import G1, Coverage, Limit, Measurement
from .fio import FioJob
from .g1cover import LOCAL, coverage, host_entries
from .g1step import BW_JOBS, BW_TITLES, StepOutcome


def steady_state(key: str, step: StepOutcome, limits: G1Limits,
                 band: float = 0.0) -> list[Measurement]:
    """The two SNIA rules for a bandwidth job, recomputed from fio's steady-state window."""
    stem = BW_JOBS[key][0].removesuffix("_bw")
    spread, slope = _steady_state(key, step, limits, band)
    return [G1[f"{stem}_steady_spread"].stamp(spread), G1[f"{stem}_steady_slope"].stamp(slope)]


def _block(entries: list[FioJob]) -> str:
    return "" if any(e.steadystate for e in entries) else "has no steady-state block"


def _per_host(key: str, step: StepOutcome) -> tuple[list[tuple[str, SteadyState]], Coverage]:
    """Every planned host's SNIA rounds (one per steady-state block), and which hosts gave
    none (and why)."""
    hosts = host_entries(step.report, key)
    judged: list[tuple[str, SteadyState]] = []
    failed: dict[str, str] = {}
    for host, entries in hosts.by_host.items():
        # One block per host (group_reporting); with several, every one must be steady.
        for block in (e.steadystate for e in entries if e.steadystate):
            try:
                found = snia_steady_state(block.data.bw, block.attained, block.ss)
            except SteadyStateUnavailable as exc:
                failed[host] = str(exc)
                break
            judged.append((host, found))
    cov = coverage([hosts], _block, failed)
    return [(h, ss) for h, ss in judged if h in cov.read], cov


def _steady_state(key: str, step: StepOutcome, limits: G1Limits,
                  band: float) -> list[Measurement]:
    title = BW_TITLES[key][0].replace(" bandwidth", "")
    limits_ = (Limit.at_most(limits.steady_state_spread_max, "%", marginal=band,
                             key="g1.steady_state_spread_max"),
               Limit.at_most(limits.steady_state_slope_max, "%", marginal=band,
                             key="g1.steady_state_slope_max"))
    names = (f"{title}: steady-state spread", f"{title}: steady-state slope")
    evidence = step.evidence

    def errors(why: str, cov: Coverage | None = None) -> list[Measurement]:
        out = [Measurement.error(n, why, lim, evidence=evidence)
               for n, lim in zip(names, limits_, strict=True)]
        return [cov.judge(m) for m in out] if cov else out
    if step.report is None:
        return errors(step.problem())
    try:
        judged, cov = _per_host(key, step)
    except ValueError as exc:
        return errors(step.problem() or str(exc))
    if step.problem():  # the coverage shows which hosts fio's report says it failed on
        return errors(step.problem(), cov)
    if not judged:
        whys = list(dict.fromkeys(cov.missing.values()))
        return errors(whys[0] if len(whys) == 1 else cov.describe(), cov)

    def describe(host: str, ss: SteadyState) -> str:
        return ("" if host == LOCAL or len(cov.expected) == 1 else f"{host}: ") + ss.describe()

    # Every host must be steady, so judge the worst: a host not read could only be worse, so a
    # FAIL found in those read stands and anything better is capped by the coverage.
    spread_host, spread_ss = max(judged, key=lambda h: h[1].spread_pct)
    slope_host, slope_ss = max(judged, key=lambda h: h[1].slope_pct)
    spread = Measurement.measured(names[0], spread_ss.spread_pct, limits_[0],
                                  evidence=evidence, note=describe(spread_host, spread_ss))
    slope = Measurement.measured(names[1], slope_ss.slope_pct, limits_[1], evidence=evidence,
                                 note=describe(slope_host, slope_ss))
    unsteady = [(host, ss) for host, ss in judged if not ss.fio_attained]
    if unsteady:
        # fio's own criterion judges one-second samples; the SNIA rounds decide. Say it anyway.
        spread.note = describe(*unsteady[0]) + " (fio's per-second criterion is reported, " \
            "the SNIA rounds decide)"
    if not limits.steady_state_required:
        partial = "" if cov.complete else f"; {cov.describe()}"
        return [Measurement.not_applicable(m.name, f"reported only (g1.steady_state_required "
                                           f"is false): {m.value:.3g} % — {m.note}{partial}")
                for m in (spread, slope)]
    return [cov.judge(spread), cov.judge(slope)]
