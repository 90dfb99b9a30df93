"""One cold-recovery repetition reduced to the figures G2 and G3 judge. Pure."""

from __future__ import annotations

from pydantic import BaseModel

from ..core import percentile
from .metrics import summarize
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
        outputs={r.request_id: r.output_ids for r in cold.probe.records})
