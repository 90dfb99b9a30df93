"""One cold-recovery repetition reduced to the figures G2 and G3 judge. Pure."""

from __future__ import annotations

from pydantic import BaseModel

from ..core import percentile
from ..loadgen import CpuUse, summarize
from ..proof import ProbeEvidence, StorageReads, engine_evidence
from .machine import CpuReference
from .phases import ColdRecovery


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
    storage_read_tokens: float | None = None
    storage_read_bytes: float | None = None
    gpu_hit_tokens: float | None = None
    expected_kv_tokens: int = 0
    restore_gbps: float | None = None
    device_read_bytes: int | None = None
    process_read_bytes: int | None = None  # the engine process's storage reads (/proc/PID/io)
    page_cache: str = ""  # how the page cache was dropped before the probe, if it was
    probe_read_bytes: dict[str, int] = {}  # probe request id -> bytes its restore read
    fit: bool = True  # the load generator's self-check
    unfit_reasons: list[str] = []
    outputs: dict[str, list[int]] = {}  # probe request id -> output token ids
    logprobs: dict[str, list[float]] = {}  # probe request id -> each output token's logprob
    # For the evidence chain: the probe's duration, per-rank reads, the storage counter used.
    probe_seconds: float = 0.0
    rank_reads: dict[str, float] = {}
    rank_mode: str = ""
    caveat: str = ""
    counter: str = ""
    nic_read_bytes: int | None = None
    rdma_read_bytes: int | None = None
    metrics_error: str = ""
    storage_read_failures: float | None = None
    cpu_hit_tokens: float | None = None
    # The tokens' ceilings: what the probe sent, and the prompt tokens the engine counted;
    # series whose delta was refused, labels the rules could not place (the proof says so).
    probe_prompt_tokens: int | None = None
    engine_prompt_tokens: float | None = None
    input_errors: list[str] = []
    unclassified: list[str] = []
    cpu: CpuUse | None = None  # who used the CPU during the repetition (a starved engine?)
    kv_dir: str = ""  # the arm's KV directory, and the bytes of files found in it after the run
    kv_dir_bytes: int | None = None
    server: str = ""  # what the server said it is (GET /v1/models, its version endpoint)
    simulated: bool = False  # the server said it is kvgate's simulator
    # The machine as a control: the CPU reference timed just before and just after (G2, G3).
    machine: list[CpuReference] = []

    @property
    def ttft_p50(self) -> float | None:
        """Median TTFT over the repetition's requests."""
        return percentile(self.ttfts, 50) if self.ttfts else None


def repetition(arm: str, concurrency: int, index: int, cold: ColdRecovery) -> Repetition:
    """Reduce one cold-recovery run to the figures the gates hold against limits."""
    summary = summarize(cold.probe.records, cold.probe.wall)
    counted = [r for r in cold.probe.records if r.counted]
    failed = [r for r in cold.probe.records + cold.seed.records if not r.ok and not r.warmup]
    attribution = cold.attribution
    gpu = [a.gpu_hit_tokens for a in attribution]
    return Repetition(
        arm=arm, concurrency=concurrency, repetition=index,
        ttfts=[r.ttft for r in counted if r.ttft is not None],
        output_throughput=summary.output_throughput_span, sent=summary.sent,
        errors=len(failed), error_text="; ".join(sorted({r.error for r in failed}))[:500],
        storage_read_tokens=cold.storage_read_tokens(),
        storage_read_bytes=cold.storage_read_bytes(),
        gpu_hit_tokens=None if any(g is None for g in gpu) else sum(gpu),
        expected_kv_tokens=cold.expected_kv_tokens, restore_gbps=cold.restore_gbps(),
        device_read_bytes=cold.device_read_bytes, process_read_bytes=cold.process_read_bytes,
        page_cache=cold.page_cache, probe_read_bytes=cold.probe_read_bytes,
        fit=cold.probe.self_check.fit,
        unfit_reasons=cold.probe.self_check.reasons,
        outputs={r.request_id: r.output_ids for r in cold.probe.records},
        logprobs={r.request_id: r.output_logprobs for r in cold.probe.records
                  if r.output_logprobs},
        probe_seconds=cold.probe.wall,
        # One attribution per arm (its scrape targets merged).
        **({k: v for k, v in engine_evidence(attribution[0]).items()
            if k not in ("storage_read_tokens", "storage_read_bytes", "gpu_hit_tokens")}
           if len(attribution) == 1 else {}),
        nic_read_bytes=cold.nic_read_bytes, rdma_read_bytes=cold.rdma_read_bytes,
        metrics_error=cold.metrics_error, probe_prompt_tokens=cold.probe_prompt_tokens,
        server=cold.server.describe() if cold.server else "",
        simulated=bool(cold.server and cold.server.simulated))


def probe_evidence(reps: list[Repetition], kv_bytes_per_token: int | None) -> ProbeEvidence:
    """The evidence of a level's probes, for the storage-read proof."""
    total = ProbeEvidence()
    for r in reps:
        storage = StorageReads(device_bytes=r.device_read_bytes, nic_bytes=r.nic_read_bytes,
                               rdma_bytes=r.rdma_read_bytes)
        one = ProbeEvidence(
            engine=r.arm, expected_tokens=r.expected_kv_tokens,
            kv_bytes_per_token=kv_bytes_per_token, storage_read_tokens=r.storage_read_tokens,
            storage_read_bytes=r.storage_read_bytes, rank_reads=r.rank_reads,
            rank_mode=r.rank_mode, caveat=r.caveat, counter=r.counter,
            gpu_hit_tokens=r.gpu_hit_tokens, storage=storage,
            process_read_bytes=r.process_read_bytes, probe_seconds=r.probe_seconds,
            page_cache_dropped=bool(r.page_cache), repetitions=1, error=r.metrics_error,
            storage_read_failures=r.storage_read_failures, cpu_hit_tokens=r.cpu_hit_tokens,
            kv_dir=r.kv_dir, kv_dir_bytes=r.kv_dir_bytes,
            probe_prompt_tokens=r.probe_prompt_tokens,
            engine_prompt_tokens=r.engine_prompt_tokens, input_errors=r.input_errors,
            unclassified=r.unclassified)
        total = one if not total.repetitions else total + one
    return total
