"""The load generator against a real aiohttp server on loopback that misbehaves on request."""

import asyncio
import contextlib
import gc
import json
import time
from dataclasses import dataclass

import pytest
from aiohttp import web

from gates.core.verdicts import RequestOutcome
from gates.loadgen import Endpoint, LoadSettings, Pool, payload, run_phase, send
from gates.loadgen.generator import release_times


@dataclass
class Req:
    request_id: str
    prompt: list
    max_tokens: int = 3
    phase: str = "probe"
    at: float | None = None


def chunk(text, ids=None):
    choice = {"index": 0, "text": text, "finish_reason": None}
    if ids is not None:
        choice["token_ids"] = ids
    return f"data: {json.dumps({'choices': [choice]})}\n\n".encode()


USAGE = b'data: {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 3}}\n\n'


class Server:
    """Behaviour chosen by the request's model name; counts requests in flight."""

    def __init__(self):
        self.in_flight = 0
        self.max_in_flight = 0
        self.bodies = []

    async def handle(self, request):
        body = await request.json()
        self.bodies.append(body)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await getattr(self, "do_" + body["model"])(request)
        finally:
            self.in_flight -= 1

    async def _stream(self, request, parts, pause=0.0):
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for part in parts:
            if pause:
                await asyncio.sleep(pause)
            await response.write(part)
        return response

    async def do_ok(self, request):
        return await self._stream(request, [b": keep-alive\n\n", chunk("a", [1]), chunk("b", [2]),
                                            chunk("c", [3]), USAGE, b"data: [DONE]\n\n"],
                                  pause=0.005)

    async def do_nousage(self, request):
        return await self._stream(request, [chunk("a"), chunk("b"), b"data: [DONE]\n\n"])

    async def do_fail(self, request):
        return web.Response(status=500, text="boom")

    async def do_stall(self, request):
        return await self._stream(request, [chunk("a"), b""], pause=1.0)

    async def do_nodone(self, request):
        return await self._stream(request, [chunk("a"), USAGE])

    async def do_empty(self, request):  # a finish, no token, usage 0 and [DONE]
        finish = {"choices": [{"index": 0, "text": "", "finish_reason": "length"}]}
        return await self._stream(request, [f"data: {json.dumps(finish)}\n\n".encode(),
                                            USAGE.replace(b'"completion_tokens": 3',
                                                          b'"completion_tokens": 0'),
                                            b"data: [DONE]\n\n"])

    async def do_bare(self, request):  # a finish and [DONE], no usage at all
        finish = {"choices": [{"index": 0, "text": "", "finish_reason": "length"}]}
        return await self._stream(request, [f"data: {json.dumps(finish)}\n\n".encode(),
                                            b"data: [DONE]\n\n"])

    async def do_textless(self, request):  # three tokens whose text is empty, usage 3
        return await self._stream(request, [chunk("", [1]), chunk("", [2]), chunk("", [3]),
                                            USAGE, b"data: [DONE]\n\n"])

    async def do_garbage(self, request):
        return await self._stream(request, [chunk("a"), b"data: {not json\n\n"])

    async def do_trickle(self, request):
        return await self._stream(request, [b": keep-alive\n\n"] * 200, pause=0.05)

    async def do_drop(self, request):
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(chunk("a"))
        request.transport.close()
        return response


@pytest.fixture
def server():
    """A real HTTP server on 127.0.0.1 in its own event loop thread-free setup."""
    return Server()


@contextlib.asynccontextmanager
async def serving(server):
    """The scripted server on a free loopback port; yields its base URL."""
    app = web.Application()
    app.router.add_post("/v1/completions", server.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
    finally:
        await runner.cleanup()


def run(server, models, settings=None, prompts=None):
    async def main():
        async with serving(server) as url:
            endpoints = {m: Endpoint(url=url, model=m) for m in models}
            requests = [Req(f"r{i}", prompts or [1, 2, 3, 4]) for i in range(len(models))]
            records = []
            for req, model in zip(requests, models, strict=True):
                # Generous by default: the stall timeout is the connect timeout too, and a busy
                # machine can hold a loopback connect for longer than a stall test's 0.3 s.
                result = await run_phase([req], [endpoints[model]], settings or LoadSettings(
                    stall_timeout=5.0))
                records += result.records
            return records

    return asyncio.run(main())


def test_a_good_stream_is_timed_from_content_events(server):
    [record] = run(server, ["ok"])
    assert record.outcome is RequestOutcome.OK and record.status == 200
    assert len(record.content_times) == 3 and record.ttft == record.content_times[0]
    assert record.e2e == record.content_times[-1] > record.ttft
    assert record.output_tokens == 3 and record.tokens_from_usage
    assert record.output_ids == [1, 2, 3] and record.input_tokens == 4
    assert server.bodies[0]["stream_options"] == {"include_usage": True}
    assert server.bodies[0]["prompt"] == [1, 2, 3, 4]


def test_without_usage_tokens_are_counted_and_flagged(server):
    [record] = run(server, ["nousage"])
    assert record.outcome is RequestOutcome.OK
    assert record.output_tokens == 2 and not record.tokens_from_usage


@pytest.mark.parametrize("model, outcome, text", [
    ("fail", RequestOutcome.HTTP_ERROR, "HTTP 500: boom"),
    ("stall", RequestOutcome.TIMEOUT, "stall"),
    ("nodone", RequestOutcome.PROTOCOL_ERROR, "without [DONE]"),
    ("garbage", RequestOutcome.PROTOCOL_ERROR, ""),
    ("drop", RequestOutcome.PROTOCOL_ERROR, ""),
])
def test_each_fault_is_one_counted_outcome_with_its_reason(server, model, outcome, text):
    # The stall handler pauses 1 s mid-stream: only its case needs a stall timeout below that.
    settings = LoadSettings(stall_timeout=0.3) if model == "stall" else None
    [record] = run(server, [model], settings)
    assert record.outcome is outcome, record.error
    assert text in record.error and record.error


def test_a_stream_that_sends_no_content_where_tokens_were_due_is_not_ok(server):
    """Was OK: with no content event it had no TTFT, so every statistic passed over it and no
    error rule counted it (a request the phase could not read, dropped as if never sent)."""
    [record] = run(server, ["empty"])
    assert record.outcome is RequestOutcome.PROTOCOL_ERROR and record.status == 200
    assert record.error.endswith("stream ended without any content or token, though "
                                 "ignore_eos asked for 3: no TTFT to time"), record.error
    [bare] = run(server, ["bare"])  # no usage: nothing says a token came either
    assert bare.outcome is RequestOutcome.PROTOCOL_ERROR, bare
    # Tokens whose text is empty (unfinished UTF-8 of a random-weight model) are the model's:
    # the usage that counts them keeps the request OK, counted as ok_without_content.
    [textless] = run(server, ["textless"])
    assert textless.outcome is RequestOutcome.OK and textless.output_tokens == 3
    # Without ignore_eos the engine may stop at once: then OK, counted as such by the summary.
    [free] = run(server, ["empty"], LoadSettings(stall_timeout=5.0, ignore_eos=False))
    assert free.outcome is RequestOutcome.OK and free.ttft is None


def test_refused_connection_is_an_http_error_naming_the_host():
    async def main():
        endpoint = Endpoint(url="http://127.0.0.1:9", model="x")
        return await run_phase([Req("r0", [1])], [endpoint], LoadSettings())

    [record] = asyncio.run(main()).records
    assert record.outcome is RequestOutcome.HTTP_ERROR
    assert "127.0.0.1:9" in record.error and record.status is None


def test_a_url_that_is_not_http_is_an_http_error_naming_it():
    async def main():
        return await run_phase([Req("r0", [1])], [Endpoint(url="ftp://127.0.0.1:21", model="x")],
                               LoadSettings())

    [record] = asyncio.run(main()).records
    assert record.outcome is RequestOutcome.HTTP_ERROR and record.status is None
    assert record.error.endswith("cannot connect: ftp://127.0.0.1:21/v1/completions is not an "
                                 "http:// or https:// URL")


def test_a_server_that_never_answers_times_out_naming_host_path_and_timeout():
    async def main():
        async def swallow(reader, writer):
            with contextlib.suppress(ConnectionError):
                await reader.read()  # never a byte back
            writer.close()

        server = await asyncio.start_server(swallow, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            result = await run_phase([Req("r0", [1])], [Endpoint(url=f"http://127.0.0.1:{port}",
                                                                 model="x")],
                                     LoadSettings(stall_timeout=0.3))
        return port, result.records

    port, [record] = asyncio.run(main())
    assert record.outcome is RequestOutcome.TIMEOUT
    assert record.error == (f"POST 127.0.0.1:{port}/v1/completions: timeout: no data for 0.3 s "
                            "(stall_timeout)")


def test_a_stream_that_never_ends_hits_the_request_timeout_and_says_so(server):
    [record] = run(server, ["trickle"], LoadSettings(stall_timeout=5, request_timeout=0.5))
    assert record.outcome is RequestOutcome.TIMEOUT
    assert record.error.startswith("POST 127.0.0.1:")
    assert "/v1/completions: timeout: " in record.error
    assert "not finished within 0.5 s (request_timeout)" in record.error


def test_mixed_faults_add_up_to_the_requests_sent(server):
    models = ["ok", "fail", "ok", "nodone", "garbage", "ok", "fail"]
    records = run(server, models)
    assert len(records) == len(models)
    counts = {o: sum(r.outcome is o for r in records) for o in RequestOutcome}
    assert counts[RequestOutcome.OK] == 3 and counts[RequestOutcome.HTTP_ERROR] == 2
    assert counts[RequestOutcome.PROTOCOL_ERROR] == 2 and sum(counts.values()) == len(models)


def test_closed_loop_never_exceeds_the_concurrency(server):
    async def main():
        async with serving(server) as url:
            seen = []
            result = await run_phase([Req(f"r{i}", [i]) for i in range(12)],
                                     [Endpoint(url=url, model="ok")],
                                     LoadSettings(concurrency=3), on_record=seen.append)
            return result, seen

    result, seen = asyncio.run(main())
    assert server.max_in_flight <= 3 and len(result.records) == 12 == len(seen)
    assert all(r.ok for r in result.records)
    assert max(r.queue_time for r in result.records) > 0  # some waited for a slot
    assert result.wall >= max(r.t0 + r.e2e for r in result.records)


def test_a_server_keeping_connections_alive_needs_no_reconnect(server):
    async def main():
        async with serving(server) as url:
            return await run_phase([Req(f"r{i}", [i]) for i in range(12)],
                                   [Endpoint(url=url, model="ok")], LoadSettings(concurrency=3))

    result = asyncio.run(main())
    assert all(r.ok and r.reconnects == 0 for r in result.records)
    check = result.self_check
    assert check.reconnects == 0 and check.notes == []
    assert check.other_cpu_pct is not None and check.own_cpu_pct is not None


def test_send_sends_each_request_once_on_a_kept_alive_connection(server):
    async def main():
        async with serving(server) as url, Pool() as pool:
            records = [await send(pool, Endpoint(url=url, model="ok"), Req(f"r{i}", [i]),
                                  LoadSettings(), time.perf_counter_ns()) for i in range(3)]
            return records, pool.reuses

    records, reuses = asyncio.run(main())
    assert all(r.ok and r.reconnects == 0 for r in records)
    assert [b["prompt"] for b in server.bodies] == [[0], [1], [2]] and reuses == 2


def test_release_times_for_each_mode():
    assert release_times(3, LoadSettings(), [None] * 3) == [None, None, None]
    assert release_times(3, LoadSettings(mode="rate", rate=4, arrival="constant"),
                         [None] * 3) == [0.0, 0.25, 0.5]
    poisson = release_times(200, LoadSettings(mode="rate", rate=10, seed=7), [None] * 200)
    assert poisson == release_times(200, LoadSettings(mode="rate", rate=10, seed=7), [None] * 200)
    assert 10 < poisson[-1] < 30  # ~199 gaps of mean 0.1 s
    assert release_times(2, LoadSettings(mode="trace"), [0.0, 1.5]) == [0.0, 1.5]


def test_chat_payload_and_api_key_stay_out_of_the_record():
    endpoint = Endpoint(url="http://h/", model="m", api="chat", api_key="sekrit")
    body = payload(endpoint, Req("r", "hello"), LoadSettings())
    assert body["messages"] == [{"role": "user", "content": "hello"}]
    assert endpoint.post_url() == "http://h/v1/chat/completions"
    assert "sekrit" not in endpoint.model_dump_json() and "sekrit" not in repr(endpoint)


def test_a_phase_leaves_the_collector_as_it_found_it(server):
    # run_phase freezes what was alive before it (so full collections do not walk kvgate's
    # modules mid-phase) and must unfreeze it, after a good phase and after a failed one.
    assert gc.get_freeze_count() == 0
    records = run(server, ["ok", "fail"])
    assert [r.ok for r in records] == [True, False]
    assert gc.get_freeze_count() == 0
