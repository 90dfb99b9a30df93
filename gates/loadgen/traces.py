"""Mooncake trace replay: a JSONL trace of timed requests with shared-prefix hash ids. Pure.

Each hash id maps to a fixed block of token ids (BLAKE2b keyed by the seed), so equal leading
ids are a shared prefix and a replay keeps the trace's real prefix sharing.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel, ConfigDict

from .workloads import (
    MAX_INPUT,
    PROBE,
    RESERVED,
    Plan,
    PlannedRequest,
    WorkloadError,
    block_tokens,
)

MOONCAKE_BLOCK = 512  # tokens per hash id in the published Mooncake traces


class TraceEntry(BaseModel):
    """One line of a Mooncake trace: arrival (ms), lengths, and 512-token block hash ids."""

    model_config = ConfigDict(frozen=True)

    line: int
    timestamp: float
    input_length: int
    output_length: int
    hash_ids: list[int]


def _field(doc: dict, name: str, n: int, *, kind: str) -> Any:
    if name not in doc:
        raise WorkloadError(f"trace line {n}: field {name!r} is missing")
    value = doc[name]
    if kind == "time":
        if isinstance(value, bool) or not isinstance(value, int | float):
            ok = False
        elif isinstance(value, int):
            ok = 0 <= value < 2**63  # a larger int does not even convert to float
        else:
            ok = math.isfinite(value) and value >= 0
        if not ok:
            raise WorkloadError(f"trace line {n}: field 'timestamp' must be a number of ms "
                                f">= 0, got {value!r:.60}")
        return float(value)
    if kind == "length":
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_INPUT:
            raise WorkloadError(f"trace line {n}: field {name!r} must be an integer from 1 to "
                                f"{MAX_INPUT}, got {value!r:.60}")
        return value
    if not isinstance(value, list) or not value or not all(
            isinstance(h, int) and not isinstance(h, bool) and 0 <= h < 2**63 for h in value):
        raise WorkloadError(f"trace line {n}: field 'hash_ids' must be a non-empty list of "
                            f"integers >= 0")
    return value


def parse_mooncake(text: str, block: int = MOONCAKE_BLOCK) -> list[TraceEntry]:
    """Parse a Mooncake JSONL trace; a bad line raises WorkloadError naming line and field."""
    entries = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise WorkloadError(f"trace line {n}: not JSON ({str(exc)[:80]})") from None
        if not isinstance(doc, dict):
            raise WorkloadError(f"trace line {n}: not a JSON object")
        entry = TraceEntry(line=n, timestamp=_field(doc, "timestamp", n, kind="time"),
                           input_length=_field(doc, "input_length", n, kind="length"),
                           output_length=_field(doc, "output_length", n, kind="length"),
                           hash_ids=_field(doc, "hash_ids", n, kind="ids"))
        need = -(-entry.input_length // block)
        if len(entry.hash_ids) != need:
            raise WorkloadError(f"trace line {n}: field 'hash_ids' has {len(entry.hash_ids)} "
                                f"blocks, but input_length {entry.input_length} needs {need} "
                                f"blocks of {block} tokens")
        entries.append(entry)
    return entries


def mooncake_replay(trace: str | list[TraceEntry], seed: int, vocab: int,
                    time_scale: float = 1.0, max_requests: int | None = None,
                    block: int = MOONCAKE_BLOCK, reserved: int = RESERVED) -> Plan:
    """Timed replay of a Mooncake trace; equal hash ids become equal token blocks."""
    if not (math.isfinite(time_scale) and time_scale > 0):
        raise WorkloadError(f"time_scale must be > 0, got {time_scale}")
    if max_requests is not None and max_requests < 1:
        raise WorkloadError(f"max_requests must be at least 1, got {max_requests}")
    entries = parse_mooncake(trace, block) if isinstance(trace, str) else trace
    entries = entries[:max_requests]
    if not entries:
        raise WorkloadError("the trace has no requests")
    start = min(e.timestamp for e in entries)
    cache: dict[int, list[int]] = {}
    requests = []
    for i, e in enumerate(entries):
        prompt: list[int] = []
        for h in e.hash_ids:
            if h not in cache:
                cache[h] = block_tokens(f"{seed}:mooncake:{h}", block, vocab, reserved)
            prompt += cache[h]
        # The last block is partial: its first tokens, so equal ids still share a prefix.
        requests.append(PlannedRequest(
            request_id=f"trace-{i:06d}", phase=PROBE, prompt=prompt[:e.input_length],
            max_tokens=e.output_length, at=(e.timestamp - start) / 1000.0 * time_scale,
            context_id=f"line-{e.line}"))
    return Plan(kind="mooncake_replay", seed=seed, requests=requests,
                params=dict(time_scale=time_scale, max_requests=max_requests, block=block,
                            vocab=vocab, reserved=reserved, entries=len(entries)))
