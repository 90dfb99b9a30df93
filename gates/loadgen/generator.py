"""The load generator: streaming OpenAI-compatible requests over one keep-alive pool (DESIGN §5).

Every request sent ends as exactly one RequestRecord, whatever the server does.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import time
from collections.abc import Callable, Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, Field, SecretStr

from ..core.statistics import percentile
from ..core.verdicts import RequestOutcome, RequestRecord
from .collector import heap_set_aside
from .cpu import cpu_snapshot, cpu_use
from .http1 import CannotConnect, ConnectTimeout, HttpError, StallTimeout, authority
from .logprobs import detail_keys
from .pool import Attempt, Pool
from .selfcheck import LoopLagMonitor, SelfCheck, judge_self_check
from .sse import SSEProtocolError
from .stream import ResponseStream

# For aiohttp and asyncio-stream readers elsewhere (the benchmarks' peers, llama.cpp's slot
# actions): a 100K-token response must not throttle on a small buffer. The load generator's own
# connections read what the loop delivers.
READ_BUFFER = 4 * 1024 * 1024


class Endpoint(BaseModel):
    """One serving instance; an arm may have several (e.g. TP4 x 2)."""

    url: str  # base URL, e.g. http://127.0.0.1:8000
    model: str = ""
    api: Literal["completions", "chat"] = "completions"
    api_key: SecretStr | None = None  # SecretStr: never printed in logs or reports

    def post_url(self) -> str:
        """The URL requests are POSTed to."""
        path = "/v1/chat/completions" if self.api == "chat" else "/v1/completions"
        return self.url.rstrip("/") + path


class LoadSettings(BaseModel):
    """How requests are released: closed loop, open loop at a rate, or a timed trace."""

    mode: Literal["concurrency", "rate", "trace"] = "concurrency"
    concurrency: int = Field(default=1, ge=1)
    rate: float = Field(default=1.0, gt=0)  # requests per second, open loop
    arrival: Literal["poisson", "constant"] = "poisson"
    seed: int = 0
    stall_timeout: float = Field(default=60.0, gt=0)  # no bytes for this long = timeout
    request_timeout: float | None = None  # whole request, None = unbounded
    ignore_eos: bool = True
    # For G3's correctness: the output's token ids and each token's logprob with its top
    # TOP_K by token id (gates.loadgen.logprobs says what each engine sends back).
    output_detail: bool = False


class PlannedLike(Protocol):
    """What the generator needs of a planned request (see gates.loadgen.workloads)."""

    request_id: str
    prompt: list[int] | str
    max_tokens: int
    phase: str


class LoadResult(BaseModel):
    """The records of one phase, its wall duration and the generator's own health."""

    records: list[RequestRecord]
    wall: float
    self_check: SelfCheck
    # perf_counter_ns of the phase's start: each record's t0 counts from it, so a reader can
    # set the records against clocks of its own (bench/timing_fidelity.py, the server's stamps).
    origin_ns: int = 0


def payload(endpoint: Endpoint, request: PlannedLike, settings: LoadSettings) -> dict:
    """The JSON body: token-id prompts on /v1/completions, messages on chat."""
    body: dict = {"model": endpoint.model, "max_tokens": request.max_tokens, "stream": True,
                  "stream_options": {"include_usage": True}, "temperature": 0.0,
                  "ignore_eos": settings.ignore_eos}
    if endpoint.api == "chat":
        text = request.prompt if isinstance(request.prompt, str) else " ".join(
            map(str, request.prompt))
        body["messages"] = [{"role": "user", "content": text}]
    else:
        body["prompt"] = request.prompt
    if settings.output_detail:
        body |= detail_keys(endpoint.api)
    return body



def request_body(endpoint: Endpoint, request: PlannedLike, settings: LoadSettings) -> bytes:
    """The request's JSON body as sent."""
    return json.dumps(payload(endpoint, request, settings)).encode()


def _input_length(request: PlannedLike) -> int:
    return len(request.prompt) if isinstance(request.prompt, list) else 0


def _first(value: int | None, fallback: int) -> int:
    return fallback if value is None else value


def request_record(request: PlannedLike, endpoint: Endpoint, t0: float, queue: float,
                   stream: ResponseStream | None, outcome: RequestOutcome,
                   status: int | None = None, error: str = "",
                   reconnects: int = 0) -> RequestRecord:
    """One request's record from its stream: TTFT, token times, usage, outcome."""
    times = [ns / 1e9 for ns in stream.content_ns] if stream else []
    usage = stream.usage if stream else None
    return RequestRecord(
        request_id=request.request_id, phase=request.phase, warmup=request.phase == "warmup",
        endpoint=endpoint.url, t0=t0, queue_time=queue, content_times=times,
        ttft=times[0] if times else None, e2e=times[-1] if times else None,
        input_tokens=_first(usage and usage.prompt_tokens, _input_length(request)),
        output_tokens=_first(usage and usage.completion_tokens, len(times)),
        tokens_from_usage=usage is not None and usage.completion_tokens is not None,
        cached_tokens=usage.cached_tokens if usage else None,
        output_ids=stream.ids if stream else [],
        output_logprobs=stream.logprobs if stream else [],
        output_top_logprobs=[list(t) for t in stream.top_logprobs] if stream else [],
        outcome=outcome, status=status,
        error=error, reconnects=reconnects,
        stamp_lag=stream.stamp_lag if stream else None)


def _where(endpoint: Endpoint) -> str:
    """host:port and path of the POST, the prefix of every error a request can end with."""
    _, host, port, path = authority(endpoint.post_url())
    return f"POST {host}:{port}{path}"


def _timed_out(exc: TimeoutError, settings: LoadSettings) -> str:
    stall = f"stall_timeout {settings.stall_timeout:g} s"
    if isinstance(exc, ConnectTimeout):
        return f"timeout: could not connect in time ({stall})"
    if isinstance(exc, StallTimeout):
        return f"timeout: no data for {settings.stall_timeout:g} s (stall_timeout)"
    if settings.request_timeout is not None:  # asyncio.timeout's own: a plain TimeoutError
        return f"timeout: not finished within {settings.request_timeout:g} s (request_timeout)"
    return f"timeout ({stall}, no request_timeout)"


async def send(pool: Pool, endpoint: Endpoint, request: PlannedLike, settings: LoadSettings,
               origin_ns: int, queue: float = 0.0, body: bytes | None = None, *,
               t0_ns: int | None = None,
               stream_type: type[ResponseStream] = ResponseStream) -> RequestRecord:
    """Send one streaming request; every way it can end becomes one outcome with its reason.

    A cancellation is not an ending of the request but of its caller, and goes on up: kvgate
    never cancels a request itself, so it is a Ctrl-C, and asyncio.run raises KeyboardInterrupt
    only when its task ends cancelled. Recorded as an outcome it was swallowed, and a phase that
    sends one request at a time went on with the next.

    A request whose kept-alive connection the server had closed goes again on a new one
    (gates.loadgen.pool). ``body`` is the request's JSON, serialised beforehand (run_phase
    does so before the phase); None = here. ``t0_ns``: when TTFT starts, if not when the
    request's bytes reach the socket (llama.cpp's slot runner starts it at the slot restore);
    ``stream_type``: a ResponseStream that reads more of each chunk (the slot's token ids).
    """
    headers = {"Authorization": f"Bearer {endpoint.api_key.get_secret_value()}"} \
        if endpoint.api_key else {}
    headers["Content-Type"] = "application/json"
    if body is None:  # before t0 at least: a 100K-token prompt takes milliseconds to encode
        body = request_body(endpoint, request, settings)
    # t0 is when the request's bytes are handed to the socket (the Pool stamps it), so the
    # client's own work of connecting and framing is not counted as the server's. A resend
    # keeps the first try's t0: the reconnect is delay the client saw, as any client of a
    # server that drops kept-alive connections would, so it stays in the TTFT (the
    # conservative side); the record's `reconnects` sets such requests apart.
    stream, attempt = stream_type(t0_ns or time.perf_counter_ns()), Attempt()

    def arrived(data: bytes, arrived_ns: int) -> None:  # in the loop's read callback
        stream.t0_ns = t0_ns or attempt.written_ns
        stream.feed(data, arrived_ns - stream.t0_ns)

    def done(outcome: RequestOutcome, status: int | None = None,
             error: str = "") -> RequestRecord:
        t0 = ((t0_ns or attempt.written_ns or stream.t0_ns) - origin_ns) / 1e9
        return request_record(request, endpoint, t0, queue, stream, outcome, status,
                              f"{_where(endpoint)}: {error}" if error else "",
                              attempt.reconnects)

    try:
        async with asyncio.timeout(settings.request_timeout):  # None: unbounded
            # A server that accepts and never answers, or a host that drops SYNs, is a stall.
            exchange = await pool.post(endpoint.post_url(), body, headers, arrived,
                                       attempt=attempt, stall_timeout=settings.stall_timeout)
        status = exchange.parser.status
        if status != 200:
            text = exchange.error_text.decode(errors="replace")[:500]
            return done(RequestOutcome.HTTP_ERROR, status=status,
                        error=f"HTTP {status}: {' '.join(text.split())}")
        stream.decoder.close()
        if not stream.done:
            lost = f" (dropped: {stream.decoder.dropped})" if stream.decoder.dropped else ""
            return done(RequestOutcome.PROTOCOL_ERROR, status=200,
                        error=f"stream ended without [DONE]{lost}")
        if _nothing_generated(stream, request, settings):
            return done(RequestOutcome.PROTOCOL_ERROR, status=200,
                        error=f"stream ended without any content or token, though ignore_eos "
                              f"asked for {request.max_tokens}: no TTFT to time")
        return done(RequestOutcome.OK, status=200)
    except SSEProtocolError as exc:
        return done(RequestOutcome.PROTOCOL_ERROR, status=200, error=str(exc))
    except TimeoutError as exc:
        return done(RequestOutcome.TIMEOUT, error=_timed_out(exc, settings))
    except CannotConnect as exc:
        return done(RequestOutcome.HTTP_ERROR, error=f"cannot connect: {exc.reason}")
    except HttpError as exc:
        return done(RequestOutcome.PROTOCOL_ERROR, error=f"stream broken: {exc!r}")


def _nothing_generated(stream: ResponseStream, request: PlannedLike,
                       settings: LoadSettings) -> bool:
    """Tokens were due and the server says none came: as OK the request had no TTFT and
    every statistic passed over it, as if it had not been sent. Tokens whose text is empty (a
    byte of an unfinished UTF-8 character, one token asked for) are the model's, not a fault:
    the usage that counts them keeps such a request OK (LoadSummary.ok_without_content)."""
    generated = stream.usage.completion_tokens if stream.usage else None
    return (not stream.content_ns and settings.ignore_eos and request.max_tokens > 0
            and not generated)


def release_times(count: int, settings: LoadSettings, trace_at: Sequence[float | None]) -> list:
    """Offsets (s) at which open-loop or trace requests are released; None = closed loop."""
    if settings.mode == "concurrency":
        return [None] * count
    if settings.mode == "trace":
        return [at or 0.0 for at in trace_at]
    rng = random.Random(settings.seed)
    gaps = (rng.expovariate(settings.rate) if settings.arrival == "poisson"
            else 1.0 / settings.rate for _ in range(count))
    return list(itertools.accumulate(gaps, initial=0.0))[:count]


async def run_phase(requests: Sequence[PlannedLike], endpoints: Sequence[Endpoint],
                    settings: LoadSettings,
                    on_record: Callable[[RequestRecord], None] | None = None) -> LoadResult:
    """Send requests (round-robin over endpoints) and return one record per request."""
    monitor = LoopLagMonitor()
    schedule = release_times(len(requests), settings, [getattr(r, "at", None) for r in requests])
    lags: list[float] = []
    slots = asyncio.Semaphore(settings.concurrency if settings.mode == "concurrency"
                              else len(requests) or 1)
    records: list[RequestRecord] = []

    # Bodies are made before the phase, not on the loop while other streams' events wait: a
    # 100K-token prompt takes milliseconds to encode.
    bodies = [request_body(endpoints[i % len(endpoints)], r, settings)
              for i, r in enumerate(requests)]
    async with heap_set_aside(), Pool() as pool:
        monitor.start()
        cpu_before = cpu_snapshot()  # the host's and kvgate's: who held the event loop up
        origin = time.perf_counter_ns()

        async def one(index: int, request: PlannedLike) -> None:
            if schedule[index] is not None:
                delay = schedule[index] - (time.perf_counter_ns() - origin) / 1e9
                if delay > 0:
                    await asyncio.sleep(delay)
                lags.append((time.perf_counter_ns() - origin) / 1e9 - schedule[index])
            waited = time.perf_counter_ns()
            async with slots:
                queue = (time.perf_counter_ns() - waited) / 1e9
                record = await send(pool, endpoints[index % len(endpoints)], request,
                                    settings, origin, queue, bodies[index])
            records.append(record)
            if on_record:
                on_record(record)

        try:
            await asyncio.gather(*(one(i, r) for i, r in enumerate(requests)))
        finally:
            wall = (time.perf_counter_ns() - origin) / 1e9
            monitor.stop()
            cpu_after = cpu_snapshot()
    ttfts = [r.ttft for r in records if r.counted and r.ttft is not None]
    check = judge_self_check(monitor.lags, lags, percentile(ttfts, 50) if ttfts else None,
                             cpu=cpu_use(cpu_before, cpu_after), cores=cpu_after.cores)
    check.reconnects, check.notes = pool.reconnects, check.notes + pool.notes()
    return LoadResult(records=records, wall=wall, self_check=check, origin_ns=origin)
