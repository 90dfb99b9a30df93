"""The simulated engine behind the simulator's HTTP face: clock, prefill, decode pacing.

The GPU prefix cache, the KV tier, one FIFO compute resource and the decode batch; the server
(_sim_server) turns requests into calls on it and its counters into /metrics.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol

from .model import (
    FaultConfig,
    LruCache,
    Profile,
    chunk_hashes,
    decode_seconds,
    plan_prefill,
    prefill_seconds,
    root_hash,
)
from .payload import clean_digest, kv_digest
from .tier import KvTier


class Clock(Protocol):
    """The time seam: perf_counter nanoseconds and sleeping until such a time."""

    def now_ns(self) -> int: ...

    async def sleep_until(self, t_ns: int) -> None: ...


class RealClock:
    """perf_counter_ns (CLOCK_MONOTONIC on Linux, comparable across processes)."""

    def now_ns(self) -> int:
        """The current perf_counter time in nanoseconds."""
        return time.perf_counter_ns()

    async def sleep_until(self, t_ns: int) -> None:
        """Sleep until perf_counter reaches t_ns (at once when already past)."""
        delay = t_ns - time.perf_counter_ns()
        if delay > 0:
            await asyncio.sleep(delay / 1e9)


@dataclass
class Counters:
    """Token counters behind /metrics; the tier counts its own bytes."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    gpu_hit_tokens: int = 0
    cpu_hit_tokens: int = 0
    storage_read_tokens: int = 0
    recomputed_tokens: int = 0


@dataclass
class Prefilled:
    """A prompt after prefill: where its KV came from and the digests of the KV used."""

    gpu_tokens: int
    storage_tokens: int
    recompute_tokens: int
    cpu_tokens: int = 0
    digests: list[bytes] = field(default_factory=list)


class Engine:
    """The simulated engine: GPU cache, CPU tier, storage tier, one compute resource, a decode
    batch, faults.

    Simplification: one request's prefill does not slow the others' decode steps.
    """

    def __init__(self, profile: Profile, tier: KvTier | None, faults: FaultConfig,
                 clock: Clock):
        self.profile, self.tier, self.clock = profile, tier, clock
        self.gpu = LruCache(profile.gpu_cache_chunks)
        # Emptied by nothing but its own LRU: POST /reset_prefix_cache empties the GPU cache
        # only, as vLLM's leaves a connector's CPU tier alone.
        self.cpu = LruCache(profile.cpu_tier_chunks)
        self.counters = Counters()
        self.root = root_hash(profile.model_id)
        self.compute = asyncio.Lock()  # FIFO: concurrent prefills take turns
        self.running = 0  # requests in prefill or decode
        self.decoding = 0  # the decode batch
        self.request_no = 0  # generation requests since the faults were last set
        self.set_faults(faults)

    def set_faults(self, faults: FaultConfig) -> None:
        """Switch faults; restarts the request count so every-Nth schedules are exact."""
        self.faults, self.request_no = faults, 0
        if self.tier is not None:
            self.tier.corrupt_fraction = faults.corrupt_fraction
            self.tier.throttle.bytes_per_s = faults.read_bytes_per_s

    async def prefill(self, ids: list[int]) -> Prefilled:
        """GPU and CPU-tier hits are free, tier chunks are really read, the rest is computed
        and stored."""
        p, tier = self.profile, self.tier
        hashes = chunk_hashes(ids, p.chunk_tokens, self.root)
        plan = plan_prefill(len(ids), hashes, p.chunk_tokens, self.gpu.__contains__,
                            (lambda h: h in tier) if tier is not None else (lambda h: False),
                            self.cpu.__contains__)
        # Take the cached digests now: another request may evict these chunks meanwhile.
        digests = [self.gpu.get(h) or b"" for h in hashes[:plan.gpu_chunks]]
        memory = plan.gpu_chunks + plan.cpu_chunks
        digests += [self.cpu.get(h) or b"" for h in hashes[plan.gpu_chunks:memory]]
        self.counters.prompt_tokens += len(ids)
        self.counters.gpu_hit_tokens += plan.gpu_tokens
        self.counters.cpu_hit_tokens += plan.cpu_tokens
        stored = hashes[memory:memory + plan.storage_chunks]
        if stored:
            got = await tier.read_chunks(stored, kv_digest, return_exceptions=True)
            # A chunk that could not be read (deleted under us, I/O error) ends the prefix
            # and the rest is recomputed, as an engine falls back when a KV load fails.
            ok = next((i for i, g in enumerate(got) if isinstance(g, BaseException)), len(got))
            digests += got[:ok]
            plan = plan.model_copy(update={"storage_chunks": ok, "compute_chunks":
                                           plan.compute_chunks + len(stored) - ok})
            self.counters.storage_read_tokens += plan.storage_tokens
        fresh = hashes[len(digests):]
        async with self.compute:
            # At least one token runs through the model, even on a full hit: it yields the
            # first output token (vLLM recomputes the last prompt token for the same reason).
            busy = prefill_seconds(p, max(plan.recompute_tokens, 1))
            due = self.clock.now_ns() + int(busy * 1e9)
            digests += [clean_digest(h, p) for h in fresh]  # a hash each: no bytes are made
            await self.clock.sleep_until(due)
        self.counters.recomputed_tokens += plan.recompute_tokens
        if tier is not None:
            for h in fresh:
                # The writer makes the bytes again rather than this request holding them all:
                # a 100K-token prompt's KV is ~200 MB even scaled down.
                tier.write_later(h)
        for h, d in zip(hashes, digests, strict=True):
            self.gpu.put(h, d)
            self.cpu.put(h, d)
        return Prefilled(plan.gpu_tokens, plan.storage_tokens, plan.recompute_tokens,
                         plan.cpu_tokens, digests)

    async def paced(self, count: int, stall_at: int | None,
                    stall_s: float) -> AsyncIterator[tuple[int, int]]:
        """Yield (index, due time ns) for each output token, paced by the decode batch."""
        due = self.clock.now_ns()  # the first token comes out of prefill
        self.decoding += 1
        try:
            for i in range(count):
                if i:
                    due += int(decode_seconds(self.profile, self.decoding) * 1e9)
                if i == stall_at:
                    due += int(stall_s * 1e9)  # a stalled engine makes no progress
                await self.clock.sleep_until(due)
                yield i, due
        finally:
            self.decoding -= 1
