"""G3's storage-read measurements: the engine's counters, GPU hits, devices, the process. Pure.

Each takes the probes' evidence, one ProbeEvidence per repetition (Repetition.evidence), and
is one signal of the evidence chain (gates.proof.chain) kept as its own measurement, so
the summary and earlier readers find the figures they always had. They apply the chain's own
rules and references (chainrows), so none is more lenient or stricter than the chain, which G3
judges them with and `kvgate proof` prints alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.configuration import G3Limits
from ..core.statistics import median
from ..core.verdicts import G3, Limit, Measurement, Outcome
from .chainrows import GPU_HIT_MAX
from .probe import ProbeEvidence, level_evidence

PROOF_FAILED = "KV did not come from the candidate storage"


def references(cand: Sequence[ProbeEvidence],
               kv_bytes_per_token: int | None) -> list[tuple[float, str]]:
    """Every figure the storage side is held against, as the evidence chain holds it."""
    return level_evidence(cand, kv_bytes_per_token).storage_references()


def _device(p: ProbeEvidence) -> int | None:
    return None if p.storage is None else p.storage.device_bytes


def storage_proof(c: int, cand: Sequence[ProbeEvidence], limits: G3Limits,
                  kv_bytes_per_token: int | None = None,
                  restore_gbps: Sequence[float | None] = ()) -> list[Measurement]:
    """The candidate's probe read its KV from storage, not from the GPU cache.

    ``restore_gbps``: each repetition's effective restore rate, for the note.
    """
    expected = sum(r.expected_tokens for r in cand)
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
    refs = references(cand, kv_bytes_per_token)
    band = Limit(lo=limits.storage_side_band_min, hi=limits.storage_side_band_max, unit="%",
                 key="g3.storage_side_band_min")
    disk = device_reads(c, cand, band, refs)
    own = [process_reads(c, cand, band, refs)] \
        if all(r.process_read_bytes is not None for r in cand) else []
    for m in (read, hits, disk, *own):
        if m.outcome is Outcome.FAIL:
            m.note = f"{PROOF_FAILED}: {m.note}"
    gbps = [g for g in restore_gbps if g]
    if gbps and read.outcome is not Outcome.ERROR:
        read.note += f"; effective KV restore {median(gbps):.3g} GB/s (median)"
    return [read, hits, disk, *own]


def _held(declared, c: int, value: float, refs: list[tuple[float, str]], limit: Limit,
          what: str) -> Measurement:
    """value against every reference: below the band at any fails, above it at any is marked."""
    first, name = refs[0]
    pcts = [(value / r * 100, r, n) for r, n in refs]
    low = min(pcts)
    others = "; ".join(f"{p:,.4g} % of {n}" for p, _, n in pcts[1:])
    m = declared.measured(pcts[0][0], limit, at=c, note=f"{what} {value:,.0f} bytes, {name} "
                          f"{first:,.0f}" + (f"; {others}" if others else ""))
    if limit.lo is not None and low[0] < limit.lo:
        return m.model_copy(update={"outcome": Outcome.FAIL})
    if limit.hi is not None and max(pcts)[0] > limit.hi:
        # Not a failure of the tier: other readers of the KV devices make the figure unfit.
        other = value - first
        return m.model_copy(update={"outcome": Outcome.MARGINAL, "note": (
            f"other I/O on the KV devices during the probe: {other:,.0f} bytes; {m.note}")})
    return m


def device_reads(c: int, cand: Sequence[ProbeEvidence], limit: Limit,
                 refs: list[tuple[float, str]] | None = None) -> Measurement:
    """The KV devices' own read bytes rose by what the probes read (no page cache)."""
    declared = G3["g3.device_reads"]
    refs = references(cand, None) if refs is None else refs
    device = [_device(r) for r in cand]
    if any(d is None for d in device):
        unwatched = "; ".join(dict.fromkeys(r.devices_unwatched for r in cand
                                            if r.devices_unwatched))
        wire = all(r.storage is not None and (r.storage.nic_bytes is not None
                                              or r.storage.rdma_bytes is not None) for r in cand)
        if unwatched and not wire:  # could not watch is not "does not apply"
            return declared.error(f"the target's devices could not be watched: {unwatched}; "
                                  "name them in site.toml [topology] devices", limit, at=c)
        return declared.not_applicable("no block device to watch: name the array's devices in "
                                       "site.toml [topology] devices" + (
                                           f" ({unwatched}; the storage NICs carry the "
                                           "storage side)" if unwatched else ""), at=c)
    if not refs:
        return declared.error("the engine exposes no storage-read byte counter and the KV "
                              "bytes per token are unknown", limit, at=c)
    return _held(declared, c, sum(device), refs, limit,
                 "devices read (a page-cache hit reads no device):")


def process_reads(c: int, cand: Sequence[ProbeEvidence], limit: Limit,
                  refs: list[tuple[float, str]] | None = None) -> Measurement:
    """The engine's processes made the storage layer read what the probes needed."""
    declared = G3["g3.process_reads"]
    refs = references(cand, None) if refs is None else refs
    if not refs:
        return declared.error("the engine reports no bytes restored and the KV bytes per "
                              "token are unknown", limit, at=c)
    return _held(declared, c, sum(r.process_read_bytes or 0 for r in cand), refs, limit,
                 "the process tree read from storage (/proc/PID/io read_bytes: page-cache "
                 "hits do not count):")
