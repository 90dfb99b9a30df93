"""The load generator: HTTP/1.1 over asyncio, SSE, the request stream, workloads and
traces, the phase runner with its self-check, and the latency statistics."""

from .cpu import CpuUse, cpu_snapshot, cpu_use
from .generator import (
    READ_BUFFER,
    Endpoint,
    LoadResult,
    LoadSettings,
    PlannedLike,
    payload,
    run_phase,
    send,
)
from .metrics import stats, summarize, ttft
from .pool import Pool
from .selfcheck import LoopLagMonitor, judge_self_check
from .sse import SSEProtocolError
from .stream import ResponseStream
from .traces import mooncake_replay
from .workloads import (
    EVICT,
    MAX_INPUT,
    PROBE,
    RESERVED,
    SEED,
    WARMUP,
    Plan,
    PlannedRequest,
    WorkloadError,
    cold_recovery,
    multi_turn,
    shared_prefix,
    workload_hash,
    workload_plan,
)

__all__ = [
    "CpuUse",
    "EVICT",
    "Endpoint",
    "LoadResult",
    "LoadSettings",
    "LoopLagMonitor",
    "MAX_INPUT",
    "PROBE",
    "Plan",
    "PlannedLike",
    "PlannedRequest",
    "Pool",
    "READ_BUFFER",
    "RESERVED",
    "ResponseStream",
    "SEED",
    "SSEProtocolError",
    "WARMUP",
    "WorkloadError",
    "cold_recovery",
    "cpu_snapshot",
    "cpu_use",
    "judge_self_check",
    "mooncake_replay",
    "multi_turn",
    "payload",
    "run_phase",
    "send",
    "shared_prefix",
    "stats",
    "summarize",
    "ttft",
    "workload_hash",
    "workload_plan",
]
