"""gates.proof.identity: the server's own word on what it is, over real loopback HTTP."""

from __future__ import annotations

import asyncio

from aiohttp import web

from gates.proof import server_identity
from gates.proof.identity import SIM_HEADER as SAID
from gates.proof.identity import identify
from gates.sim.server import SIM_HEADER, build_app


def test_the_simulator_is_known_by_what_it_serves_not_by_the_site_file():
    assert SAID == SIM_HEADER  # the wire name the simulator sets and kvgate reads
    assert identify({"data": [{"owned_by": "kvgate-simulator"}]}, {}).simulated
    assert identify({"data": [{"kvgate_simulator": True}]}, {}).simulated
    assert identify(None, {SIM_HEADER: "1"}).simulated


def test_real_engines_name_themselves_and_their_version():
    vllm = identify({"data": [{"id": "m", "owned_by": "vllm"}]}, {}, {"version": "0.32.0"})
    assert (vllm.engine, vllm.version, vllm.simulated) == ("vllm", "0.32.0", False)
    assert vllm.describe() == "vllm 0.32.0 (GET /v1/models owned_by, GET /version)"
    sglang = identify({"data": [{"owned_by": "sglang"}]}, {}, {"version": "0.5.23"})
    assert sglang.describe().startswith("sglang 0.5.23")
    assert identify({"data": []}, {}).engine == "unknown"
    assert identify("garbage", {}).engine == "unknown"


def test_a_live_simulator_says_so(tmp_path):
    async def ask():
        runner = web.AppRunner(build_app("tiny", tmp_path))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        try:
            return await server_identity(f"http://127.0.0.1:{port}")
        finally:
            await runner.cleanup()

    found = asyncio.run(ask())
    assert found.simulated and found.engine == "kvgate-sim"


def test_nothing_listening_is_unknown_never_an_error():
    found = asyncio.run(server_identity("http://127.0.0.1:9"))
    assert found.engine == "unknown" and not found.simulated
