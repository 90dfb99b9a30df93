"""What kvgate reads from a server it does not trust, over real loopback HTTP (issue #27): a
/metrics body of any bytes or that trickles, a counter that is not a count, a /v1/models that
trickles or is huge. Each ends in a line naming the URL (and the cap, the series), never a
traceback, a hang, or a silent exit 0 with "—" or "nan" for the storage reads."""

from __future__ import annotations

import asyncio
import re
import threading
from contextlib import contextmanager

import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gates.cli import main
from gates.sim.server import build_app

GARBLED = [b"\xff\xfe\x00garbage\n", b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"]
# A byte that is not UTF-8 inside a label: the live scrape (gates.inference.phases.HttpMetrics)
# decodes strictly, as `kvgate proof` does for a file, and refuses it naming the byte, never
# reading the series under a label kvgate made up.
LATIN1 = b"# TYPE vllm:prompt_tokens counter\nvllm:prompt_tokens_total{a=\"\xff\"} 5\n"


@contextmanager
def serving(app: web.Application):
    """The app on 127.0.0.1 in a thread of its own (kvgate's CLI runs its own event loop)."""
    loop, ready, box = asyncio.new_event_loop(), threading.Event(), {}

    async def start():
        box["runner"] = runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        box["url"] = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
        ready.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(start()),
                                              loop.run_forever()), daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield box["url"]
    finally:
        asyncio.run_coroutine_threadsafe(box["runner"].cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def simulator(tmp_path, metrics):
    """The tiny simulator whose /metrics body is metrics(the real body)."""
    @web.middleware
    async def swap(request, handler):
        response = await handler(request)
        if request.path != "/metrics":
            return response
        return web.Response(body=metrics(response.body), content_type="text/plain")

    app = build_app("tiny", tmp_path / "kv")
    app.middlewares.append(swap)
    return app


def loadgen(capsys, url: str, *extra: str) -> tuple[int, str]:
    code = main(["loadgen", "--url", url, "--requests", "2", "--context-tokens", "64",
                 "--chunk-tokens", "16", "--concurrency", "2", *extra])
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.parametrize("body", [*GARBLED, LATIN1], ids=["binary", "gzip", "latin-1 label"])
def test_a_garbled_metrics_body_is_an_error_naming_the_url(capsys, tmp_path, body):
    with serving(simulator(tmp_path, lambda real: body)) as url:
        code, out = loadgen(capsys, url, "--engine", "vllm")
    assert code == 2 and f"{url}/metrics" in out and "Traceback" not in out, out
    assert "storage reads could not be measured" in out


def test_a_counter_that_is_not_a_count_is_an_error_naming_the_series(capsys, tmp_path):
    def nan(real: bytes) -> bytes:
        return re.sub(rb"(kvgate_sim_storage_read_tokens_total\{[^}]*\}) \d+", rb"\1 NaN", real)

    with serving(simulator(tmp_path, nan)) as url:
        code, out = loadgen(capsys, url)
    assert code == 2 and "kvgate_sim_storage_read_tokens_total" in out, out
    assert "not a count" in out and "nan tokens" not in out


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.binary(max_size=300) | st.sampled_from([*GARBLED, LATIN1]))
def test_any_bytes_as_a_metrics_body_never_give_a_traceback(capsys, tmp_path_factory, body):
    with serving(simulator(tmp_path_factory.mktemp("sim"), lambda real: body)) as url:
        code, out = loadgen(capsys, url, "--engine", "vllm")
    assert code in (0, 2) and "Traceback" not in out, out
    assert code == 2 or "nan" not in out.split("probe phase")[-1].lower(), out


# ---- /v1/models: a size and a total time, both named -----------------------------------------

def trickling(byte: bytes = b" ", pause: float = 0.1, huge: int = 0,
              path: str = "/v1/models") -> web.Application:
    async def models(request):
        response = web.StreamResponse()
        await response.prepare(request)
        if huge:  # one JSON answer far past any model list: a hostile or broken server
            await response.write(b'{"data": [{"id": "m", "owned_by": "vllm", "pad": "'
                                 + b"x" * huge + b'"}]}')
            return response
        while True:  # a byte at a time: never a stall, never an end
            await response.write(byte)
            await asyncio.sleep(pause)

    app = web.Application()
    app.router.add_get(path, models)
    return app


def test_a_trickling_metrics_body_is_cut_at_the_scrapes_cap():
    """Each byte comes in time, so no read ever stalls: only the cap on the whole answer ends
    the scrape, as a PhaseError naming the URL and the cap (the phase's proof INCONCLUSIVE)."""
    from gates.inference import HttpMetrics, PhaseError

    with serving(trickling(b"#", path="/metrics")) as url:
        async def scrape():  # a scrape without a cap would wait for ever: fail the test instead
            return await asyncio.wait_for(HttpMetrics(timeout=1.0).scrape(f"{url}/metrics"), 20)
        with pytest.raises(PhaseError, match=rf"{url}/metrics: no whole answer within 1 s"):
            asyncio.run(scrape())


def test_a_trickling_model_list_is_cut_at_the_lookups_cap(monkeypatch):
    import gates.commands.loadgen_checks as checks
    from gates.inference import PhaseError
    from gates.loadgen import LoadSettings

    monkeypatch.setattr(checks, "LOOKUP_MAX_S", 1.5)
    with serving(trickling()) as url:
        async def ask():  # the old code waited for ever: fail the test instead
            return await asyncio.wait_for(checks.first_model(url, None, LoadSettings(
                stall_timeout=1.0)), 20)
        with pytest.raises(PhaseError, match=rf"GET {url}/v1/models: not done within 1.5 s"):
            asyncio.run(ask())


def test_a_huge_model_list_is_not_read_to_its_end_for_the_servers_identity():
    from gates.proof import server_identity

    with serving(trickling(huge=8 * 2**20)) as url:
        found = asyncio.run(server_identity(url))
    assert found.engine == "unknown" and f"GET {url}/v1/models" in found.evidence
    assert "1,048,576 bytes" in found.evidence


def test_a_trickling_model_list_leaves_the_identity_unknown_in_time(monkeypatch):
    import gates.proof.identity as identity

    monkeypatch.setattr(identity, "ANSWER_SECONDS", 1.0)
    with serving(trickling()) as url:
        found = asyncio.run(asyncio.wait_for(identity.server_identity(url), 20))
    assert found.engine == "unknown" and "not answered within 1 s" in found.evidence
