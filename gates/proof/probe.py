"""What the storage-read proof takes: a probe's evidence and what it is held against.

``ProbeEvidence`` is what a probe measured — the engine's attribution (per rank, with its
caveats and any series it could not read), the storage side (devices, NICs, RDMA ports, the
engine process's read bytes), what the probe asked for, its duration and the controls — and
adds up over repetitions. ``ProofContext`` is what it is held against. Both carry their ranges:
a non-finite or out-of-range input is refused where it is built (G3 and `kvgate proof` alike).
Pure.
"""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import BaseModel, Field, NonNegativeInt, PositiveInt, model_validator

from ..core.configuration import G3Limits
from .cachedrop import CacheDrop, together
from .counters import StorageReads

MAX_RANKS = 65_536  # TP x PP x DP of one deployment: far above any built today

_G3 = G3Limits()  # the defaults of thresholds.toml [g3], when no file is at hand
Finite = Annotated[float, Field(allow_inf_nan=False)]
Rate = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class ProbeEvidence(BaseModel):
    """What one or more probes measured, for the proof."""

    engine: str = ""
    expected_tokens: NonNegativeInt = 0  # 0 only while adding up: the chain refuses it
    kv_bytes_per_token: PositiveInt | None = None
    probe_prompt_tokens: PositiveInt | None = None  # prompt tokens the probe sent (a ceiling)
    engine_prompt_tokens: float | None = None  # the prompt tokens the engine itself counted
    storage_read_tokens: float | None = None
    storage_read_bytes: float | None = None  # the engine's own byte counter, if any
    rank_reads: dict[str, float] = Field(default_factory=dict)
    rank_mode: str = ""  # "shard": every rank counts every token; "split": ranks share requests
    caveat: str = ""  # why the engine's storage counter cannot tell storage from memory alone
    counter: str = ""  # the series the storage tokens came from, for the table
    gpu_hit_tokens: float | None = None
    storage: StorageReads | None = None
    process_read_bytes: NonNegativeInt | None = None
    probe_seconds: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.0  # 0: not measured
    page_cache: CacheDrop | None = None  # the KV files' page-cache drop, as mincore measured it
    repetitions: int = 0
    storage_read_failures: float | None = None  # the engine's own failed storage reads
    error: str = ""  # why the engine's counters could not be read
    input_errors: list[str] = Field(default_factory=list)  # series whose delta was refused
    unclassified: list[str] = Field(default_factory=list)  # labels the rules cannot place
    cpu_hit_tokens: float | None = None  # answered by a CPU/DRAM tier, where exposed
    kv_dir: str = ""  # the arm's KV directory on the storage under test
    kv_dir_bytes: int | None = None  # the most its files held after a repetition
    # Why the target's block devices could not be watched (its kv_dir is on no local block
    # device: tmpfs, overlay, FUSE, NFS); "" when they were, or the arm is not on this host.
    devices_unwatched: str = ""
    # A level's repetitions (#1 first) whose evidence could not all be read, with why, and the
    # ranks some of its probes' counters name and others' do not (levels.level_evidence): each
    # counts against the chain, never as a smaller sum.
    unread: dict[int, str] = Field(default_factory=dict)
    rank_gaps: dict[str, str] = Field(default_factory=dict)

    @property
    def expected_bytes(self) -> float | None:
        """KV bytes the probe needed, from the model geometry; None when unknown."""
        return self.expected_tokens * self.kv_bytes_per_token if self.kv_bytes_per_token else None

    @property
    def token_bytes(self) -> float | None:
        """KV bytes of the tokens the engine says it read from storage; None when unknown."""
        t = self.storage_read_tokens
        ok = self.kv_bytes_per_token and t is not None and math.isfinite(t) and t > 0
        return t * self.kv_bytes_per_token if ok else None

    def storage_references(self) -> list[tuple[float, str]]:
        """Every figure the storage side must agree with: the engine's read bytes, the KV
        bytes the probe needed, and the engine's tokens x KV bytes per token (where known)."""
        refs = [(self.storage_read_bytes, "the engine's read bytes"),
                (self.expected_bytes, "the KV bytes the probe needed"),
                (self.token_bytes, "the engine's tokens x KV bytes per token")]
        return [(v, what) for v, what in refs if v and math.isfinite(v) and v > 0]

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
            "probe_prompt_tokens": add(self.probe_prompt_tokens, other.probe_prompt_tokens),
            "engine_prompt_tokens": add(self.engine_prompt_tokens, other.engine_prompt_tokens),
            "storage_read_tokens": add(self.storage_read_tokens, other.storage_read_tokens),
            "storage_read_bytes": add(self.storage_read_bytes, other.storage_read_bytes),
            "rank_reads": ranks, "gpu_hit_tokens": add(self.gpu_hit_tokens, other.gpu_hit_tokens),
            "storage": storage,
            "process_read_bytes": add(self.process_read_bytes, other.process_read_bytes),
            "probe_seconds": self.probe_seconds + other.probe_seconds,
            "page_cache": together(self.page_cache, other.page_cache),
            "storage_read_failures": add(self.storage_read_failures,
                                         other.storage_read_failures),
            "cpu_hit_tokens": add(self.cpu_hit_tokens, other.cpu_hit_tokens),
            "kv_dir_bytes": None if self.kv_dir_bytes is None or other.kv_dir_bytes is None
            else max(self.kv_dir_bytes, other.kv_dir_bytes),
            "repetitions": self.repetitions + other.repetitions,
            "input_errors": list(dict.fromkeys(self.input_errors + other.input_errors)),
            "unclassified": list(dict.fromkeys(self.unclassified + other.unclassified)),
            "devices_unwatched": "; ".join(dict.fromkeys(filter(None, [
                self.devices_unwatched, other.devices_unwatched]))),
            "error": "; ".join(dict.fromkeys(filter(None, [self.error, other.error])))})


class ProofContext(BaseModel):
    """What the proof holds a probe against: limits, G1, the host and the engine's tiers."""

    # % of the expected tokens the engine must have read from storage
    read_fraction_min: Annotated[float, Field(gt=0, le=100, allow_inf_nan=False)] = \
        _G3.storage_read_fraction_min
    # The ranks the engine's counters name (labelled_ranks), if the site knows them. Bounded:
    # each is a unit of the ranks' Coverage, and --ranks 1e9 once filled 24 GB listing them.
    expected_ranks: Annotated[int, Field(gt=0, le=MAX_RANKS)] | None = None
    band: tuple[Finite, Finite] = (_G3.storage_side_band_min, _G3.storage_side_band_max)
    restore_bw: Rate | None = None  # G1's KV-restore bandwidth, bytes/s
    link_bw: Rate | None = None  # [ceilings] read_bw, bytes/s
    memory_bytes: NonNegativeInt | None = None  # the host's RAM (page cache)
    cpu_tier_bytes: NonNegativeInt | None = None  # the engine's CPU/DRAM KV tier (0 = off)

    @model_validator(mode="after")
    def _band(self) -> ProofContext:
        lo, hi = self.band
        if not 0 < lo <= 100 <= hi:
            raise ValueError(f"band {lo:g}-{hi:g} %: the storage side's band must hold 100 % "
                             "and start above 0 %")
        return self

