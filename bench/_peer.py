"""The raw-socket peer of bench/timing_fidelity.py, and what both of its clients record.

A minimal asyncio-streams HTTP/1.1 client: one keep-alive connection per slot, chunked decoding
by hand, each chunk stamped as soon as it is read; it parses JSON only for the first content
event, or (parse=True) feeds every chunk to kvgate's own ResponseStream, so that what still
separates it from kvgate is the transport alone.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import urllib.request
from dataclasses import dataclass, field

from _common import pct

from gates.loadgen import READ_BUFFER, Endpoint, LoadSettings, LoopLagMonitor, ResponseStream
from gates.loadgen.generator import request_body

LEVEL_TIMEOUT = 60.0  # seconds per client per concurrency level, hard bound


@dataclass
class Run:
    """One client's measured requests at one concurrency."""

    lags: list[float] = field(default_factory=list)  # first-event delivery lag, s
    ttft_errors: list[float] = field(default_factory=list)  # client TTFT - server TTFT, s
    uploads: list[float] = field(default_factory=list)  # server receive - client t0, s
    failed: int = 0
    loop_lag_p99: float | None = None

    def add(self, other: Run) -> Run:
        """This run with another's requests pooled in (the loop-lag p99 is the worse one)."""
        lags = [v for v in (self.loop_lag_p99, other.loop_lag_p99) if v is not None]
        return Run(self.lags + other.lags, self.ttft_errors + other.ttft_errors,
                   self.uploads + other.uploads, self.failed + other.failed,
                   max(lags) if lags else None)


def key(body: bytes) -> str:
    """The receive stamp's key of a request body (bench/_simproc.py)."""
    return hashlib.blake2b(body, digest_size=16).hexdigest()


def recv_stamps(url: str) -> dict[str, int]:
    """The simulator's receive stamps since the last call (and clear them)."""
    with urllib.request.urlopen(url + "/bench/recv?clear=1", timeout=10) as r:
        return json.loads(r.read())


async def _raw_one(reader, writer, head: bytes, body: bytes,
                   parse: bool = False) -> tuple[int, int, int]:
    """One streamed request: (t0, first content arrival, its sim_sent_ns), all perf ns."""
    t0 = time.perf_counter_ns()
    stream = ResponseStream(t0) if parse else None
    writer.write(head + body)
    status = await reader.readuntil(b"\r\n\r\n")
    if not status.startswith(b"HTTP/1.1 200") or b"chunked" not in status.lower():
        raise RuntimeError(f"unexpected response head: {status[:200]!r}")
    pending, first = b"", None
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            break
        data = await reader.readexactly(size + 2)
        now = time.perf_counter_ns()  # stamped on arrival, before any parsing
        if stream is not None:  # kvgate's own work per chunk: SSE, classify, every event
            stream.feed(data[:-2], now - t0)
            if first is None and stream.content_ns and stream.stamp_lag is not None:
                arrived = t0 + stream.content_ns[0]
                first = (arrived, arrived - round(stream.stamp_lag * 1e9))
        elif first is None:
            pending += data[:-2]
            while first is None and (i := pending.find(b"\n\n")) >= 0:
                event, pending = pending[:i], pending[i + 2:]
                if b'"sim_due_ns"' in event:  # only content chunks carry sim_due_ns
                    first = (now, json.loads(event.split(b":", 1)[1])["sim_sent_ns"])
    if first is None:
        raise RuntimeError("no content event")
    return t0, first[0], first[1]


async def peer_run(url: str, model: str, c: int, warm: list, reqs: list,
                   parse: bool = False) -> Run:
    """The raw-socket peer: c workers, each with its own keep-alive connection."""
    host, port = url.removeprefix("http://").split(":")
    settings = LoadSettings()
    endpoint = Endpoint(url=url, model=model)
    bodies = [request_body(endpoint, r, settings) for r in reqs]
    warm_bodies = [request_body(endpoint, r, settings) for r in warm]
    results: list[tuple[int, int, int] | None] = [None] * len(reqs)
    todo = iter(range(len(reqs)))
    run, monitor = Run(), LoopLagMonitor()
    start = asyncio.Event()

    def head(body: bytes) -> bytes:
        return (f"POST /v1/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                ).encode()

    warmed = 0

    def mark_warm() -> None:
        nonlocal warmed
        warmed += 1
        if warmed == c:
            ready.set()

    async def worker(w: int) -> None:
        try:
            reader, writer = await asyncio.open_connection(host, int(port), limit=READ_BUFFER)
        except OSError:
            mark_warm()
            return
        try:
            try:
                if w < len(warm_bodies):
                    await _raw_one(reader, writer, head(warm_bodies[w]), warm_bodies[w])
            finally:
                mark_warm()
            await start.wait()
            for i in todo:
                try:
                    results[i] = await _raw_one(reader, writer, head(bodies[i]), bodies[i],
                                                parse)
                except (RuntimeError, OSError, asyncio.IncompleteReadError, ValueError):
                    return  # this connection is unusable; the others carry on
        except (RuntimeError, OSError, asyncio.IncompleteReadError, ValueError):
            return
        finally:
            writer.close()

    ready = asyncio.Event()
    tasks = [asyncio.create_task(worker(w)) for w in range(c)]
    # Start together once every worker has connected and done its warm-up request.
    await asyncio.wait_for(ready.wait(), LEVEL_TIMEOUT)
    monitor.start()
    start.set()
    try:
        await asyncio.wait_for(asyncio.gather(*tasks), LEVEL_TIMEOUT)
    finally:
        monitor.stop()
    run.loop_lag_p99 = pct(monitor.lags, 99)
    recv = recv_stamps(url)
    for body, got in zip(bodies, results, strict=True):
        server_recv = recv.get(key(body))
        if got is None or server_recv is None:
            run.failed += 1
            continue
        t0, arrived, sent = got
        run.lags.append((arrived - sent) / 1e9)
        run.ttft_errors.append((arrived - t0 - (sent - server_recv)) / 1e9)
        run.uploads.append((server_recv - t0) / 1e9)
    return run
