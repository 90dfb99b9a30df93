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
from ..core.verdicts import G3, Coverage, Declared, Limit, Measurement, Outcome
from .chainrows import GPU_HIT_MAX
from .levels import figure_coverage, level_evidence
from .probe import ProbeEvidence

PROOF_FAILED = "KV did not come from the candidate storage"


def _judged(declared: Declared, c: int, cov: Coverage, m: Measurement,
            stands: bool = False) -> Measurement:
    """m, found over the repetitions read, under the level's coverage. PASS needs every one
    read; short of that it is ERROR naming those not read (the rest prove nothing of them),
    except a FAIL that more repetitions could only confirm (stands: counts that only add up)."""
    if not cov.complete and not (stands and m.outcome is Outcome.FAIL):
        over = f"; over the {len(cov.read)} read: {m.note}" if cov.read and m.note else ""
        m = m.model_copy(update={"outcome": Outcome.ERROR, "value": None, "note": (
            f"{cov.describe()}: a verdict needs every repetition of the level read{over}")})
    return declared.stamp(cov.judge(m), at=c)


def _read(cand: Sequence[ProbeEvidence], cov: Coverage) -> list[ProbeEvidence]:
    return [p for i, p in enumerate(cand, 1) if i in cov.read]


def storage_proof(c: int, cand: Sequence[ProbeEvidence], limits: G3Limits,
                  kv_bytes_per_token: int | None = None,
                  restore_gbps: Sequence[float | None] = ()) -> list[Measurement]:
    """The candidate's probe read its KV from storage, not from the GPU cache.

    Each rule is over the level's repetitions (cand, in the order they ran): one whose figure
    could not be read counts against it (levels.figure_coverage). ``restore_gbps``: each
    repetition's effective restore rate, for the note.
    """
    expected = sum(r.expected_tokens for r in cand)
    reads, gpu = figure_coverage(cand, "storage_read_tokens"), \
        figure_coverage(cand, "gpu_hit_tokens")
    fraction_limit = Limit.at_least(limits.storage_read_fraction_min, "%",
                                    key="g3.storage_read_fraction_min")
    stored = G3["g3.storage_read_fraction"]
    if not reads.read or not expected:
        read = stored.stamp(reads.judge(Measurement.error(stored.name(c), (
            "the engine exposes no storage-read counter" if not reads.failed else
            "the engine's storage-read counter was read in no repetition"), fraction_limit)), c)
    else:
        got = _read(cand, reads)
        tokens, needed = sum(r.storage_read_tokens for r in got), \
            sum(r.expected_tokens for r in got)
        read = _judged(stored, c, reads, Measurement.measured(
            stored.name(c), tokens / needed * 100 if needed else 0.0, fraction_limit,
            note=f"{tokens:,.0f} of {needed:,} expected tokens"))
    hits_limit = Limit.at_most(GPU_HIT_MAX, "%")
    gpu_hits = G3["g3.gpu_hit_fraction"]
    if not gpu.read or not expected:
        hits = gpu_hits.stamp(gpu.judge(Measurement.error(
            gpu_hits.name(c), "the engine exposes no GPU-cache hit counter", hits_limit)), c)
    else:  # over every planned token: hits only add up, so a FAIL in those read stands
        hits = _judged(gpu_hits, c, gpu, Measurement.measured(
            gpu_hits.name(c), sum(r.gpu_hit_tokens for r in _read(cand, gpu)) / expected * 100,
            hits_limit, note="a cold probe must not be answered by the GPU cache"), stands=True)
    band = Limit(lo=limits.storage_side_band_min, hi=limits.storage_side_band_max, unit="%",
                 key="g3.storage_side_band_min")
    disk = device_reads(c, cand, band, kv_bytes_per_token=kv_bytes_per_token)
    procs = figure_coverage(cand, "process_read_bytes")
    # No repetition read the processes: an endpoint arm (gates.core.verdicts.declared excuses
    # it) or, for a launched one, the record's completeness names the missing measurement.
    own = [process_reads(c, cand, band, kv_bytes_per_token=kv_bytes_per_token)] \
        if procs.read else []
    for m in (read, hits, disk, *own):
        if m.outcome is Outcome.FAIL:
            m.note = f"{PROOF_FAILED}: {m.note}"
    gbps = [g for g in restore_gbps if g]
    if gbps and read.outcome is not Outcome.ERROR:
        read.note += f"; effective KV restore {median(gbps):.3g} GB/s (median)"
    return [read, hits, disk, *own]


def _held(name: str, value: float, refs: list[tuple[float, str]], limit: Limit,
          what: str) -> Measurement:
    """value against every reference: below the band at any fails, above it at any is marked."""
    first, ref = refs[0]
    pcts = [(value / r * 100, r, n) for r, n in refs]
    low = min(pcts)
    others = "; ".join(f"{p:,.4g} % of {n}" for p, _, n in pcts[1:])
    m = Measurement.measured(name, pcts[0][0], limit, note=f"{what} {value:,.0f} bytes, {ref} "
                             f"{first:,.0f}" + (f"; {others}" if others else ""))
    if limit.lo is not None and low[0] < limit.lo:
        return m.model_copy(update={"outcome": Outcome.FAIL})
    if limit.hi is not None and max(pcts)[0] > limit.hi:
        # Not a failure of the tier: other readers of the KV devices make the figure unfit.
        other = value - first
        return m.model_copy(update={"outcome": Outcome.MARGINAL, "note": (
            f"other I/O on the KV devices during the probe: {other:,.0f} bytes; {m.note}")})
    return m


def _over_read(declared: Declared, c: int, cand: Sequence[ProbeEvidence], cov: Coverage,
               figure, limit: Limit, kv_bytes_per_token: int | None, what: str,
               missing: str) -> Measurement:
    """The storage side's bytes of the repetitions read, against their own references."""
    got = _read(cand, cov)
    refs = level_evidence(got, kv_bytes_per_token).storage_references()
    if not refs:
        return declared.stamp(cov.judge(Measurement.error(declared.name(c), missing, limit)), c)
    return _judged(declared, c, cov, _held(declared.name(c), sum(figure(r) for r in got), refs,
                                           limit, what))


def device_reads(c: int, cand: Sequence[ProbeEvidence], limit: Limit,
                 kv_bytes_per_token: int | None = None) -> Measurement:
    """The KV devices' own read bytes rose by what the probes read (no page cache)."""
    declared = G3["g3.device_reads"]
    cov = figure_coverage(cand, "device_bytes")
    if not cov.read:  # no repetition had a device figure: a fact of the site, or unwatched
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
    return _over_read(declared, c, cand, cov, lambda r: r.storage.device_bytes, limit,
                      kv_bytes_per_token, "devices read (a page-cache hit reads no device):",
                      "the engine exposes no storage-read byte counter and the KV bytes per "
                      "token are unknown")


def process_reads(c: int, cand: Sequence[ProbeEvidence], limit: Limit,
                  kv_bytes_per_token: int | None = None) -> Measurement:
    """The engine's processes made the storage layer read what the probes needed."""
    declared = G3["g3.process_reads"]
    return _over_read(declared, c, cand, figure_coverage(cand, "process_read_bytes"),
                      lambda r: r.process_read_bytes, limit, kv_bytes_per_token,
                      "the process tree read from storage (/proc/PID/io read_bytes: page-cache "
                      "hits do not count):", "the engine reports no bytes restored and the KV "
                      "bytes per token are unknown")
