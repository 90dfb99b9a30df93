"""Workload phases against live endpoints: seed, settle, evict, probe — and server-metric deltas."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal, Protocol

import aiohttp
from pydantic import BaseModel

from ..core.verdicts import RequestRecord
from ..loadgen import (
    EVICT,
    PROBE,
    SEED,
    WARMUP,
    Endpoint,
    LoadResult,
    LoadSettings,
    Plan,
    run_phase,
)
from ..proof import (
    MAX_EXPOSITION,
    CacheDrop,
    DiskCounters,
    MetricSet,
    MetricsParseError,
    ServerIdentity,
    StorageAttribution,
    SysfsCounters,
    attribute,
    detect_engine,
    device_read_bytes,
    merge_targets,
    parse_metrics,
    restore_gbps,
    server_identity,
    storage_reads,
)
from .errors import PhaseError
from .kv_files import QUIET_POLLS, WRITE_QUIET_S, KvReadBack, read_back
from .pagecache import drop_page_cache, read_bytes_delta, tree_read_bytes

Eviction = Literal["reset", "flood", "none"]
# Engines whose counters reach /metrics late: LMCache's stats logger publishes every 10 s
# (LMCache/LMCache lmcache/v1/cache_engine.py: LMCacheStatsLogger(log_interval=10)), so the
# after-probe scrape waits past one interval or it would miss the probe's reads.
COUNTER_DELAY_S = {"lmcache": 11.0}


class MetricsSource(Protocol):
    """Reads one endpoint's Prometheus /metrics (a seam: real HTTP, or scripted in tests)."""

    async def scrape(self, url: str) -> MetricSet: ...


class HttpMetrics:
    """The real metrics source: GET over HTTP, the whole answer within timeout seconds (a
    server that trickles its exposition cannot hold a phase up)."""

    def __init__(self, timeout: float = 30.0):
        self.timeout = timeout

    async def scrape(self, url: str) -> MetricSet:
        """Fetch and parse url; any failure is a PhaseError naming it."""
        try:
            async with aiohttp.ClientSession() as session, session.get(
                    url, timeout=aiohttp.ClientTimeout(total=self.timeout)) as response:
                if response.status != 200:
                    raise PhaseError(f"{url}: HTTP {response.status}")
                body = bytearray()
                async for chunk in response.content.iter_chunked(2**16):
                    body += chunk
                    if len(body) > MAX_EXPOSITION:  # refused before it fills the memory
                        raise PhaseError(f"{url}: the exposition is larger than "
                                         f"{MAX_EXPOSITION // 2**20} MiB, the most kvgate reads")
                try:  # the text format is UTF-8 (Prometheus exposition_formats.md): never guess
                    text = body.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise PhaseError(f"{url}: the exposition is not UTF-8 (byte {exc.start}: "
                                     f"{body[exc.start:exc.start + 1]!r})") from None
                return parse_metrics(text)
        except TimeoutError:
            raise PhaseError(f"{url}: no whole answer within {self.timeout:g} s, the most "
                             "kvgate waits for a scrape") from None
        except aiohttp.ClientError as exc:
            raise PhaseError(f"{url}: {exc!r}") from None
        except MetricsParseError as exc:
            raise PhaseError(f"{url}: {exc}") from None


def metrics_url(endpoint: Endpoint) -> str:
    """Where an endpoint serves Prometheus metrics."""
    return endpoint.url.rstrip("/") + "/metrics"


async def scrape_all(source: MetricsSource, endpoints: Sequence[Endpoint]) -> list[MetricSet]:
    """One snapshot per endpoint, in endpoint order."""
    return [await source.scrape(metrics_url(e)) for e in endpoints]


TARGET_LABEL = "scrape_target"  # added to every series when an arm names several targets


async def scrape_targets(source: MetricsSource, urls: Sequence[str]) -> MetricSet:
    """Every scrape target an arm names, merged into one set (Dynamo frontend + KVBM port)."""
    return merge_targets([(url, await source.scrape(url)) for url in urls], TARGET_LABEL)


# kvgate's own simulator (gates.sim.server) exports the chunk writes it has queued: while any
# is, its writes are not done, however long its counters have held still.
SIM_PENDING = "kvgate_sim_pending_writes"


async def settle(source: MetricsSource, urls: Sequence[str], engine: str,
                 quiet_for: float = WRITE_QUIET_S, quiet_polls: int = QUIET_POLLS,
                 timeout: float = 120.0) -> float:
    """Wait until the storage-write counters have held still for ``quiet_for`` seconds
    (``quiet_polls`` polls); returns the seconds waited."""
    start, interval = time.monotonic(), quiet_for / quiet_polls
    last, quiet = None, 0
    while quiet < quiet_polls and time.monotonic() - start < timeout:
        snap = await scrape_targets(source, urls)
        # Totals since the engine started (no before scrape), not a delta of a snapshot.
        written = attribute(engine, None, snap).storage_write_bytes
        quiet = quiet + 1 if written == last else 0
        # A queued write: the quiet polls count from the first look with none queued.
        last = None if snap.sum(SIM_PENDING) else written
        if quiet < quiet_polls:
            await asyncio.sleep(interval)
    return time.monotonic() - start


async def evict(endpoints: Sequence[Endpoint], how: Eviction, plan: Plan,
                settings: LoadSettings) -> str:
    """Empty the GPU cache so the probe must restore from storage; returns what was done."""
    if how == "none":
        return "no eviction"
    if how == "flood":
        await run_phase(plan.phase(EVICT), endpoints, settings)
        return f"flooded with {len(plan.phase(EVICT))} filler contexts"
    async with aiohttp.ClientSession() as session:
        for endpoint in endpoints:
            await _reset_prefix_cache(session, endpoint.url.rstrip("/") + "/reset_prefix_cache")
    return "POST /reset_prefix_cache on every endpoint"


RESET_TRIES = 20  # vLLM refuses a reset while blocks are held (in-flight requests, transfers)


async def _reset_prefix_cache(session: aiohttp.ClientSession, url: str) -> None:
    """POST until vLLM answers {"success": true}; a reset it refused is not an eviction."""
    for _ in range(RESET_TRIES):
        try:
            async with session.post(url, timeout=aiohttp.ClientTimeout(total=60)) as r:
                if r.status == 404:
                    raise PhaseError(f"{url}: HTTP 404: vLLM serves /reset_prefix_cache only "
                                     "with VLLM_SERVER_DEV_MODE=1 in the server's environment "
                                     "(vllm/entrypoints/serve/dev/cache/api_router.py); set it "
                                     "on the arm, or choose another [workload] eviction")
                if r.status >= 300:
                    raise PhaseError(f"{url}: HTTP {r.status}")
                text = await r.text()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise PhaseError(f"{url}: " + ("no answer within 60 s" if isinstance(
                exc, TimeoutError) else repr(exc))) from None
        try:
            answer = json.loads(text)
        except ValueError:
            answer = None
        # vLLM >= 0.11 answers {"success": bool}; older ones an empty 200, taken as done.
        if not isinstance(answer, dict) or answer.get("success", True) is not False:
            return
        await asyncio.sleep(0.5)
    raise PhaseError(f"{url}: the engine refused to reset its prefix cache {RESET_TRIES} times "
                     '({"success": false}: blocks still held by running requests)')


async def _scrape(source: MetricsSource, urls: Sequence[str]) -> tuple[MetricSet | None, str]:
    try:
        return await scrape_targets(source, urls), ""
    except PhaseError as exc:
        return None, f"metrics: {exc}"


class ColdRecovery(BaseModel):
    """A cold-recovery run: its phases, what the server says it read, what the disks read."""

    engine: str
    seed: LoadResult
    probe: LoadResult
    eviction: str
    settle_seconds: float
    attribution: list[StorageAttribution]
    expected_kv_tokens: int
    device_read_bytes: int | None = None
    # A launched engine: its process tree's storage reads in the probe (/proc/PID/io
    # read_bytes), how its KV files left the page cache; slot files: bytes each restore read.
    process_read_bytes: int | None = None
    page_cache: str = ""
    cache_drop: CacheDrop | None = None  # that drop as mincore measured it
    probe_read_bytes: dict[str, int] = {}
    metrics_error: str = ""  # why the engine's counters could not be read (the proof says so)
    server: ServerIdentity | None = None  # what the server said it is
    # Storage NICs' receive bytes and RDMA ports' bytes in the probe (NVMe-oF), when watched.
    nic_read_bytes: int | None = None
    rdma_read_bytes: int | None = None
    probe_prompt_tokens: int | None = None  # what the probe asked for: the tokens' ceiling
    kv_read_back: KvReadBack | None = None  # the KV files as stored vs read back after the probe

    def storage_read_bytes(self) -> float | None:
        """Storage-read bytes of the probe summed over endpoints, None if not exposed."""
        values = [a.storage_read_bytes for a in self.attribution]
        return None if any(v is None for v in values) else sum(values)

    def storage_read_tokens(self) -> float | None:
        """Storage-read tokens of the probe summed over endpoints, None if not exposed."""
        values = [a.storage_read_tokens for a in self.attribution]
        return None if any(v is None for v in values) else sum(values)

    def restore_gbps(self) -> float | None:
        """Effective KV-restore GB/s: storage-read bytes over the probe's wall time."""
        read = self.storage_read_bytes()
        return None if read is None else restore_gbps(read, self.probe.wall)


async def run_cold_recovery(plan: Plan, endpoints: Sequence[Endpoint], settings: LoadSettings,
                            *, engine: str = "auto", eviction: Eviction = "reset",
                            source: MetricsSource | None = None,
                            disks: DiskCounters | None = None, devices: Sequence[str] = (),
                            on_record: Callable[[RequestRecord], None] | None = None,
                            evict_hook: Callable[[], None] | None = None,
                            metrics_urls: Sequence[str] = (), nics: SysfsCounters | None = None,
                            block_tokens: int | None = None, kv_dir: Path | None = None,
                            pid: int | None = None,
                            write_quiet: float = WRITE_QUIET_S) -> ColdRecovery:
    """Warm up, seed every context, let writes settle, evict, then probe at the concurrency.

    ``evict_hook`` replaces the eviction request, e.g. restarting an arm whose tier persists.
    ``metrics_urls`` are every scrape target the arm names (default: each endpoint's
    /metrics), merged; ``nics`` watches the storage NICs and RDMA ports during the probe.
    A launched arm gives its ``kv_dir`` (dropped from the page cache before the probe) and its
    server's ``pid`` (the process tree's read_bytes across the probe). ``write_quiet``: how
    long the arm's write counters and KV directory must hold still before the seed counts as
    written (the arm's write_quiet).
    """
    source = source or HttpMetrics()
    urls = list(metrics_urls) or [metrics_url(e) for e in endpoints]
    # A scrape that fails (target down, garbled text) costs the proof, never the load run:
    # the error is kept and the proof says INCONCLUSIVE with it.
    first, problem = await _scrape(source, urls)
    key = endpoints[0].api_key
    server = await server_identity(endpoints[0].url, key.get_secret_value() if key else "")
    if engine == "auto" and first is not None:
        engine = detect_engine(first) or ""
        problem = problem or ("" if engine else f"cannot tell the engine from "
                              f"{', '.join(urls)}: name it (arm engine = ..., or --engine)")
    await run_phase(plan.phase(WARMUP), endpoints, settings, on_record)
    seed = await run_phase(plan.phase(SEED), endpoints, settings, on_record)
    waited = await settle(source, urls, engine, write_quiet) if not problem else 0.0
    if evict_hook is not None:
        await asyncio.to_thread(evict_hook)
        done = "restarted the engine (its storage tier persists)"
    else:
        done = await evict(endpoints, eviction, plan, settings)
    # Off the event loop: it waits for the directory to hold still (gates.inference.kv_files).
    stored: dict[str, str] = {}
    drop = await asyncio.to_thread(drop_page_cache, kv_dir, stored, write_quiet) \
        if kv_dir is not None else None
    dropped = drop.line() if drop else ""
    (before, early), disk_before = await _scrape(source, urls), disks and disks.read()
    nic_before, io_before = nics.read() if nics else None, tree_read_bytes(pid)
    probe = await run_phase(plan.phase(PROBE), endpoints, settings, on_record)
    io_after = tree_read_bytes(pid)
    await asyncio.sleep(COUNTER_DELAY_S.get(engine, 0.0))
    (after, late), disk_after = await _scrape(source, urls), disks and disks.read()
    # After every counter was read: the read-back's own reads land in no figure of the probe.
    again = await asyncio.to_thread(read_back, kv_dir, stored) if kv_dir is not None else None
    wire = storage_reads(nic_before, nics.read()) if nics and nic_before else None
    problem = problem or early or late
    attribution = StorageAttribution(engine=engine or "unknown")
    if not problem:
        attribution = attribute(engine, before, after, block_tokens)
    return ColdRecovery(
        engine=engine or "unknown", seed=seed, probe=probe,
        eviction="; ".join(filter(None, [done, dropped])), page_cache=dropped, cache_drop=drop,
        process_read_bytes=read_bytes_delta(io_before, io_after), settle_seconds=waited,
        attribution=[attribution], metrics_error=problem, server=server,
        expected_kv_tokens=plan.total_expected_kv_tokens,
        probe_prompt_tokens=sum(len(r.prompt) for r in plan.phase(PROBE)),
        device_read_bytes=device_read_bytes(disk_before, disk_after, list(devices))
        if disks and devices else None,
        kv_read_back=again, nic_read_bytes=wire.nic_bytes if wire else None,
        rdma_read_bytes=wire.rdma_bytes if wire else None)
