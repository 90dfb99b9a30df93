"""`kvgate loadgen` against hostile servers on loopback: every failure is one line saying where.

The servers are real: an aiohttp app, or a raw asyncio socket that accepts and never answers,
each served from its own event loop in a thread while the command runs in the test's.
"""

import asyncio
import contextlib
import io
import json
import threading

import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from gates.cli import main

CHUNK = b'data: {"choices": [{"index": 0, "text": "a", "finish_reason": null}]}\n\n'
USAGE = b'data: {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 1}}\n\n'
SMALL = ["--workload", "shared-prefix", "--context-tokens", "8", "--question-tokens", "1",
         "--output-tokens", "1", "--vocab", "2000"]


class Loopback:
    """Serve what ``start`` sets up (it returns the base URL and a stop coroutine) in a thread."""

    def __init__(self, start):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.url, self._stop = asyncio.run_coroutine_threadsafe(start(), self.loop).result(30)

    def close(self):
        asyncio.run_coroutine_threadsafe(self._stop(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(60)
        self.loop.close()


class Hostile:
    """/v1/models answers the (status, body) set by the test; completions fail the first k."""

    def __init__(self):
        self.reset()

    def reset(self, status=200, body=b'{"data": [{"id": "m"}]}', fail_first=0):
        self.models, self.fail_first = (status, body), fail_first
        self.auth, self.posts = [], []

    async def list_models(self, request):
        self.auth.append(request.headers.get("Authorization"))
        status, body = self.models
        return web.Response(status=status, body=body, content_type="application/json")

    async def complete(self, request):
        self.posts.append(await request.json())
        if len(self.posts) <= self.fail_first:
            return web.Response(status=500, text="scripted failure")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for part in (CHUNK, USAGE, b"data: [DONE]\n\n"):
            await response.write(part)
        return response

    async def start(self):
        app = web.Application()
        app.router.add_get("/v1/models", self.list_models)
        app.router.add_post("/v1/completions", self.complete)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        return f"http://127.0.0.1:{runner.addresses[0][1]}", runner.cleanup


async def start_silent():
    """A server that accepts every connection, reads what comes and never sends a byte."""
    async def swallow(reader, writer):
        with contextlib.suppress(ConnectionError):
            await reader.read()  # until the client gives up
        writer.close()

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)

    async def stop():
        server.close()
        await server.wait_closed()

    return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", stop


@pytest.fixture(scope="module")
def served():
    hostile = Hostile()
    loopback = Loopback(hostile.start)
    hostile.url = loopback.url
    yield hostile
    loopback.close()


@pytest.fixture
def hostile(served):
    served.reset()
    return served


@pytest.fixture
def silent():
    loopback = Loopback(start_silent)
    yield loopback.url
    loopback.close()


def loadgen(capsys, *args):
    code = main(["loadgen", *args])
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_an_empty_model_list_is_one_line_naming_the_url(hostile, capsys):
    hostile.reset(body=b'{"object": "list", "data": []}')
    code, _, err = loadgen(capsys, "--url", hostile.url, *SMALL)
    line = one_line(err)
    assert code == 2 and not hostile.posts
    assert f"GET {hostile.url}/v1/models" in line and "lists no model" in line
    assert "pass --model NAME" in line


def test_a_401_says_the_status_and_the_servers_words_and_the_key_was_sent(hostile, capsys,
                                                                           monkeypatch):
    hostile.reset(status=401, body=b'{"error": {"message": "invalid api key", "code": 401}}')
    monkeypatch.setenv("KVGATE_TEST_KEY", "sekrit")
    code, out, err = loadgen(capsys, "--url", hostile.url, "--api-key-env", "KVGATE_TEST_KEY",
                             *SMALL)
    line = one_line(err)
    assert code == 2 and hostile.auth == ["Bearer sekrit"]
    assert f"GET {hostile.url}/v1/models: HTTP 401" in line and "invalid api key" in line
    assert "--model NAME" in line and "sekrit" not in out + err


def test_a_key_variable_that_is_not_set_is_refused(hostile, capsys, monkeypatch):
    monkeypatch.delenv("KVGATE_TEST_KEY", raising=False)
    code, _, err = loadgen(capsys, "--url", hostile.url, "--api-key-env", "KVGATE_TEST_KEY")
    assert code == 2 and "KVGATE_TEST_KEY" in one_line(err) and not hostile.auth


def test_a_server_that_never_answers_the_model_lookup_names_host_path_and_timeout(silent,
                                                                                  capsys):
    code, _, err = loadgen(capsys, "--url", silent, "--stall-timeout", "0.5", *SMALL)
    line = one_line(err)
    assert code == 2
    assert f"GET {silent}/v1/models: no answer within 0.5 s (--stall-timeout)" in line
    assert "pass --model NAME" in line


def test_requests_a_server_never_answers_name_host_path_and_timeout(silent, capsys):
    code, out, err = loadgen(capsys, "--url", silent, "--model", "m", "--stall-timeout", "0.5",
                             "--requests", "2", *SMALL)
    where = silent.removeprefix("http://")
    assert code == 2 and "no probe request succeeded" in err
    assert "failed: 2 of 2 requests sent (100%)" in out
    assert f"2 x POST {where}/v1/completions: timeout: no data for 0.5 s (stall_timeout)" in out


def test_requests_not_divisible_by_the_group_are_all_sent_and_said(hostile, capsys):
    code, out, err = loadgen(capsys, "--url", hostile.url, "--requests", "10", *SMALL)
    assert code == 0, err
    assert "sending 10 requests: 3 groups of 4 sharing a 8-token prefix, the last of 2" in out
    assert len(hostile.posts) == 10 and {p["model"] for p in hostile.posts} == {"m"}
    assert "failed: 0 of 10 requests sent (0%)" in out


@pytest.mark.parametrize("limit, code", [(None, 1), ("0.2", 1), ("24.9%", 1), ("0.25", 0),
                                         ("25%", 0), ("1", 0)])
def test_an_error_rate_above_the_limit_fails_the_run_and_says_the_rate(hostile, capsys, limit,
                                                                         code):
    hostile.reset(fail_first=1)
    flags = [] if limit is None else ["--max-error-rate", limit]
    done, out, err = loadgen(capsys, "--url", hostile.url, "--requests", "4", *SMALL, *flags)
    assert done == code, err
    assert "failed: 1 of 4 requests sent (25%)" in out
    assert "1 x POST " in out and "/v1/completions: HTTP 500: scripted failure" in out
    if code:
        shown = {None: "0%", "0.2": "20%", "24.9%": "24.9%"}[limit]
        assert f"25% of the requests sent failed, above --max-error-rate {shown}" in err
    else:
        assert "--max-error-rate" not in err


@pytest.mark.parametrize("value", ["5", "101%", "-0.1", "nan", "1e-2", "0.5%%", "", "x"])
def test_a_bad_max_error_rate_is_refused_before_anything_is_sent(hostile, capsys, value):
    with pytest.raises(SystemExit) as exit_:
        main(["loadgen", "--url", hostile.url, "--max-error-rate", value])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "--max-error-rate" in err
    assert "give a fraction from 0 to 1 (0.05) or a percentage from 0 to 100 (5%)" in err
    assert not hostile.auth and not hostile.posts


@pytest.mark.parametrize("value", ["200", "1000", "-5", "4e3", "x"])
def test_a_vocab_at_or_below_the_reserved_ids_is_refused_before_anything_is_sent(hostile, capsys,
                                                                                  value):
    # It used to reach the workload and say "need more than -800 distinct first tokens".
    with pytest.raises(SystemExit) as exit_:
        main(["loadgen", "--url", hostile.url, "--vocab", value])
    err = " ".join(capsys.readouterr().err.split())
    assert exit_.value.code == 2 and f"--vocab: '{value}': give a whole number above 1000" in err
    assert not hostile.posts


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=12)
                    | st.floats(allow_nan=False, allow_infinity=False),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=10)
CARDS = st.one_of(JSON, st.fixed_dictionaries({"id": JSON}, optional={"owned_by": JSON}),
                  st.fixed_dictionaries({"id": st.text(max_size=30)}))
LISTINGS = st.one_of(JSON, st.fixed_dictionaries(
    {"data": st.one_of(JSON, st.lists(CARDS, max_size=3))},
    optional={"object": st.just("list"), "error": JSON}))
BODIES = st.one_of(LISTINGS.map(lambda v: json.dumps(v).encode()), st.binary(max_size=40))


def listed(status, raw):
    """The model a well-formed listing names first, or None."""
    try:
        body = json.loads(raw) if status == 200 else None
    except ValueError:
        return None
    data = body.get("data") if isinstance(body, dict) else None
    first = data[0] if isinstance(data, list) and data else None
    model = first.get("id") if isinstance(first, dict) else None
    return model if isinstance(model, str) and model else None


@settings(max_examples=60, deadline=None)
@given(status=st.sampled_from([200, 200, 200, 401, 404, 500]), raw=BODIES)
def test_any_model_listing_gives_a_model_or_one_line_naming_the_url(served, status, raw):
    served.reset(status=status, body=raw)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["loadgen", "--url", served.url, "--requests", "1", *SMALL])
    model = listed(status, raw)
    if model is not None:
        assert code == 0, err.getvalue()
        assert [p["model"] for p in served.posts] == [model]
    else:
        line = one_line(err.getvalue())
        assert code == 2 and not served.posts
        assert f"GET {served.url}/v1/models: " in line and "pass --model NAME" in line
