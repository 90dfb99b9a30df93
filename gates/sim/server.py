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

The engine (clock, prefill, decode pacing) is in _sim_engine; request parsing, response bodies
and SSE framing are in _sim_wire. This module is the aiohttp app, its handlers and /metrics.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from aiohttp import web
from pydantic import ValidationError

from .engine import Clock, Engine, RealClock
from .model import PROFILES, FaultConfig, Profile, fault_hits, get_profile, output_ids
from .tier import KvTier
from .timers import fine_loop
from .wire import RECEIVED, error_response, parse_request, respond

__all__ = ["ENGINE", "PROFILES", "SIM_HEADER", "Clock", "Engine", "FaultConfig", "Profile",
           "RealClock", "build_app", "get_profile", "serve"]

SIM_HEADER = "X-KVGate-Simulator"
NOTE = "kvgate reference engine simulator: simulated engine, not valid for procurement"

ENGINE = web.AppKey("engine", Engine)


async def _generate(request: web.Request, chat: bool) -> web.StreamResponse:
    request[RECEIVED] = time.perf_counter_ns()  # server-side TTFT starts here
    engine = request.app[ENGINE]
    engine.request_no += 1
    n, faults, p = engine.request_no, engine.faults, engine.profile
    if fault_hits(n, faults.error_every, faults.error_fraction):
        return error_response(500, f"injected fault: HTTP 500 on request {n}", "sim_fault")
    try:
        ids, max_tokens, req = parse_request(await request.json(), chat)
    except (ValueError, ValidationError) as exc:  # JSONDecodeError is a ValueError
        return error_response(400, str(exc), "BadRequestError")
    if len(ids) + max_tokens > p.max_model_len:
        return error_response(400, f"prompt ({len(ids)}) + max_tokens ({max_tokens}) exceeds "
                                   f"max_model_len {p.max_model_len}", "BadRequestError")
    engine.running += 1
    try:
        pre = await engine.prefill(ids)
        tail = ids[len(pre.digests) * p.chunk_tokens:]
        out = output_ids(pre.digests, tail, max_tokens, p.vocab_size)
        return await respond(request, engine, n, req, chat, len(ids), pre, out)
    finally:
        engine.running -= 1


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
    ("kvgate_sim_cpu_hit_tokens_total", "counter",
     "Prompt tokens whose KV was in the CPU (DRAM) tier.", lambda e: e.counters.cpu_hit_tokens),
    ("kvgate_sim_recomputed_tokens_total", "counter",
     "Prompt tokens prefilled on the compute resource.", lambda e: e.counters.recomputed_tokens),
    ("kvgate_sim_storage_write_bytes_total", "counter", "KV bytes written to the storage tier.",
     lambda e: e.tier.stats["write_bytes"] if e.tier else 0),
    # kvgate's settle (gates.inference.phases.SIM_PENDING) waits for this to be 0.
    ("kvgate_sim_pending_writes", "gauge", "KV chunk writes queued or in progress.",
     lambda e: e.tier.pending_writes if e.tier else 0),
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
        return error_response(400, str(exc), "BadRequestError")
    request.app[ENGINE].set_faults(faults)
    return web.json_response(faults.model_dump())


def info(engine: Engine) -> dict:
    """What the simulator is running with: profile, tier, I/O mode, faults."""
    tier = engine.tier
    return {"simulator": True, "note": NOTE, "model": engine.profile.model_id,
            "profile": engine.profile.model_dump(), "faults": engine.faults.model_dump(),
            "gpu_cache_chunks": len(engine.gpu), "cpu_tier_chunks": len(engine.cpu),
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


def serve(profile: str | Profile, kv_dir: Path | None, host: str = "127.0.0.1", port: int = 8000,
          faults: FaultConfig | None = None, *, readers: int | None = None,
          direct_io: bool | None = None, print_fn: Callable[[str], None] = print) -> None:
    """Run the simulator until interrupted (`python -m gates.sim`, `kvgate sim serve`)."""
    app = build_app(profile, kv_dir, faults, readers=readers, direct_io=direct_io)
    about = info(app[ENGINE])
    tier = about["tier"]
    # The arm's log is evidence: it says how fast this engine was made to prefill.
    chunk = about["profile"]["chunk_tokens"] * about["profile"]["kv_bytes_per_token"]
    print_fn(f"{NOTE}\nmodel {about['model']} (prefill "
             f"{about['profile']['prefill_tokens_per_s']:g} tokens/s; GPU cache "
             f"{about['profile']['gpu_cache_chunks'] * chunk:,} B, CPU tier "
             f"{about['profile']['cpu_tier_chunks'] * chunk:,} B); "
             + ("no storage tier (recompute arm)" if tier is None else
                f"KV tier {tier['dir']} ({tier['chunks']} chunks, "
                f"{'O_DIRECT' if tier['direct_io'] else tier['io_note']}, "
                f"{tier['readers']} readers)"))
    web.run_app(app, host=host, port=port, access_log=None, print=print_fn, loop=fine_loop())
