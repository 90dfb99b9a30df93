"""G2 baseline and G3 main gate: repetitions turned into Measurements. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from ._metrics import percentile
from ._repetition import Repetition
from ._settings import Decision, G2Limits, G3Limits
from ._stats import (
    Comparison,
    above_claimed_band,
    cv_percent,
    decide,
    median,
    speedup,
    throughput_gain,
    ttft_reduction,
)
from ._verdict import Limit, Measurement, Outcome

PROOF_FAILED = "KV did not come from the candidate storage"
GPU_HIT_MAX = 1.0  # % of the expected KV tokens a cold probe may find in the GPU cache


def _positive(unit: str) -> Limit:
    # A figure reported for the record: it must exist and be positive to count as measured.
    return Limit(lo=0.0, lo_inclusive=False, unit=unit)


def _at(c: int) -> str:
    return f"@ concurrency {c}"


def by_concurrency(reps: Sequence[Repetition]) -> dict[int, list[Repetition]]:
    """Repetitions grouped by concurrency level, each group in repetition order."""
    groups: dict[int, list[Repetition]] = {}
    for rep in sorted(reps, key=lambda r: (r.concurrency, r.repetition)):
        groups.setdefault(rep.concurrency, []).append(rep)
    return groups


def _cv(name: str, values: list[float], limits: G2Limits, what: str) -> Measurement:
    limit = Limit.at_most(limits.cv_max, "%", key="g2.cv_max")
    cv = cv_percent(values)
    if cv is None:
        return Measurement.error(name, f"need at least 2 repetitions with a non-zero {what}",
                                 limit)
    m = Measurement.measured(name, cv, limit, note="per repetition: "
                             + ", ".join(f"{v:.4g}" for v in values))
    if m.outcome is Outcome.FAIL:
        m.note = f"baseline unstable: CV {cv:.1f} % > {limits.cv_max:g} %; {m.note}"
    return m


def g2_level(c: int, reps: list[Repetition], limits: G2Limits) -> list[Measurement]:
    """The G2 measurements of one concurrency level."""
    errors = sum(r.errors for r in reps)
    texts = "; ".join(r.error_text for r in reps if r.error_text)
    out = [Measurement.measured(f"Baseline request errors {_at(c)}", errors,
                                Limit.at_most(limits.request_errors_max, "requests",
                                              key="g2.request_errors_max"),
                                note=texts or f"{sum(r.sent for r in reps)} requests sent")]
    p50s = [r.ttft_p50 for r in reps if r.ttft_p50]
    p99s = [percentile(r.ttfts, 99) for r in reps if r.ttfts]
    tputs = [r.output_throughput for r in reps if r.output_throughput]
    for name, values, unit in ((f"Baseline TTFT p50 {_at(c)}", p50s, "s"),
                               (f"Baseline TTFT p99 {_at(c)}", p99s, "s"),
                               (f"Baseline output throughput {_at(c)}", tputs, "tok/s")):
        out.append(Measurement.measured(name, median(values), _positive(unit),
                                        note=f"median over {len(values)} repetitions")
                   if values else Measurement.error(name, "no successful request", _positive(unit)))
    out.append(_cv(f"Baseline TTFT p50 run-to-run CV {_at(c)}", p50s, limits, "TTFT p50"))
    out.append(_cv(f"Baseline throughput run-to-run CV {_at(c)}", tputs, limits, "throughput"))
    out.append(self_check(f"Load generator fit for a gate {_at(c)}", reps))
    return out


def self_check(name: str, reps: list[Repetition]) -> Measurement:
    """Repetitions where the load generator, not the server, was the bottleneck."""
    unfit = [r for r in reps if not r.fit]
    reasons = "; ".join(sorted({x for r in unfit for x in r.unfit_reasons}))
    return Measurement.measured(name, len(unfit), Limit.at_most(0, "repetitions"),
                                note=reasons or "event-loop and schedule lag within limits")


def g2_measurements(reps: Sequence[Repetition], limits: G2Limits) -> list[Measurement]:
    """Every G2 measurement, level by level."""
    return [m for c, group in by_concurrency(reps).items() for m in g2_level(c, group, limits)]


def _compare(name: str, comparison: Comparison, limit: Limit, statistic: str,
             note: str = "") -> Measurement:
    return Measurement(name=name, value=comparison.point, unit=limit.unit, limit=limit,
                       outcome=decide(comparison, limit, statistic),
                       interval=comparison.interval,
                       note="; ".join(filter(None, [comparison.statistic_text, note])))


def gains(c: int, base: list[Repetition], cand: list[Repetition], limits: G3Limits,
          decision: Decision) -> list[Measurement]:
    """TTFT p50 reduction and output-throughput gain of the candidate over the G2 baseline."""
    ttft_limit = Limit.at_least(limits.ttft_p50_reduction_min, "%",
                                key="g3.ttft_p50_reduction_min",
                                relative_to=f"G2 TTFT p50 {_at(c)}")
    gain_limit = Limit.at_least(limits.throughput_gain_min, "%", key="g3.throughput_gain_min",
                                relative_to=f"G2 output throughput {_at(c)}")
    names = (f"TTFT p50 reduction {_at(c)}", f"Output-throughput gain {_at(c)}")
    try:
        ttft = ttft_reduction([r.ttfts for r in base], [r.ttfts for r in cand],
                              confidence=decision.confidence)
        tput = throughput_gain([r.output_throughput or 0.0 for r in base],
                               [r.output_throughput or 0.0 for r in cand],
                               confidence=decision.confidence)
    except ValueError as exc:
        return [Measurement.error(n, str(exc), lim)
                for n, lim in zip(names, (ttft_limit, gain_limit), strict=True)]
    claimed = limits.throughput_gain_claimed_max
    note = (f"above the claimed band (+{limits.throughput_gain_min:g}…+{claimed:g} %): check "
            "that the baseline was configured fairly" if above_claimed_band(tput.point, claimed)
            else "")
    return [_compare(names[0], ttft, ttft_limit, decision.statistic),
            _compare(names[1], tput, gain_limit, decision.statistic, note)]


def storage_proof(c: int, cand: list[Repetition], limits: G3Limits) -> list[Measurement]:
    """The candidate's probe read its KV from storage, not from the GPU cache."""
    expected = sum(r.expected_kv_tokens for r in cand)
    reads = [r.storage_read_tokens for r in cand]
    gpu = [r.gpu_hit_tokens for r in cand]
    fraction_limit = Limit.at_least(limits.storage_read_fraction_min, "%",
                                    key="g3.storage_read_fraction_min")
    name = f"KV tokens read from the candidate storage {_at(c)}"
    if any(x is None for x in reads) or not expected:
        read = Measurement.error(name, "the engine exposes no storage-read counter", fraction_limit)
    else:
        read = Measurement.measured(name, sum(reads) / expected * 100, fraction_limit,
                                    note=f"{sum(reads):,.0f} of {expected:,} expected tokens")
    hits_limit = Limit.at_most(GPU_HIT_MAX, "%")
    hits_name = f"KV tokens served from the GPU cache during the probe {_at(c)}"
    hits = Measurement.error(hits_name, "the engine exposes no GPU-cache hit counter",
                             hits_limit) if any(x is None for x in gpu) or not expected else \
        Measurement.measured(hits_name, sum(gpu) / expected * 100, hits_limit,
                             note="a cold probe must not be answered by the GPU cache")
    disk = device_reads(c, cand, fraction_limit)
    own = [process_reads(c, cand, fraction_limit)] \
        if all(r.process_read_bytes is not None for r in cand) else []
    for m in (read, hits, disk, *own):
        if m.outcome is Outcome.FAIL:
            m.note = f"{PROOF_FAILED}: {m.note}"
    gbps = [r.restore_gbps for r in cand if r.restore_gbps]
    if gbps and read.outcome is not Outcome.ERROR:
        read.note += f"; effective KV restore {median(gbps):.3g} GB/s (median)"
    return [read, hits, disk, *own]


def device_reads(c: int, cand: list[Repetition], limit: Limit) -> Measurement:
    """The KV devices' own read bytes rose by what the engine says it read (no page cache)."""
    name = f"KV devices' read bytes vs the engine's storage reads {_at(c)}"
    engine = [r.storage_read_bytes for r in cand]
    device = [r.device_read_bytes for r in cand]
    if any(d is None for d in device):
        return Measurement.not_applicable(name, "no block device to watch: name the array's "
                                          "devices in site.toml [topology] devices")
    if any(e is None for e in engine) or not sum(engine):
        return Measurement.error(name, "the engine exposes no storage-read byte counter", limit)
    return Measurement.measured(name, sum(device) / sum(engine) * 100, limit,
                                note=f"devices read {sum(device):,} bytes, the engine "
                                f"{sum(engine):,.0f} (a page-cache hit reads no device)")


def process_reads(c: int, cand: list[Repetition], limit: Limit) -> Measurement:
    """The engine process made the storage layer read what its restores say they read."""
    name = f"Engine process's storage reads vs its KV restores {_at(c)}"
    engine = sum(r.storage_read_bytes or 0 for r in cand)
    process = sum(r.process_read_bytes or 0 for r in cand)
    if not engine:
        return Measurement.error(name, "the engine reports no bytes restored", limit)
    return Measurement.measured(name, process / engine * 100, limit,
                                note=f"the process read {process:,} bytes from storage "
                                "(/proc/PID/io read_bytes: page-cache hits do not count), its "
                                f"restores {engine:,.0f}")


def recompute_reference(c: int, cand: list[Repetition],
                        recompute: list[Repetition]) -> list[Measurement]:
    """How much faster the candidate is than recomputing the KV (the seed's 12.6x / 18.3x)."""
    out = []
    for name, pick, better in ((f"TTFT speed-up vs recompute {_at(c)}",
                                lambda r: r.ttft_p50, "lower"),
                               (f"Throughput speed-up vs recompute {_at(c)}",
                                lambda r: r.output_throughput, "higher")):
        a = [pick(r) for r in recompute if pick(r)]
        b = [pick(r) for r in cand if pick(r)]
        limit = Limit(lo=1.0, lo_inclusive=False, unit="x", relative_to="the recompute arm")
        out.append(Measurement.measured(name, speedup(median(a), median(b), better=better),
                                        limit) if a and b else
                   Measurement.error(name, "no successful probe on one of the arms", limit))
    return out


def correctness(cand: Repetition, recompute: Repetition, tokens: int) -> Measurement:
    """Greedy outputs after a restore equal those after recompute, context by context."""
    limit = Limit.at_most(0, "contexts")
    bad = sorted(rid for rid, ids in cand.outputs.items()
                 if ids[:tokens] != recompute.outputs.get(rid, [])[:tokens] or not ids)
    name = f"Outputs differing from recompute (first {tokens} tokens, concurrency 1)"
    note = ("every probed context matched" if not bad else
            "mismatch on " + ", ".join(bad) + ": the restored KV is not the KV that was stored")
    return Measurement.measured(name, len(bad), limit, note=note)


def g3_measurements(base: Sequence[Repetition], cand: Sequence[Repetition],
                    recompute: Sequence[Repetition], limits: G3Limits,
                    decision: Decision) -> list[Measurement]:
    """Every G3 measurement per concurrency level (correctness is added by the suite)."""
    base_by, rec_by = by_concurrency(base), by_concurrency(recompute)
    out: list[Measurement] = []
    for c, group in by_concurrency(cand).items():
        errors = sum(r.errors for r in group)
        out.append(Measurement.measured(
            f"Candidate request errors {_at(c)}", errors, Limit.at_most(0, "requests"),
            note="; ".join(r.error_text for r in group if r.error_text)
            or f"{sum(r.sent for r in group)} requests sent"))
        if c not in base_by:
            out.append(Measurement.error(f"TTFT p50 reduction {_at(c)}",
                                         f"the G2 baseline has no concurrency {c}"))
            continue
        out += gains(c, base_by[c], group, limits, decision)
        out += storage_proof(c, group, limits)
        if c in rec_by:
            out += recompute_reference(c, group, rec_by[c])
        out.append(self_check(f"Load generator fit for a gate {_at(c)}", group))
    return out
