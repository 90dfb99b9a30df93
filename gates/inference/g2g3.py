"""G2 baseline and G3 main gate: repetitions turned into Measurements. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from ..core.configuration import CvPlan, Decision, G2Limits, G3Limits
from ..core.statistics import median, percentile
from ..core.verdicts import (
    G2,
    G3,
    Cause,
    Coverage,
    Declared,
    Deviation,
    Limit,
    Measurement,
    Outcome,
)
from ..proof import (
    ProofContext,
    Signal,
    StorageReads,
    chain_measurement,
    probe_chain,
    recompute_row,
    storage_proof,
)
from .comparison import Pair, comparison
from .control import g3_loadgen_fit, g3_request_errors, recompute_reference, self_check
from .correctness import kv_read_back
from .machine import cpu_speeds, device_speeds, distinct
from .repetitions import Repetition, probe_evidence
from .units import (
    coverage,
    fit_read,
    g2_units,
    planned,
    rep_figures,
    sent,
    shown,
    throughput,
    ttft_p50,
)


def by_concurrency(reps: Sequence[Repetition]) -> dict[int, list[Repetition]]:
    """Repetitions grouped by concurrency level, each group in repetition order."""
    groups: dict[int, list[Repetition]] = {}
    for rep in sorted(reps, key=lambda r: (r.concurrency, r.repetition)):
        groups.setdefault(rep.concurrency, []).append(rep)
    return groups


def starved(reps: Sequence[Repetition], limits: G2Limits) -> list[Deviation]:
    """A deviation for each baseline repetition another process may have starved of CPU."""
    return [Deviation(cause=Cause.BASELINE_STARVED, text=(
        f"baseline may be starved: during repetition {r.repetition + 1} at concurrency "
        f"{r.concurrency} {r.cpu.line()} (g2.other_cpu_max {limits.other_cpu_max:g} %)"))
        for r in reps if r.cpu is not None and r.cpu.other_pct > limits.other_cpu_max]


def _busiest(reps: Sequence[Repetition]) -> str:
    used = [r.cpu for r in reps if r.cpu is not None]
    return f"; {max(used, key=lambda u: u.other_pct).line()}" if used else ""


def _controls(reps: Sequence[Repetition], limits: G2Limits) -> tuple[str, str]:
    """(what the machine's controls read, why a CV failure cannot stand: "" where every
    control that was read is credibly steady).

    Each control's readings (each once: machine.distinct) get the CV and interval G2's own
    CVs get, at g2.cv_risk, so their noise counts as the baseline's does, and their number
    does not widen the figure (a range over them would).
    """
    plan, read = CvPlan(limits), ""
    said, why = [], []
    for what, speeds, cap, key in (
            ("the machine's CPU speed", cpu_speeds(distinct([r.machine for r in reps])),
             limits.cpu_speed_steady_cv, "g2.cpu_speed_steady_cv"),
            ("the KV device's read speed", device_speeds(distinct([r.device for r in reps])),
             limits.device_speed_steady_cv, "g2.device_speed_steady_cv")):
        iv = plan.control(speeds)
        if iv is None:
            continue
        said.append(f"; {what}: {iv.text()} readings")
        if iv.lo > cap:
            why.append(f"{what} moved ({iv.text()} readings, credibly above {key} {cap:g} %)")
        elif iv.hi > cap:
            why.append(f"{what} was not shown steady ({iv.text()} readings, its upper bound "
                       f"above {key} {cap:g} %)")
        read = what
    failed = next((x.error for r in reps for x in r.device if x.error), "")
    if failed and read != "the KV device's read speed":
        # A control that could not be read is said, never taken for a steady device.
        said.append(f"; {failed}")
    return "".join(said), "; ".join(why)


def _judged(declared: Declared, c: int, cov: Coverage, figure: tuple[float, float, float],
            outcome: Outcome, limit: Limit, note: str, limits: G2Limits) -> Measurement:
    # The CV (point, lo, hi) with the plan's whole risk, not one look's (the plan stops on it).
    # An upper end the data cannot give (infinite) is held as 1e6 %: JSON has no infinity.
    point, lo, hi = figure
    return declared.stamp(cov.judge(Measurement(
        name="", value=point, unit="%", limit=limit, outcome=outcome,
        interval=(lo, min(hi, 1e6)), interval_miss=limits.cv_risk / 100, note=note)), c)


def _cv(declared: Declared, c: int, cov: Coverage, values: list[float], limits: G2Limits,
        what: str, reps: Sequence[Repetition] = ()) -> Measurement:
    limit, plan = Limit.at_most(limits.cv_max, "%", key="g2.cv_max"), CvPlan(limits)
    ran = g2_units(reps)
    if none := {u: why for u, why in cov.failed.items() if u in ran}:
        # A CV over the repetitions that gave a figure is not the level's: the one that gave
        # none (a stalled or failed probe) is the likeliest outlier, and without it the rest
        # look steadier than the level was. No CV of the others is said, lest it be read as one.
        # (A planned repetition that never ran is the first look's shortfall, said below.)
        return cov.judge(declared.error(
            f"INCONCLUSIVE: a run-to-run CV needs every repetition's {what}, and "
            f"{len(none)} of the {len(ran)} that ran gave none ("
            + "; ".join(f"#{u} {why}" for u, why in none.items()) + ")", limit, at=c))
    iv = plan.interval(values)
    if iv is None:
        return cov.judge(declared.error(f"need at least 2 repetitions with a non-zero {what}",
                                        limit, at=c))
    said, machine = _controls(reps, limits)
    about = (f"{iv.text()} repetitions, each end at {100 * iv.miss:.2g} % (g2.cv_risk "
            f"{limits.cv_risk:g} % over looks at {_span(plan.looks)} repetitions)")
    each = f"{about}; per repetition: " + ", ".join(f"{v:.4g}" for v in values) + said
    at, fig = plan.decided(iv), (iv.point, iv.lo, iv.hi)
    if iv.n < limits.repetitions:
        return _judged(declared, c, cov, fig, Outcome.ERROR, limit, (
            f"INCONCLUSIVE: {iv.n} repetitions, fewer than the plan's first look "
            f"(g2.repetitions {limits.repetitions}); {each}"), limits)
    if at == "pass":
        return _judged(declared, c, cov, fig, Outcome.PASS, limit, each, limits)
    if at == "fail" and machine:
        # Not shown to be the baseline's instability rather than the machine's: says nothing.
        return _judged(declared, c, cov, fig, Outcome.ERROR, limit, (
            f"INCONCLUSIVE: {what} CV credibly above {limits.cv_max:g} %, but {machine} over these "
            f"repetitions{_busiest(reps)}; {each}"), limits)
    if at == "fail":
        # A credible CV failure on a steady machine is a real measurement; say what else ran.
        return _judged(declared, c, cov, fig, Outcome.FAIL, limit, (
            f"baseline unstable: {what} CV credibly above {limits.cv_max:g} %"
            f"{_busiest(reps)}; {each}"), limits)
    # The plan adds repetitions until the budget unless another figure of the level failed
    # or was missing (stability.needs_more): then the reader is told the budget was not spent.
    stopped = "" if iv.n >= limits.repetitions_max else (
        "; the level ended before its budget (another of its figures failed or is missing, "
        "or the run stopped)")
    return _judged(declared, c, cov, fig, Outcome.ERROR, limit, (
        f"INCONCLUSIVE: {what} CV neither credibly under nor over {limits.cv_max:g} % after "
        f"{iv.n} of at most {limits.repetitions_max} repetitions (g2.repetitions_max)"
        f"{stopped}{_busiest(reps)}; {each}"), limits)


def _span(r: range) -> str:
    return f"{r.start}" if len(r) == 1 else f"{r.start}-{r[-1]}"


def g2_level(c: int, reps: list[Repetition], limits: G2Limits) -> list[Measurement]:
    """The G2 measurements of one concurrency level, each over every repetition the level ran
    and those its plan's first look needs (gates.inference.units): none is dropped unread."""
    units, not_run = g2_units(reps), planned(reps, limits.repetitions)
    errors = sum(r.errors for r in reps)
    texts = "; ".join(r.error_text for r in reps if r.error_text)
    out = [G2["g2.request_errors"].stamp(coverage(units, sent, not_run).judge(
        Measurement.measured("", errors, Limit.at_most(
            limits.request_errors_max, "requests", key="g2.request_errors_max"),
            note=texts or f"{sum(r.sent for r in reps)} requests sent")), c)]
    p50 = rep_figures(units, ttft_p50, "TTFT p50", not_run)
    tput = rep_figures(units, throughput, "output throughput", not_run)
    p99 = rep_figures(units, lambda r: percentile(r.ttfts, 99) if r.ttfts else None,
                      "TTFT p99", not_run)
    for id, (cov, values), unit in (("g2.ttft_p50", p50, "s"), ("g2.ttft_p99", p99, "s"),
                                    ("g2.output_throughput", tput, "tok/s")):
        # The baseline's own figures: what G3's control must not move from, and what the
        # procurement summary shows. Reported, not judged: no limit in thresholds.toml holds
        # a site's absolute TTFT (it is the model's and the context's, not the storage's).
        # A median of the repetitions that gave one is not the level's: ERROR, naming those.
        out.append(G2[id].stamp(shown(cov,
            Measurement.reported("", median(values), unit,
                                 note=f"median over {len(values)} repetitions")), c)
                   if cov.complete else cov.judge(G2[id].error(
                       f"{len(cov.missing)} of {len(cov.expected)} repetitions have no "
                       + ("figure" if not_run else "successful request"), at=c)))
    out.append(_cv(G2["g2.ttft_p50_cv"], c, p50[0], p50[1], limits, "TTFT p50", reps))
    out.append(_cv(G2["g2.throughput_cv"], c, tput[0], tput[1], limits, "throughput", reps))
    out.append(self_check(G2["g2.loadgen_fit"], c, coverage(units, fit_read, not_run), reps))
    return out


def g2_measurements(reps: Sequence[Repetition], limits: G2Limits) -> list[Measurement]:
    """Every G2 measurement, level by level."""
    return [m for c, group in by_concurrency(reps).items() for m in g2_level(c, group, limits)]


def g3_measurements(pairs: dict[int, list[Pair]], recompute: Sequence[Repetition],
                    limits: G3Limits, decision: Decision,
                    chains: dict[int, list[Signal]] | None = None,
                    kv_bytes_per_token: int | None = None,
                    time_spent: bool = False,
                    set_aside: dict[int, list[Pair]] | None = None,
                    comparison_seconds: float = 0.0) -> list[Measurement]:
    """Every G3 measurement per concurrency level (correctness is added by the suite).

    pairs are each level's (baseline, candidate) repetitions as they ran, ABBA, set_aside the
    pairs measured again because the load generator was unfit in them, comparison_seconds
    how long they all ran (0: not known; the stated risk then ignores the time budget); chains are
    the levels' evidence chains (g3_chains); without them they are built with the default
    proof context (no G1 bandwidth, no host memory: the controls then say so).
    """
    cand = [c for level in pairs.values() for _, c in level]
    rec_by = by_concurrency(recompute)
    if chains is None:
        chains = g3_chains(cand, recompute, ProofContext(
            read_fraction_min=limits.storage_read_fraction_min,
            band=(limits.storage_side_band_min, limits.storage_side_band_max)),
            kv_bytes_per_token)
    out: list[Measurement] = []
    for c, level in sorted(pairs.items()):
        group = [x for _, x in level]
        out.append(g3_request_errors(c, level))
        out += comparison(c, level, limits, decision, time_spent, comparison_seconds)
        out += storage_proof(c, [r.evidence for r in group], limits, kv_bytes_per_token,
                             [r.restore_gbps for r in group])
        out.append(kv_read_back(c, group))
        out.append(G3["g3.evidence_chain"].stamp(chain_measurement("", chains[c]), c))
        if c in rec_by:
            out += recompute_reference(c, group, rec_by[c])
        out.append(g3_loadgen_fit(c, level, (set_aside or {}).get(c, [])))
    return out


def g3_chains(cand: Sequence[Repetition], recompute: Sequence[Repetition],
              proof: ProofContext, kv_bytes_per_token: int | None) -> dict[int, list[Signal]]:
    """The evidence chain of every candidate level."""
    rec_by = by_concurrency(recompute)
    return {c: level_chain(group, rec_by.get(c, []), proof, kv_bytes_per_token)
            for c, group in by_concurrency(cand).items()}


def level_chain(cand: list[Repetition], recompute: list[Repetition], proof: ProofContext,
                kv_bytes_per_token: int | None) -> list[Signal]:
    """The evidence chain of one level's candidate probes (and its recompute arm's)."""
    evidence = probe_evidence(cand, kv_bytes_per_token)
    signals = probe_chain(evidence, proof)
    watched = [d for r in recompute if r.evidence.storage is not None
               and (d := r.evidence.storage.device_bytes) is not None]
    if watched:
        reads = StorageReads(device_bytes=sum(watched))
        per_rep = evidence.expected_bytes / max(evidence.repetitions, 1) \
            if evidence.expected_bytes else None
        signals.append(recompute_row(reads, per_rep * len(watched) if per_rep else None))
    return signals
