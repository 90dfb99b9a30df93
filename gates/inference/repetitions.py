"""One cold-recovery repetition reduced to the figures G2 and G3 judge. Pure."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, model_validator

from ..core.statistics import percentile
from ..loadgen import CpuUse, summarize
from ..proof import ProbeEvidence, StorageReads, engine_evidence, level_evidence
from .kv_files import KvReadBack
from .machine import CpuReference, DeviceReference
from .phases import ColdRecovery

# The fields a Repetition stored before its probe's evidence became one ProbeEvidence, and their
# names there: records written by an earlier kvgate still load (Repetition._fold).
_FLAT = {"storage_read_tokens": "storage_read_tokens", "storage_read_bytes": "storage_read_bytes",
         "gpu_hit_tokens": "gpu_hit_tokens", "expected_kv_tokens": "expected_tokens",
         "process_read_bytes": "process_read_bytes", "probe_seconds": "probe_seconds",
         "rank_reads": "rank_reads", "rank_mode": "rank_mode", "caveat": "caveat",
         "counter": "counter", "metrics_error": "error",
         "storage_read_failures": "storage_read_failures", "cpu_hit_tokens": "cpu_hit_tokens",
         "probe_prompt_tokens": "probe_prompt_tokens",
         "engine_prompt_tokens": "engine_prompt_tokens", "input_errors": "input_errors",
         "unclassified": "unclassified", "kv_dir": "kv_dir", "kv_dir_bytes": "kv_dir_bytes"}
_WIRE = {"device_read_bytes": "device_bytes", "nic_read_bytes": "nic_bytes",
         "rdma_read_bytes": "rdma_bytes"}


class Repetition(BaseModel):
    """One cold-recovery repetition of one arm at one concurrency: what G2/G3 judge."""

    arm: str
    concurrency: int
    repetition: int
    ttfts: list[float]  # probe TTFT of every counted request, seconds
    output_throughput: float | None  # probe output tokens / span, tok/s
    sent: int
    errors: int
    error_text: str = ""
    # What the probe gives the storage-read proof (gates.proof): the one type the chain reads.
    evidence: ProbeEvidence = ProbeEvidence(repetitions=1)
    restore_gbps: float | None = None
    page_cache: str = ""  # how the page cache was dropped before the probe, if it was
    probe_read_bytes: dict[str, int] = {}  # probe request id -> bytes its restore read
    kv_read_back: KvReadBack | None = None  # its KV files as stored vs read back (a launched arm)
    fit: bool = True  # the load generator's self-check
    unfit_reasons: list[str] = []
    outputs: dict[str, list[int]] = {}  # probe request id -> output token ids
    logprobs: dict[str, list[float]] = {}  # probe request id -> each output token's logprob
    top_logprobs: dict[str, list[list[tuple[int, float]]]] = {}  # -> each token's top-k by id
    cpu: CpuUse | None = None  # who used the CPU during the repetition (a starved engine?)
    server: str = ""  # what the server said it is (GET /v1/models, its version endpoint)
    simulated: bool = False  # the server said it is kvgate's simulator
    # The machine as a control: the CPU reference timed just before and just after (G2, G3),
    # and the KV device's read speed where the gate reads it (gates.storage.devref).
    machine: list[CpuReference] = []
    device: list[DeviceReference] = []

    @model_validator(mode="before")
    @classmethod
    def _fold(cls, data: Any) -> Any:
        # A repetition stored with the proof's figures as its own fields (before `evidence`).
        if not isinstance(data, dict) or "evidence" in data:
            return data
        data = dict(data)
        flat = {new: data.pop(old) for old, new in _FLAT.items() if old in data}
        wire = {new: data.pop(old) for old, new in _WIRE.items() if old in data}
        data["evidence"] = {**flat, "storage": wire, "engine": data.get("arm", ""),
                            "repetitions": 1, "page_cache": {"how": data["page_cache"]}
                            if data.get("page_cache") else None}
        return data

    @property
    def ttft_p50(self) -> float | None:
        """Median TTFT over the repetition's requests."""
        return percentile(self.ttfts, 50) if self.ttfts else None


def repetition(arm: str, concurrency: int, index: int, cold: ColdRecovery) -> Repetition:
    """Reduce one cold-recovery run to the figures the gates hold against limits."""
    summary = summarize(cold.probe.records, cold.probe.wall)
    counted = [r for r in cold.probe.records if r.counted]
    failed = [r for r in cold.probe.records + cold.seed.records if not r.ok and not r.warmup]
    return Repetition(
        arm=arm, concurrency=concurrency, repetition=index,
        ttfts=[r.ttft for r in counted if r.ttft is not None],
        output_throughput=summary.output_throughput_span, sent=summary.sent,
        errors=len(failed), error_text="; ".join(sorted({r.error for r in failed}))[:500],
        evidence=probe_of(arm, cold), restore_gbps=cold.restore_gbps(),
        page_cache=cold.page_cache, probe_read_bytes=cold.probe_read_bytes,
        kv_read_back=cold.kv_read_back,
        fit=cold.probe.self_check.fit,
        unfit_reasons=cold.probe.self_check.reasons,
        outputs={r.request_id: r.output_ids for r in cold.probe.records},
        logprobs={r.request_id: r.output_logprobs for r in cold.probe.records
                  if r.output_logprobs},
        top_logprobs={r.request_id: r.output_top_logprobs for r in cold.probe.records
                      if r.output_top_logprobs},
        server=cold.server.describe() if cold.server else "",
        simulated=bool(cold.server and cold.server.simulated))


def probe_of(arm: str, cold: ColdRecovery) -> ProbeEvidence:
    """What one cold-recovery probe gives the storage-read proof."""
    attribution = cold.attribution
    gpu = [a.gpu_hit_tokens for a in attribution]
    # One attribution per arm (its scrape targets merged) gives the engine's detail.
    detail = engine_evidence(attribution[0]) if len(attribution) == 1 else {}
    return ProbeEvidence(**{
        **detail, "engine": arm, "expected_tokens": cold.expected_kv_tokens,
        "storage_read_tokens": cold.storage_read_tokens(),
        "storage_read_bytes": cold.storage_read_bytes(),
        "gpu_hit_tokens": None if any(g is None for g in gpu) else sum(gpu),
        "storage": StorageReads(device_bytes=cold.device_read_bytes,
                                nic_bytes=cold.nic_read_bytes, rdma_bytes=cold.rdma_read_bytes),
        "process_read_bytes": cold.process_read_bytes, "probe_seconds": cold.probe.wall,
        "page_cache": cold.cache_drop, "repetitions": 1,
        "error": cold.metrics_error, "probe_prompt_tokens": cold.probe_prompt_tokens})


def probe_evidence(reps: list[Repetition], kv_bytes_per_token: int | None) -> ProbeEvidence:
    """The evidence of a level's probes, for the storage-read proof."""
    return level_evidence([r.evidence for r in reps], kv_bytes_per_token)
