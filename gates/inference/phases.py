"""Workload phases against live endpoints: seed, settle, evict, probe — and server-metric deltas."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Literal, Protocol

import aiohttp
from pydantic import BaseModel

from ..core import RequestRecord
from .attribution import (
    DiskCounters,
    StorageAttribution,
    attribute,
    detect_engine,
    device_read_bytes,
    restore_gbps,
)
from .loadgen import Endpoint, LoadResult, LoadSettings, run_phase
from .promtext import MetricSet, MetricsParseError, parse_metrics
from .workloads import EVICT, PROBE, SEED, WARMUP, Plan

Eviction = Literal["reset", "flood", "none"]


class PhaseError(Exception):
    """A phase could not run (endpoint down, metrics unreadable); the message names the URL."""


class MetricsSource(Protocol):
    """Reads one endpoint's Prometheus /metrics (a seam: real HTTP, or scripted in tests)."""

    async def scrape(self, url: str) -> MetricSet: ...


class HttpMetrics:
    """The real metrics source: GET over HTTP."""

    async def scrape(self, url: str) -> MetricSet:
        """Fetch and parse url; any failure is a PhaseError naming it."""
        try:
            async with aiohttp.ClientSession() as session, session.get(
                    url, timeout=aiohttp.ClientTimeout(total=30)) as response:
                if response.status != 200:
                    raise PhaseError(f"{url}: HTTP {response.status}")
                return parse_metrics(await response.text())
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise PhaseError(f"{url}: {exc!r}") from None
        except MetricsParseError as exc:
            raise PhaseError(f"{url}: {exc}") from None


def metrics_url(endpoint: Endpoint) -> str:
    """Where an endpoint serves Prometheus metrics."""
    return endpoint.url.rstrip("/") + "/metrics"


async def scrape_all(source: MetricsSource, endpoints: Sequence[Endpoint]) -> list[MetricSet]:
    """One snapshot per endpoint, in endpoint order."""
    return [await source.scrape(metrics_url(e)) for e in endpoints]


async def settle(source: MetricsSource, endpoints: Sequence[Endpoint], engine: str,
                 interval: float = 0.5, quiet_polls: int = 3, timeout: float = 120.0) -> float:
    """Wait until the storage-write counters stop moving; returns the seconds waited."""
    start = time.monotonic()
    last, quiet, zero = None, 0, parse_metrics("")
    while quiet < quiet_polls and time.monotonic() - start < timeout:
        snaps = await scrape_all(source, endpoints)
        # Totals since the engine started (a delta from nothing), not a delta of a snapshot.
        written = [attribute(engine, zero, s).storage_write_bytes for s in snaps]
        quiet = quiet + 1 if written == last else 0
        last = written
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
            url = endpoint.url.rstrip("/") + "/reset_prefix_cache"
            try:
                async with session.post(url, timeout=aiohttp.ClientTimeout(total=60)) as r:
                    if r.status >= 300:
                        raise PhaseError(f"{url}: HTTP {r.status}")
            except aiohttp.ClientError as exc:
                raise PhaseError(f"{url}: {exc!r}") from None
    return "POST /reset_prefix_cache on every endpoint"


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
    # Engines driven by slot files (llama.cpp): the server process's own storage reads in the
    # probe (/proc/PID/io read_bytes), how the page cache was dropped, bytes each restore read.
    process_read_bytes: int | None = None
    page_cache: str = ""
    probe_read_bytes: dict[str, int] = {}

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
                            evict_hook: Callable[[], None] | None = None) -> ColdRecovery:
    """Warm up, seed every context, let writes settle, evict, then probe at the concurrency.

    ``evict_hook`` replaces the eviction request, e.g. restarting an arm whose tier persists.
    """
    source = source or HttpMetrics()
    first = await scrape_all(source, endpoints)
    engine = detect_engine(first[0]) if engine == "auto" else engine
    if engine is None:
        raise PhaseError(f"cannot tell the engine from {metrics_url(endpoints[0])}; "
                         "name it with --engine")
    await run_phase(plan.phase(WARMUP), endpoints, settings, on_record)
    seed = await run_phase(plan.phase(SEED), endpoints, settings, on_record)
    waited = await settle(source, endpoints, engine)
    if evict_hook is not None:
        await asyncio.to_thread(evict_hook)
        done = "restarted the engine (its storage tier persists)"
    else:
        done = await evict(endpoints, eviction, plan, settings)
    before, disk_before = await scrape_all(source, endpoints), disks and disks.read()
    probe = await run_phase(plan.phase(PROBE), endpoints, settings, on_record)
    after, disk_after = await scrape_all(source, endpoints), disks and disks.read()
    return ColdRecovery(
        engine=engine, seed=seed, probe=probe, eviction=done, settle_seconds=waited,
        attribution=[attribute(engine, b, a) for b, a in zip(before, after, strict=True)],
        expected_kv_tokens=plan.total_expected_kv_tokens,
        device_read_bytes=device_read_bytes(disk_before, disk_after, list(devices))
        if disks and devices else None)
