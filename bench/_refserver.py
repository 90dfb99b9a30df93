"""A reference server with known timing for bench/vs_aiperf.py: the truth comes from its stamps.

Run as a subprocess (pinned to one CPU like _simproc.py). ``POST /v1/completions`` streams
exactly ``--tokens`` tokens whatever ``max_tokens`` says (requests asking for another count are
counted in ``mismatched``): the first at receive + ``--ttft-ms``, then one per ``--itl-ms``,
each deadline absolute from the receive stamp so lateness does not accumulate. The last token,
the usage chunk and ``[DONE]`` go in one write, so "last content event" means the same thing to
every client. It stamps ``time.perf_counter_ns()`` (CLOCK_MONOTONIC: one clock for the whole
machine) when the request reaches the handler and just before each token's write, keyed by the
``X-Request-ID`` header when the client sends one (aiperf does) and otherwise by BLAKE2b of the
JSON prompt (kvgate sends none), and serves them at ``GET /bench/stamps?clear=1``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import time

from aiohttp import web

STAMPS = web.AppKey("stamps", dict)
CONFIG = web.AppKey("config", dict)


def prompt_key(prompt: object) -> str:
    """The stamp key of a request without X-Request-ID: a hash of its JSON prompt."""
    return hashlib.blake2b(json.dumps(prompt).encode(), digest_size=16).hexdigest()


def _event(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


async def completions(request: web.Request) -> web.StreamResponse:
    """Stream the configured tokens on the configured schedule, stamping each send."""
    received = time.perf_counter_ns()  # before the body is read, as _simproc's middleware
    cfg = request.app[CONFIG]
    body = await request.json()
    key = request.headers.get("X-Request-ID") or prompt_key(body.get("prompt"))
    asked = body.get("max_tokens") or body.get("max_completion_tokens")
    if asked is not None and asked != cfg["tokens"]:
        cfg["mismatched"] += 1
    sent: list[int] = []
    request.app[STAMPS][key] = {"recv": received, "sent": sent}
    base = {"id": "cmpl-ref", "object": "text_completion", "created": int(time.time()),
            "model": cfg["model"]}
    token = _event(base | {"choices": [{"index": 0, "text": " tok", "finish_reason": None}]})
    n = cfg["tokens"]
    tail = _event(base | {"choices": [{"index": 0, "text": " tok", "finish_reason": "length"}]})
    if (body.get("stream_options") or {}).get("include_usage"):
        usage = {"prompt_tokens": len(str(body.get("prompt", "")).split()),
                 "completion_tokens": n, "total_tokens": 0}
        tail += _event(base | {"choices": [], "usage": usage})
    tail += b"data: [DONE]\n\n"
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})
    await response.prepare(request)
    for i in range(n):
        due = received + cfg["ttft_ns"] + i * cfg["itl_ns"]
        delay = (due - time.perf_counter_ns()) / 1e9
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            await asyncio.sleep(0)  # a late token still yields, so streams interleave
        sent.append(time.perf_counter_ns())  # stamped just before the write
        await response.write(tail if i == n - 1 else token)
    await response.write_eof()
    return response


async def models(request: web.Request) -> web.Response:
    """GET /v1/models: the one model."""
    return web.json_response({"object": "list", "data": [
        {"id": request.app[CONFIG]["model"], "object": "model", "owned_by": "kvgate-bench"}]})


async def health(_request: web.Request) -> web.Response:
    """GET /health."""
    return web.json_response({"status": "ok"})


async def stamps(request: web.Request) -> web.Response:
    """GET /bench/stamps: {key: {recv, sent[]}} and the mismatch count; ?clear=1 empties it."""
    out = {"stamps": dict(request.app[STAMPS]), "mismatched": request.app[CONFIG]["mismatched"]}
    if request.query.get("clear"):
        request.app[STAMPS].clear()
        request.app[CONFIG]["mismatched"] = 0
    return web.json_response(out)


def build_app(model: str, tokens: int, ttft_ms: float, itl_ms: float) -> web.Application:
    """The reference server's routes and state."""
    app = web.Application()
    app[STAMPS] = {}
    app[CONFIG] = {"model": model, "tokens": tokens, "ttft_ns": round(ttft_ms * 1e6),
                   "itl_ns": round(itl_ms * 1e6), "mismatched": 0}
    app.router.add_post("/v1/completions", completions)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/health", health)
    app.router.add_get("/bench/stamps", stamps)
    return app


def main() -> None:
    """Serve on 127.0.0.1 until terminated."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", default="kvgate-ref")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--ttft-ms", type=float, default=20.0)
    parser.add_argument("--itl-ms", type=float, default=5.0)
    parser.add_argument("--cpu", type=int, default=None, help="pin this process to one CPU")
    args = parser.parse_args()
    if args.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    app = build_app(args.model, args.tokens, args.ttft_ms, args.itl_ms)
    web.run_app(app, host="127.0.0.1", port=args.port, access_log=None, print=None,
                backlog=1024)


if __name__ == "__main__":
    main()
