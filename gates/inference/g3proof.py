"""G3's storage-read measurements: the engine's counters, GPU hits, devices, the process. Pure.

Each is one signal of the evidence chain (gates.inference.proof) kept as its own measurement, so
the summary and earlier readers find the figures they always had; the chain judges them
together.
"""

from __future__ import annotations

from ..core import G3, G3Limits, Limit, Measurement, Outcome, median
from .proof import GPU_HIT_MAX
from .repetitions import Repetition, probe_evidence

PROOF_FAILED = "KV did not come from the candidate storage"


def reference_bytes(cand: list[Repetition],
                    kv_bytes_per_token: int | None) -> tuple[float | None, str]:
    """What the storage side is held against, as the evidence chain holds it."""
    reference, what = probe_evidence(cand, kv_bytes_per_token).storage_reference()
    return (reference or None), what


def storage_proof(c: int, cand: list[Repetition], limits: G3Limits,
                  kv_bytes_per_token: int | None = None) -> list[Measurement]:
    """The candidate's probe read its KV from storage, not from the GPU cache."""
    expected = sum(r.expected_kv_tokens for r in cand)
    reads = [r.storage_read_tokens for r in cand]
    gpu = [r.gpu_hit_tokens for r in cand]
    fraction_limit = Limit.at_least(limits.storage_read_fraction_min, "%",
                                    key="g3.storage_read_fraction_min")
    stored = G3["g3.storage_read_fraction"]
    if any(x is None for x in reads) or not expected:
        read = stored.error("the engine exposes no storage-read counter", fraction_limit, at=c)
    else:
        read = stored.measured(sum(reads) / expected * 100, fraction_limit, at=c,
                               note=f"{sum(reads):,.0f} of {expected:,} expected tokens")
    hits_limit = Limit.at_most(GPU_HIT_MAX, "%")
    gpu_hits = G3["g3.gpu_hit_fraction"]
    hits = gpu_hits.error("the engine exposes no GPU-cache hit counter", hits_limit, at=c) \
        if any(x is None for x in gpu) or not expected else \
        gpu_hits.measured(sum(gpu) / expected * 100, hits_limit, at=c,
                          note="a cold probe must not be answered by the GPU cache")
    reference = reference_bytes(cand, kv_bytes_per_token)
    disk = device_reads(c, cand, Limit(lo=limits.storage_side_band_min,
                                       hi=limits.storage_side_band_max, unit="%",
                                       key="g3.storage_side_band_min"), reference)
    own = [process_reads(c, cand, fraction_limit, reference)] \
        if all(r.process_read_bytes is not None for r in cand) else []
    for m in (read, hits, disk, *own):
        if m.outcome is Outcome.FAIL:
            m.note = f"{PROOF_FAILED}: {m.note}"
    gbps = [r.restore_gbps for r in cand if r.restore_gbps]
    if gbps and read.outcome is not Outcome.ERROR:
        read.note += f"; effective KV restore {median(gbps):.3g} GB/s (median)"
    return [read, hits, disk, *own]


def device_reads(c: int, cand: list[Repetition], limit: Limit,
                 reference: tuple[float | None, str] | None = None) -> Measurement:
    """The KV devices' own read bytes rose by what the probes read (no page cache)."""
    declared = G3["g3.device_reads"]
    engine, what = reference or reference_bytes(cand, None)
    device = [r.device_read_bytes for r in cand]
    if any(d is None for d in device):
        return declared.not_applicable("no block device to watch: name the array's devices in "
                                       "site.toml [topology] devices", at=c)
    if not engine:
        return declared.error("the engine exposes no storage-read byte counter and the KV "
                              "bytes per token are unknown", limit, at=c)
    m = declared.measured(sum(device) / engine * 100, limit, at=c,
                          note=f"devices read {sum(device):,} bytes, {what} "
                          f"{engine:,.0f} (a page-cache hit reads no device)")
    if limit.hi is not None and m.value > limit.hi:
        # Not a failure of the tier: other readers of the KV devices make the figure unfit.
        other = sum(device) - engine
        m = m.model_copy(update={"outcome": Outcome.MARGINAL, "note": (
            f"other I/O on the KV devices during the probe: {other:,.0f} bytes; {m.note}")})
    return m


def process_reads(c: int, cand: list[Repetition], limit: Limit,
                  reference: tuple[float | None, str] | None = None) -> Measurement:
    """The engine's processes made the storage layer read what the probes needed."""
    declared = G3["g3.process_reads"]
    engine, what = reference or reference_bytes(cand, None)
    process = sum(r.process_read_bytes or 0 for r in cand)
    if not engine:
        return declared.error("the engine reports no bytes restored and the KV bytes per "
                              "token are unknown", limit, at=c)
    return declared.measured(process / engine * 100, limit, at=c,
                             note=f"the process tree read {process:,} bytes from storage "
                                "(/proc/PID/io read_bytes: page-cache hits do not count), "
                                f"{what} {engine:,.0f}")
