"""The reference engine simulator's HTTP face: OpenAI-compatible, vLLM-style metrics, faults.

Endpoints: POST /v1/completions, /v1/chat/completions; GET /v1/models, /metrics, /health;
POST /reset_prefix_cache (GPU cache only); GET/POST /sim/faults (a FaultConfig); GET /sim/info.
Every response carries ``X-KVGate-Simulator: 1`` and the model is ``kvgate-sim-<profile>``.

Wire format beyond OpenAI's: each content chunk has ``choices[0].token_ids: [id]``,
``sim_due_ns`` (when the engine model says the token is ready) and ``sim_sent_ns``
(perf_counter_ns just before the write); role, usage and plain responses carry
``sim_sent_ns`` too. Chat streams open with vLLM's ``delta: {role: assistant, content: ""}``.
Outputs never stop at an EOS: every request yields exactly max_tokens tokens (default 16;
``ignore_eos`` is always effectively true). Any ``model`` name is accepted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ._sim_model import (
    PROFILES,
    FaultConfig,
    LruCache,
    Profile,
    chat_ids,
    chunk_hashes,
    clean_digest,
    decode_seconds,
    fault_hits,
    get_profile,
    kv_digest,
    output_ids,
    plan_prefill,
    prefill_seconds,
    root_hash,
    text_ids,
    token_text,
)
from ._sim_tier import KvTier

__all__ = ["ENGINE", "PROFILES", "SIM_HEADER", "Clock", "Engine", "FaultConfig", "Profile",
           "RealClock", "build_app", "get_profile", "serve"]

SIM_HEADER = "X-KVGate-Simulator"
NOTE = "kvgate reference engine simulator: simulated engine, not valid for procurement"


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
    storage_read_tokens: int = 0
    recomputed_tokens: int = 0


@dataclass
class Prefilled:
    """A prompt after prefill: where its KV came from and the digests of the KV used."""

    gpu_tokens: int
    storage_tokens: int
    recompute_tokens: int
    digests: list[bytes] = field(default_factory=list)


class Engine:
    """The simulated engine: GPU cache, tier, one compute resource, a decode batch, faults.

    Simplification: one request's prefill does not slow the others' decode steps.
    """

    def __init__(self, profile: Profile, tier: KvTier | None, faults: FaultConfig,
                 clock: Clock):
        self.profile, self.tier, self.clock = profile, tier, clock
        self.gpu = LruCache(profile.gpu_cache_chunks)
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
        """GPU hits are free, tier chunks are really read, the rest is computed and stored."""
        p, tier = self.profile, self.tier
        hashes = chunk_hashes(ids, p.chunk_tokens, self.root)
        plan = plan_prefill(len(ids), hashes, p.chunk_tokens, self.gpu.__contains__,
                            (lambda h: h in tier) if tier is not None else (lambda h: False))
        # Take the GPU digests now: another request may evict these chunks meanwhile.
        digests = [self.gpu.get(h) or b"" for h in hashes[:plan.gpu_chunks]]
        self.counters.prompt_tokens += len(ids)
        self.counters.gpu_hit_tokens += plan.gpu_tokens
        stored = hashes[plan.gpu_chunks:plan.gpu_chunks + plan.storage_chunks]
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
        loop = asyncio.get_running_loop()
        async with self.compute:
            # At least one token runs through the model, even on a full hit: it yields the
            # first output token (vLLM recomputes the last prompt token for the same reason).
            busy = prefill_seconds(p, max(plan.recompute_tokens, 1))
            due = self.clock.now_ns() + int(busy * 1e9)
            # Materialise the new chunks' KV while the compute resource is busy with them.
            digests += await asyncio.gather(*[loop.run_in_executor(None, clean_digest, h, p)
                                              for h in fresh])
            await self.clock.sleep_until(due)
        self.counters.recomputed_tokens += plan.recompute_tokens
        if tier is not None:
            for h in fresh:
                # The writer makes the bytes again rather than this request holding them all:
                # a 100K-token prompt's KV is ~200 MB even scaled down.
                tier.write_later(h)
        for h, d in zip(hashes, digests, strict=True):
            self.gpu.put(h, d)
        return Prefilled(plan.gpu_tokens, plan.storage_tokens, plan.recompute_tokens, digests)

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


ENGINE = web.AppKey("engine", Engine)
RECEIVED = web.RequestKey("sim_recv_ns", int)


class _StreamOptions(BaseModel):
    include_usage: bool = False


class _Common(BaseModel):
    model_config = ConfigDict(extra="allow")  # temperature, seed...: accepted, ignored

    model: str | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    stream: bool = False
    stream_options: _StreamOptions | None = None
    ignore_eos: bool = True  # always effectively true: the simulator has no EOS
    n: int = Field(default=1, ge=1, le=1)


class _CompletionRequest(_Common):
    prompt: str | list[int]


class _Message(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict] | None = None


class _ChatRequest(_Common):
    messages: list[_Message] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)


def _error(status: int, message: str, kind: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": kind, "code": status}},
                             status=status)


def _content(m: _Message) -> str:
    if isinstance(m.content, list):  # [{"type": "text", "text": ...}, ...]
        return "".join(str(part.get("text", "")) for part in m.content)
    return m.content or ""


def _parse(body: dict, chat: bool) -> tuple[list[int], int, _Common]:
    """Token ids, max_tokens and the parsed request; ValueError for a bad request."""
    if chat:
        req = _ChatRequest.model_validate(body)
        ids = chat_ids((m.role, _content(m)) for m in req.messages)
        max_tokens = req.max_completion_tokens or req.max_tokens or 16
    else:
        req = _CompletionRequest.model_validate(body)
        ids = text_ids(req.prompt) if isinstance(req.prompt, str) else req.prompt
        max_tokens = req.max_tokens or 16
    if not ids:
        raise ValueError("the prompt is empty")
    if any(not 0 <= t < 2**32 for t in ids):
        raise ValueError("token ids must be integers in [0, 2**32)")
    return ids, max_tokens, req


async def _generate(request: web.Request, chat: bool) -> web.StreamResponse:
    request[RECEIVED] = time.perf_counter_ns()  # server-side TTFT starts here
    engine = request.app[ENGINE]
    engine.request_no += 1
    n, faults, p = engine.request_no, engine.faults, engine.profile
    if fault_hits(n, faults.error_every, faults.error_fraction):
        return _error(500, f"injected fault: HTTP 500 on request {n}", "sim_fault")
    try:
        ids, max_tokens, req = _parse(await request.json(), chat)
    except (ValueError, ValidationError) as exc:  # JSONDecodeError is a ValueError
        return _error(400, str(exc), "BadRequestError")
    if len(ids) + max_tokens > p.max_model_len:
        return _error(400, f"prompt ({len(ids)}) + max_tokens ({max_tokens}) exceeds "
                           f"max_model_len {p.max_model_len}", "BadRequestError")
    engine.running += 1
    try:
        pre = await engine.prefill(ids)
        tail = ids[len(pre.digests) * p.chunk_tokens:]
        out = output_ids(pre.digests, tail, max_tokens, p.vocab_size)
        return await _respond(request, engine, n, req, chat, len(ids), pre, out)
    finally:
        engine.running -= 1


def _abort(request: web.Request) -> None:
    if request.transport is not None:  # None: the client has already gone
        request.transport.abort()


def _usage(prompt_tokens: int, completion_tokens: int, pre: Prefilled) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": pre.gpu_tokens + pre.storage_tokens}}


async def _respond(request: web.Request, engine: Engine, n: int, req: _Common, chat: bool,
                   prompt_tokens: int, pre: Prefilled, out: list[int]) -> web.StreamResponse:
    f = engine.faults
    stall_at = f.stall_after_tokens if fault_hits(n, f.stall_every) else None
    drop_at = min(f.drop_after_tokens, len(out)) if fault_hits(n, f.drop_every) else None
    base = {"id": f"{'chatcmpl' if chat else 'cmpl'}-sim-{n}",
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()), "model": engine.profile.model_id,
            "sim_recv_ns": request[RECEIVED]}
    if not req.stream:
        async with contextlib.aclosing(engine.paced(len(out), stall_at, f.stall_s)) as ticks:
            async for _ in ticks:
                engine.counters.generation_tokens += 1
        if drop_at is not None:
            _abort(request)  # no response at all
            return web.Response()
        text = "".join(token_text(t) for t in out)
        choice = ({"index": 0, "message": {"role": "assistant", "content": text}} if chat
                  else {"index": 0, "text": text, "logprobs": None})
        choice |= {"token_ids": out, "finish_reason": "length"}
        body = base | {"object": "chat.completion" if chat else "text_completion",
                       "choices": [choice], "usage": _usage(prompt_tokens, len(out), pre)}
        return web.json_response(body | {"sim_sent_ns": time.perf_counter_ns()})
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                       "Cache-Control": "no-cache"})
    await resp.prepare(request)

    async def send(event: dict | str) -> None:
        if isinstance(event, dict):  # stamped just before the write, for timing fidelity
            event = json.dumps(event | {"sim_sent_ns": time.perf_counter_ns()})
        await resp.write(f"data: {event}\n\n".encode())

    try:
        if chat:  # vLLM's role-only first chunk: no content yet
            await send(base | {"choices": [{"index": 0, "delta": {"role": "assistant",
                                                                  "content": ""},
                                            "logprobs": None, "finish_reason": None}]})
        async with contextlib.aclosing(engine.paced(len(out), stall_at, f.stall_s)) as ticks:
            async for i, due in ticks:
                if i == drop_at:
                    break
                text = token_text(out[i])
                choice = {"index": 0, "delta": {"content": text}} if chat else {
                    "index": 0, "text": text}
                choice |= {"token_ids": [out[i]], "logprobs": None,
                           "finish_reason": "length" if i == len(out) - 1 else None}
                await send(base | {"choices": [choice], "sim_due_ns": due})
                engine.counters.generation_tokens += 1
        if drop_at is not None:
            _abort(request)  # mid-stream, without [DONE]
            return resp
        if req.stream_options and req.stream_options.include_usage:
            await send(base | {"choices": [], "usage": _usage(prompt_tokens, len(out), pre)})
        await send("[DONE]")
    except ConnectionError:  # the client went away; nothing to tell it
        pass
    return resp


async def completions(request: web.Request) -> web.StreamResponse:
    """POST /v1/completions: prompt as a string or a list of token ids."""
    return await _generate(request, chat=False)


async def chat_completions(request: web.Request) -> web.StreamResponse:
    """POST /v1/chat/completions: messages in a fixed template, mapped to byte token ids."""
    return await _generate(request, chat=True)


# (name, type, help, value source): the attribution adapter matches these names exactly.
_METRICS: list[tuple[str, str, str, Callable[[Engine], int]]] = [
    ("kvgate_sim_storage_read_bytes_total", "counter", "KV bytes read from the storage tier.",
     lambda e: e.tier.stats["read_bytes"] if e.tier else 0),
    ("kvgate_sim_storage_read_tokens_total", "counter",
     "Prompt tokens whose KV was read from the storage tier.",
     lambda e: e.counters.storage_read_tokens),
    ("kvgate_sim_gpu_hit_tokens_total", "counter",
     "Prompt tokens whose KV was in the GPU prefix cache.", lambda e: e.counters.gpu_hit_tokens),
    ("kvgate_sim_recomputed_tokens_total", "counter",
     "Prompt tokens prefilled on the compute resource.", lambda e: e.counters.recomputed_tokens),
    ("kvgate_sim_storage_write_bytes_total", "counter", "KV bytes written to the storage tier.",
     lambda e: e.tier.stats["write_bytes"] if e.tier else 0),
    ("kvgate_sim_prompt_tokens_total", "counter", "Prompt tokens received.",
     lambda e: e.counters.prompt_tokens),
    ("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
     lambda e: e.counters.prompt_tokens),
    ("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
     lambda e: e.counters.generation_tokens),
    ("vllm:prefix_cache_hits_total", "counter",
     "Prefix cache hits, in terms of number of cached tokens (GPU cache only).",
     lambda e: e.counters.gpu_hit_tokens),
    ("vllm:prefix_cache_queries_total", "counter",
     "Prefix cache queries, in terms of number of queried tokens.",
     lambda e: e.counters.prompt_tokens),
    ("vllm:num_requests_running", "gauge", "Number of requests in prefill or decode.",
     lambda e: e.running),
]


def render_metrics(model_id: str, values: list[tuple[str, str, str, int]]) -> str:
    """Prometheus text exposition (0.0.4) of (name, type, help, value) rows."""
    lines = []
    for name, kind, help_text, value in values:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}",
                  f'{name}{{model_name="{model_id}"}} {value}']
    return "\n".join(lines) + "\n"


async def metrics(request: web.Request) -> web.Response:
    """GET /metrics: the counters above, Prometheus text format."""
    e = request.app[ENGINE]
    text = render_metrics(e.profile.model_id, [(n, k, h, get(e)) for n, k, h, get in _METRICS])
    return web.Response(body=text.encode(),
                        headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})


async def health(request: web.Request) -> web.Response:
    """GET /health: 200 once the server is up."""
    return web.Response()


async def models(request: web.Request) -> web.Response:
    """GET /v1/models: the one simulated model, marked as a simulator."""
    p = request.app[ENGINE].profile
    return web.json_response({"object": "list", "data": [{
        "id": p.model_id, "object": "model", "created": int(time.time()),
        "owned_by": "kvgate-simulator", "root": p.model_id, "max_model_len": p.max_model_len,
        "kvgate_simulator": True, "note": NOTE}]})


async def reset_prefix_cache(request: web.Request) -> web.Response:
    """POST /reset_prefix_cache: empty the GPU cache; the storage tier keeps its chunks."""
    request.app[ENGINE].gpu.clear()
    return web.Response()


async def get_faults(request: web.Request) -> web.Response:
    """GET /sim/faults: the faults in force."""
    return web.json_response(request.app[ENGINE].faults.model_dump())


async def set_faults(request: web.Request) -> web.Response:
    """POST /sim/faults: replace the faults (a FaultConfig as JSON); restarts request counts."""
    try:
        faults = FaultConfig.model_validate(await request.json())
    except (ValueError, ValidationError) as exc:
        return _error(400, str(exc), "BadRequestError")
    request.app[ENGINE].set_faults(faults)
    return web.json_response(faults.model_dump())


def info(engine: Engine) -> dict:
    """What the simulator is running with: profile, tier, I/O mode, faults."""
    tier = engine.tier
    return {"simulator": True, "note": NOTE, "model": engine.profile.model_id,
            "profile": engine.profile.model_dump(), "faults": engine.faults.model_dump(),
            "gpu_cache_chunks": len(engine.gpu),
            "tier": None if tier is None else {
                "dir": str(tier.root), "chunks": len(tier), "direct_io": tier.direct_io,
                "io_note": tier.io_note, "readers": tier.readers,
                "pending_writes": tier.pending_writes, "skipped_files": tier.skipped_files,
                "last_write_error": tier.last_write_error,
                "last_read_error": tier.last_read_error, **tier.stats}}


async def get_info(request: web.Request) -> web.Response:
    """GET /sim/info: see info()."""
    return web.json_response(info(request.app[ENGINE]))


async def _mark(request: web.Request, response: web.StreamResponse) -> None:
    response.headers[SIM_HEADER] = "1"


def build_app(profile: str | Profile, kv_dir: Path | None = None,
              faults: FaultConfig | None = None, *, readers: int | None = None,
              direct_io: bool | None = None, clock: Clock | None = None) -> web.Application:
    """The simulator as an aiohttp app; kv_dir None means no storage tier (recompute arm)."""
    p = get_profile(profile) if isinstance(profile, str) else profile
    faults = faults or FaultConfig()
    tier = None if kv_dir is None else KvTier(Path(kv_dir), p, readers=readers,
                                              direct_io=direct_io)
    app = web.Application(client_max_size=64 * 1024**2)  # 262K-token prompts as JSON: ~2 MB
    app[ENGINE] = Engine(p, tier, faults, clock or RealClock())
    app.on_response_prepare.append(_mark)
    if tier is not None:
        app.on_cleanup.append(lambda _app: asyncio.to_thread(tier.close))
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/health", health)
    app.router.add_post("/reset_prefix_cache", reset_prefix_cache)
    app.router.add_get("/sim/faults", get_faults)
    app.router.add_post("/sim/faults", set_faults)
    app.router.add_get("/sim/info", get_info)
    return app


def serve(profile: str, kv_dir: Path | None, host: str = "127.0.0.1", port: int = 8000,
          faults: FaultConfig | None = None, *, readers: int | None = None,
          direct_io: bool | None = None, print_fn: Callable[[str], None] = print) -> None:
    """Run the simulator until interrupted (the `kvgate sim serve` command)."""
    app = build_app(profile, kv_dir, faults, readers=readers, direct_io=direct_io)
    about = info(app[ENGINE])
    tier = about["tier"]
    print_fn(f"{NOTE}\nmodel {about['model']}; "
             + ("no storage tier (recompute arm)" if tier is None else
                f"KV tier {tier['dir']} ({tier['chunks']} chunks, "
                f"{'O_DIRECT' if tier['direct_io'] else tier['io_note']}, "
                f"{tier['readers']} readers)"))
    web.run_app(app, host=host, port=port, access_log=None, print=print_fn)
