"""The storage-read proof of one probe (or a level's probes): inputs in, evidence chain out.

An engine's attribution becomes a probe's evidence (engine_evidence, into probe.ProbeEvidence);
``probe_chain`` turns it and its ProofContext into the rows of the evidence table G3 judges and
`kvgate proof` prints: the engine's and the storage side's rows (chainrows), physics and the
controls (controls), the KV directory. Pure.
"""

from __future__ import annotations

import math

from .attribution import PROOF_QUANTITIES, StorageAttribution
from .chainrows import engine_rows, storage_rows
from .controls import cache_drop_row, restore_physics, working_set
from .counters import StorageReads
from .evidence import Agreement, Kind, Signal, within
from .levels import probes_coverage
from .probe import ProbeEvidence, ProofContext


def engine_evidence(a: StorageAttribution) -> dict:
    """The ProbeEvidence fields an engine's attribution gives (the rest come from the probe)."""
    return {"storage_read_tokens": a.storage_read_tokens,
            "storage_read_bytes": a.storage_read_bytes, "gpu_hit_tokens": a.gpu_hit_tokens,
            "engine_prompt_tokens": a.prompt_tokens,
            "rank_reads": a.rank_reads, "rank_mode": a.rank_mode,
            "caveat": a.caveats.get("storage_read_tokens", ""),
            "counter": series_label(a.matched.get("storage_read_tokens", [])),
            "storage_read_failures": a.storage_read_failures,
            "cpu_hit_tokens": a.cpu_hit_tokens,
            "input_errors": [f"{q}: {a.errors[q]}" for q in PROOF_QUANTITIES if q in a.errors],
            "unclassified": [f"{q}: {a.unclassified[q]}" for q in PROOF_QUANTITIES
                             if q in a.unclassified]}


def series_label(series: list[str]) -> str:
    """The series an engine signal came from, for the table: the first, and how many more."""
    # The table names one series; the ranks' rows carry the rest.
    if not series:
        return ""
    return series[0] + (f" (+{len(series) - 1} more series)" if len(series) > 1 else "")


def labelled_ranks(engine: str, tp: int = 1, pp: int = 1, dp: int = 1) -> int:
    """How many ranks an engine's storage counters name, for ProofContext.expected_ranks."""
    # LMCache: worker_id = the TP x PP rank (a DP engine's ranks fold into the same series,
    # prometheus_client multiprocess mode adds them up); SGLang: tp_rank x pp_rank x dp_rank
    # (StorageMetricsCollector); vLLM (and vllm-native): the DP engine index only; KVBM,
    # llama.cpp and the simulator name none (one series).
    return {"lmcache": tp * pp, "sglang": tp * pp * dp, "vllm": dp,
            "vllm-native": dp}.get(engine, 1)


def probe_chain(p: ProbeEvidence, ctx: ProofContext) -> list[Signal]:
    """The evidence table of a probe: engine, storage side, physics and controls."""
    rows = engine_rows(p, ctx) + storage_rows(p, ctx) + _kv_dir_row(p, ctx) \
        + cache_drop_row(p.page_cache) + [_probes_row(p)]
    # What the engine says it read, else what the model geometry says the probe needed.
    kv_bytes = p.storage_read_bytes or p.expected_bytes
    if kv_bytes and math.isfinite(kv_bytes) and kv_bytes > 0:
        rows.append(restore_physics(kv_bytes, p.probe_seconds, ctx.restore_bw, ctx.link_bw))
        # Only the target's own block devices count bytes that provably came off the storage
        # under test; a NIC may carry other traffic, /proc/PID/io any file system's reads.
        devices_agree = any(r.kind is Kind.STORAGE and r.signal == "block devices"
                            and r.agreement is Agreement.AGREES for r in rows)
        rows.append(working_set(int(kv_bytes / max(p.repetitions, 1)),
                                ctx.memory_bytes, ctx.cpu_tier_bytes, p.page_cache,
                                devices_agree))
    return rows


def _probes_row(p: ProbeEvidence) -> Signal:
    # A level's sums hide a probe that gave no figure (its device bytes, its scrape): the
    # repetitions whose evidence was read, the rest named with why (levels.level_evidence).
    cov = probes_coverage(p)
    return Signal(kind=Kind.CONTROL, signal="probes whose evidence was read",
                  value=len(cov.read), unit="repetitions", expected=f"all {len(cov.expected)}",
                  agreement=Agreement.AGREES if cov.complete else Agreement.ERROR,
                  note=cov.describe(), coverage=cov)


def _kv_dir_row(p: ProbeEvidence, ctx: ProofContext) -> list[Signal]:
    # The KV must live in the kv_dir on the target: a launch command that sends it elsewhere
    # (its own --kv-dir) leaves the directory empty or short of what the probe read.
    if p.kv_dir_bytes is None:
        return []
    per_rep = (p.storage_read_bytes or p.expected_bytes or 0) / max(p.repetitions, 1)
    floor = ctx.band[0] / 100 * per_rep
    gap = f"; {per_rep - p.kv_dir_bytes:,.0f} bytes of KV are not there" \
        if p.kv_dir_bytes < floor else ""
    return [Signal(kind=Kind.CONTROL, signal=f"KV files in the arm's kv_dir {p.kv_dir}",
                   value=p.kv_dir_bytes, unit="bytes",
                   expected=f"≥ {floor:,.0f} (what one probe read)" if per_rep else "—",
                   agreement=within(p.kv_dir_bytes, floor) if per_rep else Agreement.ABSENT,
                   note=f"the files the engine left there after the run{gap}")]


def recompute_row(storage: StorageReads | None, expected_bytes: float | None) -> Signal:
    """The recompute arm's storage side during its probe: it must read (almost) nothing."""
    read = None if storage is None else storage.device_bytes
    pct = None if read is None or not expected_bytes else read / expected_bytes * 100
    return Signal(kind=Kind.CONTROL, signal="recompute arm: block devices", value=pct,
                  unit="% of the KV bytes", expected="≈ 0 (≤ 10 %)",
                  agreement=within(pct, 0.0, 10.0),
                  note="" if read is None else f"{read:,} bytes")
