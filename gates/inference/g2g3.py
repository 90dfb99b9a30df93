"""G2 baseline and G3 main gate: repetitions turned into Measurements. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from ..core import (
    G2,
    G3,
    Decision,
    Declared,
    G2Limits,
    G3Limits,
    Limit,
    Measurement,
    Outcome,
    cv_percent,
    median,
    percentile,
    speedup,
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
from .correctness import kv_read_back
from .machine import device_variation, speed_variation
from .repetitions import Repetition, probe_evidence


def by_concurrency(reps: Sequence[Repetition]) -> dict[int, list[Repetition]]:
    """Repetitions grouped by concurrency level, each group in repetition order."""
    groups: dict[int, list[Repetition]] = {}
    for rep in sorted(reps, key=lambda r: (r.concurrency, r.repetition)):
        groups.setdefault(rep.concurrency, []).append(rep)
    return groups


def starved(reps: Sequence[Repetition], limits: G2Limits) -> list[str]:
    """A deviation for each baseline repetition another process may have starved of CPU."""
    return [f"baseline may be starved: during repetition {r.repetition + 1} at concurrency "
            f"{r.concurrency} {r.cpu.line()} (g2.other_cpu_max {limits.other_cpu_max:g} %)"
            for r in reps if r.cpu is not None and r.cpu.other_pct > limits.other_cpu_max]


def _busiest(reps: Sequence[Repetition]) -> str:
    used = [r.cpu for r in reps if r.cpu is not None]
    return f"; {max(used, key=lambda u: u.other_pct).line()}" if used else ""


def _machine_moved(reps: Sequence[Repetition], limits: G2Limits) -> tuple[str, str]:
    """(what the machine's controls say moved, why a CV failure is the machine's or "")."""
    speed = speed_variation([x for r in reps for x in r.machine])
    device = device_variation([x for r in reps for x in r.device])
    failed = next((x.error for r in reps for x in r.device if x.error), "")
    said = "".join((
        "" if speed is None else f"; the machine's CPU speed varied by {speed:.1f} %",
        "" if device is None else f"; the KV device's read speed varied by {device:.1f} %",
        # A control that could not be read is said, never taken for a steady device.
        f"; {failed}" if failed and device is None else ""))
    if speed is not None and speed > limits.cpu_speed_variation_max:
        return said, (f"the machine's CPU speed varied by {speed:.1f} % "
                      f"(g2.cpu_speed_variation_max {limits.cpu_speed_variation_max:g} %)")
    if device is not None and device > limits.device_speed_variation_max:
        return said, (f"the KV device's read speed varied by {device:.1f} % "
                      f"(g2.device_speed_variation_max {limits.device_speed_variation_max:g} %)")
    return said, ""


def _cv(declared: Declared, c: int, values: list[float], limits: G2Limits,
        what: str, reps: Sequence[Repetition] = ()) -> Measurement:
    limit = Limit.at_most(limits.cv_max, "%", key="g2.cv_max")
    cv = cv_percent(values)
    if cv is None:
        return declared.error(f"need at least 2 repetitions with a non-zero {what}", limit, at=c)
    moved, machines = _machine_moved(reps, limits)
    each = "per repetition: " + ", ".join(f"{v:.4g}" for v in values)
    m = declared.measured(cv, limit, at=c, note=each + moved)
    if m.outcome is Outcome.FAIL and machines:
        # Not the baseline's instability but the machine's: the measurement says nothing.
        return declared.error(
            f"INCONCLUSIVE: CV {cv:.1f} % > {limits.cv_max:g} %, but {machines} over these "
            f"repetitions{_busiest(reps)}; {each}{moved}", limit, at=c)
    if m.outcome is Outcome.FAIL:
        # A CV failure under load is a real measurement; say what else ran.
        m.note = (f"baseline unstable: CV {cv:.1f} % > {limits.cv_max:g} %{_busiest(reps)}; "
                  f"{m.note}")
    return m


def g2_level(c: int, reps: list[Repetition], limits: G2Limits) -> list[Measurement]:
    """The G2 measurements of one concurrency level."""
    errors = sum(r.errors for r in reps)
    texts = "; ".join(r.error_text for r in reps if r.error_text)
    out = [G2["g2.request_errors"].measured(
        errors, Limit.at_most(limits.request_errors_max, "requests", key="g2.request_errors_max"),
        at=c, note=texts or f"{sum(r.sent for r in reps)} requests sent")]
    p50s = [r.ttft_p50 for r in reps if r.ttft_p50]
    p99s = [percentile(r.ttfts, 99) for r in reps if r.ttfts]
    tputs = [r.output_throughput for r in reps if r.output_throughput]
    for id, values, unit in (("g2.ttft_p50", p50s, "s"), ("g2.ttft_p99", p99s, "s"),
                             ("g2.output_throughput", tputs, "tok/s")):
        # The baseline's own figures: what G3's control must not move from, and what the
        # procurement summary shows. Reported, not judged: no limit in thresholds.toml holds
        # a site's absolute TTFT (it is the model's and the context's, not the storage's).
        missing = len(reps) - len(values)
        out.append(G2[id].reported(median(values), unit, at=c,
                                   note=f"median over {len(values)} repetitions")
                   if values and not missing else
                   G2[id].error(f"{missing} of {len(reps)} repetitions have no successful "
                                "request", at=c))
    out.append(_cv(G2["g2.ttft_p50_cv"], c, p50s, limits, "TTFT p50", reps))
    out.append(_cv(G2["g2.throughput_cv"], c, tputs, limits, "throughput", reps))
    out.append(self_check(G2["g2.loadgen_fit"], c, reps))
    return out


def _reasons(reps: Sequence[Repetition]) -> str:
    return "; ".join(sorted({x for r in reps if not r.fit for x in r.unfit_reasons}))


def self_check(declared: Declared, c: int, reps: list[Repetition],
               set_aside: Sequence[Pair] = ()) -> Measurement:
    """Repetitions where the load generator, not the server, was the bottleneck.

    An unfit repetition is kvgate's instrument failing, not the storage: its timestamps carry
    the generator's own delay, so the level is INCONCLUSIVE (an ERROR), never a FAIL. G3
    gives both arms' kept repetitions (each arm's count is said); its pairs that were unfit
    and measured again (set_aside) are named, not judged.
    """
    unfit = [r for r in reps if not r.fit]
    limit = Limit.at_most(0, "repetitions")
    again = (f"; {len(set_aside)} unfit pair{'s' if len(set_aside) > 1 else ''} set aside "
             f"unjudged and measured again ({_reasons([r for p in set_aside for r in p])})"
             if set_aside else "")
    if not unfit:
        return declared.measured(0, limit, at=c,
                                 note="event-loop and schedule lag within limits" + again)
    reasons = _reasons(unfit)
    return declared.error(
        f"INCONCLUSIVE: the load generator was unfit in {len(unfit)} of {len(reps)} "
        f"repetitions{_by_arm(reps)}, so their timings carry its own delay and say nothing of "
        "the storage "
        f"(re-run with nothing else on the machine){': ' + reasons if reasons else ''}{again}",
        limit, at=c)


# G3's arms by the words its measurements use for them.
_ARM_WORDS = {"baseline": "the control baseline's", "candidate": "the candidate's"}


def _by_arm(reps: Sequence[Repetition]) -> str:
    """How many of each arm's repetitions were unfit, when the repetitions are several arms'."""
    arms = sorted({r.arm for r in reps})
    if len(arms) < 2:
        return ""
    return " (" + ", ".join(
        f"{_ARM_WORDS.get(a, a)} {sum(not r.fit for r in reps if r.arm == a)} of "
        f"{sum(r.arm == a for r in reps)}" for a in arms) + ")"


def g3_request_errors(c: int, level: Sequence[Pair]) -> Measurement:
    """Both arms' failed requests in the level's kept pairs.

    The candidate's are its own failure (FAIL). The control baseline's leave its figures short
    of the requests that failed, and so say nothing fair about the gain: INCONCLUSIVE (an
    ERROR), never a PASS, while the candidate had none.
    """
    base, cand = [b for b, _ in level], [x for _, x in level]
    errors, control = sum(r.errors for r in cand), sum(r.errors for r in base)
    limit = Limit.at_most(0, "requests")
    texts = "; ".join(r.error_text for r in base if r.error_text)
    said = (f"the control baseline had {control} request error{'s' if control > 1 else ''} in "
            f"its {len(base)} kept repetitions ({sum(r.sent for r in base)} requests sent)"
            + (f": {texts}" if texts else ""))
    if control and not errors:
        return G3["g3.request_errors"].error(
            f"INCONCLUSIVE: {said}; a failed request is left out of the baseline's figures, "
            "which then are no fair control (the candidate had none)", limit, at=c)
    note = ("; ".join(r.error_text for r in cand if r.error_text)
            or f"{sum(r.sent for r in cand)} requests sent")
    return G3["g3.request_errors"].measured(errors, limit, at=c,
                                            note=note + (f"; {said}" if control else ""))


def g2_measurements(reps: Sequence[Repetition], limits: G2Limits) -> list[Measurement]:
    """Every G2 measurement, level by level."""
    return [m for c, group in by_concurrency(reps).items() for m in g2_level(c, group, limits)]


def recompute_reference(c: int, cand: list[Repetition],
                        recompute: list[Repetition]) -> list[Measurement]:
    """How much faster the candidate is than recomputing the KV (the seed's 12.6x / 18.3x)."""
    out = []
    for id, pick, better in (("g3.ttft_speedup_vs_recompute", lambda r: r.ttft_p50, "lower"),
                             ("g3.throughput_speedup_vs_recompute",
                              lambda r: r.output_throughput, "higher")):
        a = [pick(r) for r in recompute if pick(r)]
        b = [pick(r) for r in cand if pick(r)]
        limit = Limit(lo=1.0, lo_inclusive=False, unit="x", relative_to="the recompute arm")
        out.append(G3[id].measured(speedup(median(a), median(b), better=better), limit, at=c)
                   if a and b else
                   G3[id].error("no successful probe on one of the arms", limit, at=c))
    return out


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
        # Both arms' repetitions: an unfit control baseline inflates its own TTFT, and so the
        # reduction, as surely as an unfit candidate deflates the candidate's.
        out.append(self_check(G3["g3.loadgen_fit"], c, [r for p in level for r in p],
                              (set_aside or {}).get(c, [])))
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
