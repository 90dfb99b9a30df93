"""The simulator in its own process for the benchmarks: gates' build_app plus a receive stamp.

Run by bench/_common.py as a subprocess (never imported by the load generator's process).
It serves ``gates.sim.server.build_app(profile)`` unchanged, plus one middleware that stamps
``perf_counter_ns()`` when a POST to /v1/... reaches the server (before the body is read),
keyed by BLAKE2b of the request body, and ``GET /bench/recv`` returning those stamps. The
simulator itself has no receive stamp; this is what lets timing_fidelity.py derive the
server-side TTFT (first content event's ``sim_sent_ns`` minus the receive stamp).

``--fast`` swaps the tiny profile's physics for a fast engine (prefill 10M tokens/s, 1 ms per
output token at any batch size) so that the capacity benchmark measures the load generator,
not the simulated engine's speed.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time

from aiohttp import web

from gates.sim.model import get_profile
from gates.sim.server import build_app
from gates.sim.timers import fine_loop

RECV = web.AppKey("bench_recv", dict)


@web.middleware
async def stamp_receive(request: web.Request, handler):
    """Stamp the arrival of a generation request, keyed by the hash of its body."""
    if request.method == "POST" and request.path.startswith("/v1/"):
        now = time.perf_counter_ns()
        body = await request.read()  # cached: the handler's request.json() reads it again
        request.app[RECV][hashlib.blake2b(body, digest_size=16).hexdigest()] = now
    return await handler(request)


async def recv_stamps(request: web.Request) -> web.Response:
    """GET /bench/recv: {body hash: receive perf_counter_ns}; ?clear=1 empties it after."""
    stamps = dict(request.app[RECV])
    if request.query.get("clear"):
        request.app[RECV].clear()
    return web.json_response(stamps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--profile", default="tiny")
    parser.add_argument("--fast", action="store_true", help="fast engine physics (capacity)")
    parser.add_argument("--cpu", type=int, default=None, help="pin this process to one CPU")
    args = parser.parse_args()
    if args.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    profile = get_profile(args.profile)
    if args.fast:
        profile = profile.model_copy(update={"name": f"{profile.name}-fast",
                                             "prefill_tokens_per_s": 10_000_000.0,
                                             "decode_base_ms": 1.0, "decode_alpha": 0.0})
    app = build_app(profile, None)  # no storage tier: timing only, no disk in the way
    app[RECV] = {}
    app.middlewares.append(stamp_receive)
    app.router.add_get("/bench/recv", recv_stamps)
    web.run_app(app, host="127.0.0.1", port=args.port, access_log=None, print=None,
                loop=fine_loop())  # the simulator's own timers, as gates.sim.serve runs them


if __name__ == "__main__":
    main()
