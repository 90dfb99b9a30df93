"""The storage-read proof of one probe (or a level's probes): inputs in, evidence chain out.

``ProbeEvidence`` is what a probe measured — the engine's attribution (per rank, with its
caveats), the storage side (devices, NICs, RDMA ports, the engine process's read bytes), the
probe's duration and the controls — and adds up over repetitions. ``probe_chain`` turns it into
the rows of the evidence table that G3 judges and `kvgate proof` prints. Pure.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from ..core import G3Limits
from .attribution import StorageAttribution
from .controls import restore_physics, working_set
from .counters import StorageReads
from .evidence import Agreement, Kind, Signal, within

GPU_HIT_MAX = 1.0  # % of the expected KV tokens a cold probe may find in the GPU cache
_G3 = G3Limits()  # the defaults of thresholds.toml [g3], when no file is at hand


class ProbeEvidence(BaseModel):
    """What one or more probes measured, for the proof."""

    engine: str = ""
    expected_tokens: int = 0
    kv_bytes_per_token: int | None = None
    storage_read_tokens: float | None = None
    storage_read_bytes: float | None = None  # the engine's own byte counter, if any
    rank_reads: dict[str, float] = Field(default_factory=dict)
    rank_mode: str = ""  # "shard": every rank counts every token; "split": ranks share requests
    caveat: str = ""  # why the engine's storage counter cannot tell storage from memory alone
    counter: str = ""  # the series the storage tokens came from, for the table
    gpu_hit_tokens: float | None = None
    storage: StorageReads | None = None
    process_read_bytes: int | None = None
    probe_seconds: float = 0.0
    page_cache_dropped: bool = False
    repetitions: int = 0
    storage_read_failures: float | None = None  # the engine's own failed storage reads
    error: str = ""  # why the engine's counters could not be read
    cpu_hit_tokens: float | None = None  # answered by a CPU/DRAM tier, where exposed
    kv_dir: str = ""  # the arm's KV directory on the storage under test
    kv_dir_bytes: int | None = None  # the most its files held after a repetition

    def storage_reference(self) -> tuple[float | None, str]:
        """What the storage side is held against: the engine's read bytes, else the KV bytes
        the probes needed (tokens x bytes per token); None without either."""
        if self.storage_read_bytes:
            return self.storage_read_bytes, "the engine's read bytes"
        return self.expected_bytes, "the KV bytes the probe needed"

    @property
    def expected_bytes(self) -> float | None:
        """KV bytes the probe needed, from the model geometry; None when unknown."""
        return self.expected_tokens * self.kv_bytes_per_token if self.kv_bytes_per_token else None

    def __add__(self, other: ProbeEvidence) -> ProbeEvidence:
        """Two probes' evidence together (a level's repetitions)."""
        def add(a, b):
            return None if a is None or b is None else a + b
        ranks = {k: self.rank_reads.get(k, 0.0) + other.rank_reads.get(k, 0.0)
                 for k in self.rank_reads.keys() | other.rank_reads.keys()}
        storage = None if self.storage is None or other.storage is None else StorageReads(
            device_bytes=add(self.storage.device_bytes, other.storage.device_bytes),
            nic_bytes=add(self.storage.nic_bytes, other.storage.nic_bytes),
            rdma_bytes=add(self.storage.rdma_bytes, other.storage.rdma_bytes))
        return self.model_copy(update={
            "expected_tokens": self.expected_tokens + other.expected_tokens,
            "storage_read_tokens": add(self.storage_read_tokens, other.storage_read_tokens),
            "storage_read_bytes": add(self.storage_read_bytes, other.storage_read_bytes),
            "rank_reads": ranks, "gpu_hit_tokens": add(self.gpu_hit_tokens, other.gpu_hit_tokens),
            "storage": storage,
            "process_read_bytes": add(self.process_read_bytes, other.process_read_bytes),
            "probe_seconds": self.probe_seconds + other.probe_seconds,
            "page_cache_dropped": self.page_cache_dropped and other.page_cache_dropped,
            "storage_read_failures": add(self.storage_read_failures,
                                         other.storage_read_failures),
            "cpu_hit_tokens": add(self.cpu_hit_tokens, other.cpu_hit_tokens),
            "kv_dir_bytes": None if self.kv_dir_bytes is None or other.kv_dir_bytes is None
            else max(self.kv_dir_bytes, other.kv_dir_bytes),
            "repetitions": self.repetitions + other.repetitions,
            "error": "; ".join(dict.fromkeys(filter(None, [self.error, other.error])))})


def engine_evidence(a: StorageAttribution) -> dict:
    """The proof's fields an engine's attribution gives (ProbeEvidence's and Repetition's)."""
    return {"storage_read_tokens": a.storage_read_tokens,
            "storage_read_bytes": a.storage_read_bytes, "gpu_hit_tokens": a.gpu_hit_tokens,
            "rank_reads": a.rank_reads, "rank_mode": a.rank_mode,
            "caveat": a.caveats.get("storage_read_tokens", ""),
            "counter": series_label(a.matched.get("storage_read_tokens", [])),
            "storage_read_failures": a.storage_read_failures,
            "cpu_hit_tokens": a.cpu_hit_tokens}


def series_label(series: list[str]) -> str:
    """The series an engine signal came from, for the table: the first, and how many more."""
    # The table names one series; the ranks' rows carry the rest.
    if not series:
        return ""
    return series[0] + (f" (+{len(series) - 1} more series)" if len(series) > 1 else "")


class ProofContext(BaseModel):
    """What the proof holds a probe against: limits, G1, the host and the engine's tiers."""

    read_fraction_min: float = _G3.storage_read_fraction_min  # % of the expected tokens
    expected_ranks: int | None = None  # ranks that must each show reads (TP x PP x DP)
    band: tuple[float, float] = (_G3.storage_side_band_min, _G3.storage_side_band_max)
    restore_bw: float | None = None  # G1's KV-restore bandwidth, bytes/s
    link_bw: float | None = None  # [ceilings] read_bw, bytes/s
    memory_bytes: int | None = None  # the host's RAM (page cache)
    cpu_tier_bytes: int | None = None  # the engine's CPU/DRAM KV tier, if it has one


def _engine_rows(p: ProbeEvidence, ctx: ProofContext) -> list[Signal]:
    floor = ctx.read_fraction_min / 100 * p.expected_tokens
    if p.error:
        return [Signal(kind=Kind.ENGINE, signal=p.counter or "the engine's counters",
                       agreement=Agreement.INCONCLUSIVE, note=p.error)]
    rows = [Signal(kind=Kind.ENGINE, signal=p.counter or "storage-read tokens (engine)",
                   value=p.storage_read_tokens, unit="tokens",
                   expected=f"≥ {floor:,.0f} of {p.expected_tokens:,} expected tokens",
                   agreement=within(p.storage_read_tokens, floor), caveat=p.caveat,
                   note=f"{len(p.rank_reads)} ranks, {p.rank_mode}" if p.rank_reads else "")]
    busy = [v for v in p.rank_reads.values() if v > 0]
    for rank, value in sorted(p.rank_reads.items()):
        if p.rank_mode == "shard":
            expected, ok = f"≥ {floor:,.0f} (every rank reads its shard of every token)", \
                within(value, floor)
        else:
            expected, ok = "> 0 (each rank serves its share)", \
                Agreement.DISAGREES if busy and value <= 0 else Agreement.AGREES
        rows.append(Signal(kind=Kind.ENGINE, signal=f"rank {rank}", value=value,
                           unit="tokens", expected=expected, agreement=ok, caveat=p.caveat,
                           note="this rank read nothing while others did" if value <= 0 and busy
                           else ""))
    if ctx.expected_ranks:
        seen = len(p.rank_reads) or 1
        rows.append(Signal(kind=Kind.CONTROL, signal="ranks exposing storage reads", value=seen,
                           unit="ranks", expected=f"{ctx.expected_ranks}",
                           agreement=Agreement.AGREES if seen == ctx.expected_ranks
                           else Agreement.DISAGREES))
    if p.storage_read_failures is not None:
        rows.append(Signal(kind=Kind.CONTROL, signal="the engine's failed storage reads",
                           value=p.storage_read_failures, unit="", expected="0",
                           agreement=within(p.storage_read_failures, 0.0, 0.0),
                           note="a failed read falls back to recompute or serves wrong KV"))
    gpu = None if p.gpu_hit_tokens is None or not p.expected_tokens else \
        p.gpu_hit_tokens / p.expected_tokens * 100
    rows.append(Signal(kind=Kind.CONTROL, signal="GPU-cache hits during the probe (eviction)",
                       value=gpu, unit="%", expected=f"≤ {GPU_HIT_MAX:g} % of the expected",
                       agreement=within(gpu, 0.0, GPU_HIT_MAX),
                       note="the eviction was verified by the counters, not by an HTTP 200"))
    if p.cpu_hit_tokens is not None and p.expected_tokens:
        cpu = p.cpu_hit_tokens / p.expected_tokens * 100
        rows.append(Signal(kind=Kind.CONTROL, signal="CPU-tier hits during the probe",
                           value=cpu, unit="%", expected=f"≤ {GPU_HIT_MAX:g} % of the expected",
                           agreement=within(cpu, 0.0, GPU_HIT_MAX),
                           note="KV served from the engine's DRAM tier is not a storage read"))
    return rows


def _storage_rows(p: ProbeEvidence, ctx: ProofContext) -> list[Signal]:
    reference, what = p.storage_reference()
    lo, hi = ctx.band
    rows = []
    s = p.storage or StorageReads()
    for label, value in (("block devices", s.device_bytes), ("storage NICs (rx bytes)",
                                                             s.nic_bytes),
                         ("RDMA ports (port_rcv_data × 4)", s.rdma_bytes),
                         ("engine process read_bytes (/proc/PID/io)", p.process_read_bytes)):
        if value is None:
            continue
        pct = value / reference * 100 if reference else None
        ok = within(pct, lo, hi)
        note = f"{value:,.0f} bytes"
        if pct is not None and pct > hi:
            # More than the probe needed: something else read them too. That hides whether
            # the engine's reads were among them, so it cannot say yes or no (not a FAIL).
            ok = Agreement.INCONCLUSIVE
            note += (f"; other I/O on them during the probe: at least "
                     f"{value - reference * hi / 100:,.0f} B: run again with the target's "
                     "devices otherwise idle")
        rows.append(Signal(kind=Kind.STORAGE, signal=label, value=pct, unit=f"% of {what}",
                           expected=f"{lo:g}-{hi:g} %", agreement=ok if reference else
                           Agreement.ABSENT, note=note))
    return rows


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


def probe_chain(p: ProbeEvidence, ctx: ProofContext) -> list[Signal]:
    """The evidence table of a probe: engine, storage side, physics and controls."""
    rows = _engine_rows(p, ctx) + _storage_rows(p, ctx) + _kv_dir_row(p, ctx)
    # What the engine says it read, else what the model geometry says the probe needed.
    kv_bytes = p.storage_read_bytes or p.expected_bytes
    if kv_bytes:
        rows.append(restore_physics(kv_bytes, p.probe_seconds, ctx.restore_bw, ctx.link_bw))
        # Every storage-side counter here counts bytes fetched from the storage itself (the
        # page cache serves none of them), so one agreeing proves memory did not serve them.
        devices_agree = any(r.kind is Kind.STORAGE and r.agreement is Agreement.AGREES
                            for r in rows)
        rows.append(working_set(int(kv_bytes / max(p.repetitions, 1)),
                                ctx.memory_bytes, ctx.cpu_tier_bytes, p.page_cache_dropped,
                                devices_agree))
    return rows


def recompute_row(storage: StorageReads | None, expected_bytes: float | None) -> Signal:
    """The recompute arm's storage side during its probe: it must read (almost) nothing."""
    read = None if storage is None else storage.device_bytes
    pct = None if read is None or not expected_bytes else read / expected_bytes * 100
    return Signal(kind=Kind.CONTROL, signal="recompute arm: block devices", value=pct,
                  unit="% of the KV bytes", expected="≈ 0 (≤ 10 %)",
                  agreement=within(pct, 0.0, 10.0),
                  note="" if read is None else f"{read:,} bytes")
