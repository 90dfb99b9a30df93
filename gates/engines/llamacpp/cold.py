"""Cold recovery on llama.cpp: seed = prefill + slot save, evict = slot erase, probe = restore.

A probe's TTFT runs from kvgate's restore request to the first content token, measured here,
not taken from the server. Before the probe every slot file is dropped from the page cache
(gates.inference.drop_page_cache), so each restore reads the storage under test. The proof of
storage reads comes from the restores' own answers (tokens, bytes), the server process's
read_bytes, and the devices' read bytes. An arm without a KV directory skips the restore and
recomputes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import aiohttp

from ...core.statistics import percentile
from ...core.verdicts import RequestOutcome, RequestRecord
from ...inference import (
    WRITE_QUIET_S,
    ColdRecovery,
    HttpMetrics,
    MetricsSource,
    PhaseError,
    drop_page_cache,
    read_back,
    read_bytes_delta,
    scrape_all,
    tree_read_bytes,
)
from ...loadgen import (
    PROBE,
    READ_BUFFER,
    SEED,
    WARMUP,
    Endpoint,
    LoadResult,
    LoadSettings,
    LoopLagMonitor,
    Plan,
    PlannedLike,
    Pool,
    judge_self_check,
)
from ...proof import DiskCounters, StorageAttribution, attribute, device_read_bytes, server_identity
from .http import SlotError, SlotResult, send_to_slot, slot_action, total_slots

ENGINE = "llamacpp"


def slot_file(request: PlannedLike) -> str:
    """The slot-save file name of a context (llama-server wants a bare file name)."""
    return f"{getattr(request, 'context_id', None) or request.request_id}.bin"


class SlotRunner:
    """One llama-server: a pool of free slots, and the phases run through it."""

    def __init__(self, session: aiohttp.ClientSession, pool: Pool, endpoint: Endpoint,
                 slots: int, settings: LoadSettings, tier: bool):
        # The session carries the slot actions; the pool (the load generator's) the probes.
        self.session, self.pool, self.endpoint = session, pool, endpoint
        self.settings, self.tier = settings, tier
        self.free: asyncio.Queue[int] = asyncio.Queue()
        for slot in range(slots):
            self.free.put_nowait(slot)
        self.actions: dict[str, SlotResult] = {}  # request id -> its save or restore

    async def _one(self, request: PlannedLike, origin: int, gate: asyncio.Semaphore,
                   phase: str) -> RequestRecord:
        waited = time.perf_counter_ns()
        async with gate:
            slot = await self.free.get()
            queue = (time.perf_counter_ns() - waited) / 1e9
            try:
                return await self._on_slot(request, origin, slot, queue, phase)
            finally:
                self.free.put_nowait(slot)

    async def _on_slot(self, request: PlannedLike, origin: int, slot: int, queue: float,
                       phase: str) -> RequestRecord:
        base, t0 = self.endpoint.url, time.perf_counter_ns()
        restore = self.tier and phase == PROBE
        if restore:
            try:
                self.actions[request.request_id] = await slot_action(
                    self.session, base, slot, "restore", slot_file(request))
            except SlotError as exc:
                return _failed(request, self.endpoint, (t0 - origin) / 1e9, queue, str(exc))
        record = await send_to_slot(self.pool, self.endpoint, request, self.settings, origin,
                                    slot=slot, cache_prompt=self.tier, t0_ns=t0, queue=queue)
        if self.tier and phase == SEED and record.ok:
            try:
                self.actions[request.request_id] = await slot_action(
                    self.session, base, slot, "save", slot_file(request))
            except SlotError as exc:
                return record.model_copy(update={"outcome": RequestOutcome.HTTP_ERROR,
                                                 "error": f"slot save failed: {exc}"})
        return record

    async def phase(self, requests: Sequence[PlannedLike], phase: str,
                    on_record: Callable[[RequestRecord], None] | None) -> LoadResult:
        """Run one phase at the settings' concurrency; one record per request."""
        gate, monitor = asyncio.Semaphore(self.settings.concurrency), LoopLagMonitor()
        records: list[RequestRecord] = []
        monitor.start()
        origin = time.perf_counter_ns()

        async def one(request: PlannedLike) -> None:
            record = await self._one(request, origin, gate, phase)
            records.append(record)
            if on_record:
                on_record(record)

        try:
            await asyncio.gather(*(one(r) for r in requests))
        finally:
            wall = (time.perf_counter_ns() - origin) / 1e9
            monitor.stop()
        ttfts = [r.ttft for r in records if r.counted and r.ttft is not None]
        return LoadResult(records=records, wall=wall, self_check=judge_self_check(
            monitor.lags, [], percentile(ttfts, 50) if ttfts else None))

    async def erase_all(self, slots: int) -> str:
        """Erase every slot: nothing of the seed stays in the engine's memory."""
        for slot in range(slots):
            await slot_action(self.session, self.endpoint.url, slot, "erase")
        return f"POST /slots/N?action=erase on all {slots} slots"


def _failed(request: PlannedLike, endpoint: Endpoint, t0: float, queue: float,
            error: str) -> RequestRecord:
    return RequestRecord(request_id=request.request_id, phase=request.phase,
                         warmup=request.phase == WARMUP, endpoint=endpoint.url, t0=t0,
                         queue_time=queue, input_tokens=len(request.prompt),
                         outcome=RequestOutcome.HTTP_ERROR, error=error)


def slot_attribution(before, after, restores: list[SlotResult]) -> StorageAttribution:
    """The probe's counters, with the storage reads taken from the restores' own answers."""
    base = attribute(ENGINE, before, after)
    read_tokens = sum(r.n_restored or 0 for r in restores)
    read_bytes = sum(r.n_read or 0 for r in restores)
    cached = base.cached_tokens
    how = f"sum over {len(restores)} POST /slots/N?action=restore answers"
    matched = base.matched | {"storage_read_tokens": [f"n_restored, {how}"],
                              "storage_read_bytes": [f"n_read, {how}"]}
    gpu = None if cached is None else max(cached - read_tokens, 0.0)
    if gpu is not None:
        matched["gpu_hit_tokens"] = ["derived: prompt_tokens_cached - restored tokens"]
    return base.model_copy(update={
        "storage_read_tokens": float(read_tokens), "storage_read_bytes": float(read_bytes),
        "gpu_hit_tokens": gpu, "matched": matched,
        "unknown": [q for q in base.unknown if q not in matched]})


async def run_slot_cold_recovery(plan: Plan, endpoints: Sequence[Endpoint],
                                 settings: LoadSettings, *, kv_dir: Path | None,
                                 pid: int | None = None, source: MetricsSource | None = None,
                                 disks: DiskCounters | None = None, devices: Sequence[str] = (),
                                 on_record: Callable[[RequestRecord], None] | None = None,
                                 evict_hook: Callable[[], None] | None = None,
                                 erase: bool = True,
                                 write_quiet: float = WRITE_QUIET_S) -> ColdRecovery:
    """Warm up, seed and save every context, evict, drop the page cache, probe by restore.

    ``evict_hook`` restarts the engine instead of erasing; ``erase=False`` leaves the slots
    as the seed left them (workload eviction = "none"); ``write_quiet``: the arm's, how long
    its KV directory must hold still before the page cache is dropped.
    """
    if len(endpoints) != 1 or endpoints[0].api != "completions":
        raise PhaseError("the llama.cpp slot protocol drives one server on /v1/completions "
                         f"per arm, not {len(endpoints)} ({endpoints[0].api})")
    source, endpoint = source or HttpMetrics(), endpoints[0]
    # The probes go through the load generator's Pool, which resends a request llama-server
    # (cpp-httplib) dropped on a kept-alive connection it was closing; the slot actions, on
    # this session, get a connection each (loopback: cheap).
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, force_close=True),
                                     read_bufsize=READ_BUFFER) as session, Pool() as pool:
        try:
            slots = await total_slots(session, endpoint.url)
        except SlotError as exc:
            raise PhaseError(str(exc)) from None
        if slots < settings.concurrency:
            raise PhaseError(f"{endpoint.url} has {slots} slots, fewer than concurrency "
                             f"{settings.concurrency}: start llama-server with --parallel "
                             f"{settings.concurrency} or more")
        runner = SlotRunner(session, pool, endpoint, slots, settings, tier=kv_dir is not None)
        server = await server_identity(endpoint.url)
        await runner.phase(plan.phase(WARMUP), WARMUP, on_record)
        seed = await runner.phase(plan.phase(SEED), SEED, on_record)
        try:
            if kv_dir is None:
                done = "no KV tier: probes sent with cache_prompt=false, every token recomputed"
            elif not erase:
                done = "no eviction (the probe restores over the seeded slots)"
            elif evict_hook is not None:
                await asyncio.to_thread(evict_hook)
                done = "restarted the engine (its slot files persist)"
            else:
                done = await runner.erase_all(slots)
        except SlotError as exc:
            raise PhaseError(f"eviction: {exc}") from None
        stored: dict[str, str] = {}
        drop = await asyncio.to_thread(drop_page_cache, kv_dir, stored, write_quiet) \
            if kv_dir is not None else None
        dropped = drop.line() if drop else ""
        runner.actions.clear()
        before, disk_before = await scrape_all(source, endpoints), disks and disks.read()
        io_before = tree_read_bytes(pid)
        probe = await runner.phase(plan.phase(PROBE), PROBE, on_record)
        io_after = tree_read_bytes(pid)
        after, disk_after = await scrape_all(source, endpoints), disks and disks.read()
        again = await asyncio.to_thread(read_back, kv_dir, stored) if kv_dir else None
    attribution = slot_attribution(before[0], after[0], list(runner.actions.values())) \
        if kv_dir is not None else attribute(ENGINE, before[0], after[0]).model_copy(
            update={"storage_read_tokens": 0.0, "storage_read_bytes": 0.0})
    return ColdRecovery(
        engine=ENGINE, seed=seed, probe=probe, eviction="; ".join(filter(None, [done, dropped])),
        settle_seconds=0.0, attribution=[attribution],
        expected_kv_tokens=plan.total_expected_kv_tokens,
        device_read_bytes=device_read_bytes(disk_before, disk_after, list(devices))
        if disks and devices else None,
        process_read_bytes=read_bytes_delta(io_before, io_after), page_cache=dropped,
        cache_drop=drop,
        probe_read_bytes={k: v.n_read or 0 for k, v in runner.actions.items()}, server=server,
        probe_prompt_tokens=sum(len(r.prompt) for r in plan.phase(PROBE)), kv_read_back=again)
