"""The simulator over real loopback HTTP (aiohttp TestServer on 127.0.0.1, aiohttp client)."""

import asyncio
import contextlib
import json
import shutil
import time

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from gates.sim.cli import tiered_profile
from gates.sim.engine import Engine
from gates.sim.model import FaultConfig, chunk_hashes, get_profile
from gates.sim.server import ENGINE, SIM_HEADER, build_app

TINY = get_profile("tiny")
PROMPT = list(range(1000, 1100))  # 6 whole chunks of 16 tokens and a 4-token tail
USAGE = {"stream_options": {"include_usage": True}}


@contextlib.asynccontextmanager
async def sim(kv_dir=None, profile=TINY, **kw):
    """A running simulator and a client session pointed at it."""
    app = build_app(profile, kv_dir, **kw)
    async with TestServer(app, host="127.0.0.1") as server, aiohttp.ClientSession(
            base_url=str(server.make_url(""))) as session:
        yield session, app


def run(coro):
    return asyncio.run(coro)


async def stream(s, path="/v1/completions", **body):
    """POST a streaming request; the parsed data events, '[DONE]' as the string."""
    async with s.post(path, json={"stream": True, **USAGE, **body}) as r:
        assert r.status == 200, await r.text()
        assert r.headers[SIM_HEADER] == "1"
        assert r.headers["Content-Type"].startswith("text/event-stream")
        text = await r.text()
    assert text.endswith("\n\n")
    events = [block.removeprefix("data: ") for block in text.split("\n\n") if block]
    return [e if e == "[DONE]" else json.loads(e) for e in events]


def ids_of(events):
    return [t for e in events if isinstance(e, dict) and e["choices"]
            for t in e["choices"][0].get("token_ids", [])]


async def metrics(s):
    async with s.get("/metrics") as r:
        assert r.headers[SIM_HEADER] == "1"
        text = await r.text()
    return {line.split("{")[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line and not line.startswith("#")}


def delta(before, after):
    return {k: after[k] - before[k] for k in after}


def test_completion_stream_format(tmp_path):
    async def go():
        async with sim(tmp_path) as (s, _):
            return await stream(s, prompt=PROMPT, max_tokens=5, ignore_eos=True)

    events = run(go())
    assert events[-1] == "[DONE]"
    content, usage = events[:-2], events[-2]
    assert len(content) == 5
    for e in content:
        assert e["model"] == "kvgate-sim-tiny" and e["object"] == "text_completion"
        (choice,) = e["choices"]
        assert choice["text"].strip() and len(choice["token_ids"]) == 1
        assert e["sim_sent_ns"] >= e["sim_due_ns"]
    assert [e["choices"][0]["finish_reason"] for e in content] == [None] * 4 + ["length"]
    sent = [e["sim_sent_ns"] for e in content]
    assert sent == sorted(sent)
    assert usage["choices"] == []
    assert usage["usage"] == {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105,
                              "prompt_tokens_details": {"cached_tokens": 0}}


def test_chat_stream_is_role_first_then_content_usage_done():
    async def go():
        async with sim() as (s, _):
            return await stream(s, "/v1/chat/completions", max_tokens=3,
                                messages=[{"role": "user", "content": "hello"}])

    events = run(go())
    first = events[0]["choices"][0]
    assert first["delta"] == {"role": "assistant", "content": ""} and "token_ids" not in first
    assert all(e["object"] == "chat.completion.chunk" for e in events[:-1])
    assert [len(e["choices"][0]["delta"]["content"]) > 0 for e in events[1:4]] == [True] * 3
    assert events[4]["choices"] == [] and events[4]["usage"]["completion_tokens"] == 3
    assert events[5] == "[DONE]"


def test_non_streaming_gives_the_same_tokens_as_streaming():
    async def go():
        async with sim() as (s, _):
            streamed = ids_of(await stream(s, prompt=PROMPT, max_tokens=6))
            async with s.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 6}) as r:
                plain = await r.json()
            msgs = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
            chat_streamed = ids_of(await stream(s, "/v1/chat/completions", messages=msgs,
                                                max_completion_tokens=4))
            async with s.post("/v1/chat/completions", json={"messages": msgs,
                                                            "max_tokens": 4}) as r:
                chat = await r.json()
            return streamed, plain, chat_streamed, chat

    streamed, plain, chat_streamed, chat = run(go())
    assert plain["choices"][0]["token_ids"] == streamed
    assert plain["usage"]["prompt_tokens_details"]["cached_tokens"] == 96  # GPU cache
    assert plain["choices"][0]["text"].strip() and "sim_sent_ns" in plain
    assert chat["choices"][0]["token_ids"] == chat_streamed
    assert chat["choices"][0]["message"]["role"] == "assistant"


def test_after_reset_the_prompt_comes_back_from_storage_and_survives_restart(tmp_path):
    chunk_bytes = TINY.chunk_bytes

    async def go():
        out = {}
        async with sim(tmp_path) as (s, app):
            m0 = await metrics(s)
            out["cold"] = ids_of(await stream(s, prompt=PROMPT, max_tokens=4))
            await app[ENGINE].tier.drain()  # the seed's writes settle
            m1 = await metrics(s)
            out["seed"] = delta(m0, m1)
            out["gpu"] = ids_of(await stream(s, prompt=PROMPT, max_tokens=4))
            async with s.post("/reset_prefix_cache") as r:
                assert r.status == 200
            m2 = await metrics(s)
            events = await stream(s, prompt=PROMPT, max_tokens=4)
            out["probe"] = delta(m2, await metrics(s))
            out["storage"], out["usage"] = ids_of(events), events[-2]["usage"]
        async with sim(tmp_path) as (s, _):  # a restart: GPU cache empty, tier on disk
            m3 = await metrics(s)
            out["restarted"] = ids_of(await stream(s, prompt=PROMPT, max_tokens=4))
            out["restart"] = delta(m3, await metrics(s))
        return out

    out = run(go())
    assert out["seed"]["kvgate_sim_recomputed_tokens_total"] == 100
    assert out["seed"]["kvgate_sim_storage_write_bytes_total"] == 6 * chunk_bytes
    assert out["seed"]["kvgate_sim_storage_read_bytes_total"] == 0
    for phase in ("probe", "restart"):
        d = out[phase]
        assert d["kvgate_sim_storage_read_tokens_total"] == 96, phase
        assert d["kvgate_sim_storage_read_bytes_total"] == 6 * chunk_bytes, phase
        assert d["kvgate_sim_recomputed_tokens_total"] == 4, phase  # only the tail
        assert d["kvgate_sim_gpu_hit_tokens_total"] == 0, phase
        assert d["kvgate_sim_storage_write_bytes_total"] == 0, phase
        assert d["vllm:prompt_tokens_total"] == 100, phase
    assert out["usage"]["prompt_tokens_details"]["cached_tokens"] == 96
    assert out["cold"] == out["gpu"] == out["storage"] == out["restarted"]
    assert len(list((tmp_path / TINY.model_id).glob("??/*.kv"))) == 6


def test_a_cpu_tier_answers_after_a_reset_and_the_storage_once_it_has_evicted(tmp_path):
    # GPU cache 2 chunks, CPU tier 8 chunks (the --gpu-cache/--cpu-tier of tiered_profile):
    # PROMPT's 6 chunks fit the CPU tier, 12 chunks of two prompts do not.
    profile = tiered_profile(TINY, 2 * TINY.chunk_bytes, 8 * TINY.chunk_bytes + 100)
    other = list(range(2000, 2100))

    async def go():
        out = {}
        async with sim(tmp_path, profile) as (s, app):
            await stream(s, prompt=PROMPT, max_tokens=2)
            await app[ENGINE].tier.drain()
            async with s.post("/reset_prefix_cache") as r:  # the GPU cache only
                assert r.status == 200
            m0 = await metrics(s)
            events = await stream(s, prompt=PROMPT, max_tokens=2)
            out["cpu"], out["usage"] = delta(m0, await metrics(s)), events[-2]["usage"]
            await stream(s, prompt=other, max_tokens=2)  # evicts PROMPT from both caches
            await app[ENGINE].tier.drain()
            m1 = await metrics(s)
            await stream(s, prompt=PROMPT, max_tokens=2)
            out["storage"] = delta(m1, await metrics(s))
        return out

    out = run(go())
    assert profile.cpu_tier_chunks == 8 and profile.gpu_cache_chunks == 2
    cpu, storage = out["cpu"], out["storage"]
    assert cpu["kvgate_sim_cpu_hit_tokens_total"] == 96
    assert cpu["kvgate_sim_storage_read_tokens_total"] == cpu["kvgate_sim_gpu_hit_tokens_total"] \
        == cpu["kvgate_sim_storage_read_bytes_total"] == 0
    assert out["usage"]["prompt_tokens_details"]["cached_tokens"] == 96
    assert storage["kvgate_sim_cpu_hit_tokens_total"] == 0
    assert storage["kvgate_sim_storage_read_tokens_total"] == 96


def test_recompute_arm_has_no_storage_reads():
    async def go():
        async with sim() as (s, app):
            m0 = await metrics(s)
            first = ids_of(await stream(s, prompt=PROMPT, max_tokens=4))
            await s.post("/reset_prefix_cache")
            second = ids_of(await stream(s, prompt=PROMPT, max_tokens=4))
            async with s.get("/sim/info") as r:
                about = await r.json()
            return first, second, delta(m0, await metrics(s)), about

    first, second, d, about = run(go())
    assert first == second
    assert d["kvgate_sim_recomputed_tokens_total"] == 200
    assert d["kvgate_sim_storage_read_bytes_total"] == 0
    assert d["kvgate_sim_storage_read_tokens_total"] == 0
    assert d["kvgate_sim_storage_write_bytes_total"] == 0
    assert about["tier"] is None and about["simulator"] is True


def test_corrupted_chunks_change_the_output(tmp_path):
    async def go():
        async with sim(tmp_path) as (s, app):
            clean = ids_of(await stream(s, prompt=PROMPT, max_tokens=8))
            await app[ENGINE].tier.drain()
            await s.post("/reset_prefix_cache")
            async with s.post("/sim/faults", json={"corrupt_fraction": 1.0}) as r:
                assert r.status == 200
            m0 = await metrics(s)
            bad = ids_of(await stream(s, prompt=PROMPT, max_tokens=8))
            return clean, bad, delta(m0, await metrics(s))

    clean, bad, d = run(go())
    assert len(bad) == len(clean) == 8 and bad != clean
    assert d["kvgate_sim_storage_read_tokens_total"] == 96  # served, not detected or hidden


@pytest.mark.parametrize(("faults", "n", "failed"), [
    ({"error_every": 3}, 10, [3, 6, 9]),
    ({"error_fraction": 0.25}, 8, [4, 8]),
])
def test_http_500_faults_are_exact(faults, n, failed):
    async def go():
        async with sim(faults=FaultConfig(**faults)) as (s, _):
            statuses = []
            for i in range(n):
                path = "/v1/chat/completions" if i % 2 else "/v1/completions"
                body = {"messages": [{"role": "user", "content": "x"}]} if i % 2 else {
                    "prompt": "x"}
                async with s.post(path, json={**body, "max_tokens": 1}) as r:
                    assert r.headers[SIM_HEADER] == "1"
                    statuses.append((r.status, await r.json()))
            return statuses

    statuses = run(go())
    assert [i + 1 for i, (code, _) in enumerate(statuses) if code == 500] == failed
    assert all(code == 200 for code, _ in statuses if code != 500)
    assert "injected fault" in statuses[failed[0] - 1][1]["error"]["message"]


def test_dropped_stream_ends_without_done():
    async def go():
        async with sim(faults=FaultConfig(drop_every=2, drop_after_tokens=3)) as (s, _):
            events = await stream(s, prompt=PROMPT, max_tokens=6)  # request 1: whole
            got, error = [], None
            async with s.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 6,
                                                       "stream": True}) as r:
                try:
                    async for line in r.content:
                        if line.strip():
                            got.append(line.decode().strip())
                except aiohttp.ClientPayloadError as exc:
                    error = exc
            await stream(s, prompt=PROMPT, max_tokens=2)  # request 3: the server is fine
            with pytest.raises(aiohttp.ClientError):  # request 4, not streamed: no answer
                async with s.post("/v1/completions", json={"prompt": "x"}) as r:
                    await r.read()
            return events, got, error

    events, got, error = run(go())
    assert events[-1] == "[DONE]"
    assert len(got) == 3 and "data: [DONE]" not in got
    assert error is not None


def test_stall_pauses_the_stream():
    async def go():
        faults = FaultConfig(stall_every=1, stall_s=0.3, stall_after_tokens=2)
        async with sim(faults=faults) as (s, _):
            return await stream(s, prompt=PROMPT, max_tokens=4)

    events = run(go())
    # The pacing is judged on the due times the engine set, which no busy CPU moves (a token
    # written 2 ms late shortened the next gap below 0.3 s with both cores taken); the send
    # times only have to keep to them.
    due = [e["sim_due_ns"] for e in events[:4]]
    gaps = [(b - a) / 1e9 for a, b in zip(due, due[1:], strict=False)]
    assert gaps[1] >= 0.3 and gaps[0] < 0.1 and gaps[2] < 0.1
    assert all(e["sim_sent_ns"] >= e["sim_due_ns"] for e in events[:4])
    assert events[-1] == "[DONE]"


def test_prefills_share_one_compute_resource():
    long_prompt = list(range(4000))  # 0.2 s of prefill each at 20k tokens/s

    async def timed(s, salt):
        t0 = time.perf_counter()
        async with s.post("/v1/completions", json={"prompt": [salt, *long_prompt],
                                                   "max_tokens": 1, "stream": True}) as r:
            await r.content.readline()
            return time.perf_counter() - t0

    async def go():
        async with sim() as (s, _):
            return sorted(await asyncio.gather(timed(s, 1), timed(s, 2)))

    first, second = run(go())
    assert first >= 0.19 and second >= 0.39  # serialised, not concurrent


def test_decode_slows_with_the_batch():
    slow = TINY.model_copy(update={"decode_base_ms": 20.0, "decode_alpha": 1.0})

    async def go():
        async with sim(profile=slow) as (s, _):
            alone = await stream(s, prompt="a", max_tokens=3)
            both = await asyncio.gather(stream(s, prompt="b", max_tokens=6),
                                        stream(s, prompt="c", max_tokens=6))
            return alone, both

    def steps(events):
        due = [e["sim_due_ns"] for e in events if e != "[DONE]" and "sim_due_ns" in e]
        return [round((b - a) / 1e6) for a, b in zip(due, due[1:], strict=False)]

    alone, both = run(go())
    assert steps(alone) == [20, 20]
    assert 40 in steps(both[0]) and 40 in steps(both[1])  # two decoding: twice as slow


def test_models_health_and_metrics_format():
    async def go():
        async with sim() as (s, _):
            async with s.get("/v1/models") as r:
                listed = await r.json()
            async with s.get("/health") as r:
                health = (r.status, r.headers[SIM_HEADER])
            async with s.get("/metrics") as r:
                text = await r.text()
            async with s.get("/nowhere") as r:
                missing = (r.status, r.headers[SIM_HEADER])
            return listed, health, text, missing

    listed, health, text, missing = run(go())
    (model,) = listed["data"]
    assert model["id"] == "kvgate-sim-tiny" and "simulat" in model["note"]
    assert health == (200, "1") and missing == (404, "1")
    names = ["kvgate_sim_storage_read_bytes_total", "kvgate_sim_storage_read_tokens_total",
             "kvgate_sim_gpu_hit_tokens_total", "kvgate_sim_recomputed_tokens_total",
             "kvgate_sim_storage_write_bytes_total", "kvgate_sim_prompt_tokens_total",
             "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
             "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"]
    for name in names:
        assert f"# TYPE {name} counter" in text and f"# HELP {name} " in text
        assert f'{name}{{model_name="kvgate-sim-tiny"}} 0' in text
    assert "# TYPE vllm:num_requests_running gauge" in text
    assert '# TYPE kvgate_sim_pending_writes gauge' in text
    assert 'kvgate_sim_pending_writes{model_name="kvgate-sim-tiny"} 0' in text


@pytest.mark.parametrize("body", [
    {"prompt": []}, {"prompt": [-1]}, {"prompt": ["a"]}, {"prompt": "x", "max_tokens": 0},
    {"prompt": "x", "n": 2}, {"prompt": "x", "max_tokens": 10**6}, {"max_tokens": 3},
])
def test_bad_requests_are_400(body):
    async def go():
        async with sim() as (s, _), s.post("/v1/completions", json=body) as r:
            return r.status, await r.json()

    status, answer = run(go())
    assert status == 400 and answer["error"]["message"]


def test_faults_can_be_read_and_bad_ones_refused():
    async def go():
        async with sim() as (s, _):
            async with s.post("/sim/faults", json={"error_evry": 2}) as r:
                refused = r.status
            async with s.post("/sim/faults", json={"read_bytes_per_s": 1e6}) as r:
                assert r.status == 200
            async with s.get("/sim/faults") as r:
                return refused, await r.json()

    refused, faults = run(go())
    assert refused == 400 and faults["read_bytes_per_s"] == 1e6


def test_kv_dir_emptied_while_running_falls_back_to_recompute(tmp_path):
    async def go():
        async with sim(tmp_path) as (s, app):
            clean = ids_of(await stream(s, prompt=PROMPT, max_tokens=4))
            await app[ENGINE].tier.drain()
            await s.post("/reset_prefix_cache")
            shutil.rmtree(tmp_path / TINY.model_id)
            m0 = await metrics(s)
            again = ids_of(await stream(s, prompt=PROMPT, max_tokens=4))
            await app[ENGINE].tier.drain()
            return clean, again, delta(m0, await metrics(s))

    clean, again, d = run(go())
    assert again == clean
    assert d["kvgate_sim_storage_read_tokens_total"] == 0
    assert d["kvgate_sim_recomputed_tokens_total"] == 100
    assert d["kvgate_sim_storage_write_bytes_total"] == 6 * TINY.chunk_bytes  # rewritten


class FakeClock:
    """The clock seam without sleeping: sleep_until jumps straight to the time asked for."""

    def __init__(self):
        self.t = 0

    def now_ns(self) -> int:
        return self.t

    async def sleep_until(self, t_ns: int) -> None:
        self.t = max(self.t, t_ns)
        await asyncio.sleep(0)


def test_engine_timing_on_a_fake_clock():
    clock = FakeClock()
    engine = Engine(TINY, None, FaultConfig(), clock)

    async def go():
        pre = await engine.prefill(PROMPT)
        after_prefill = clock.t
        ticks = [due async for _, due in engine.paced(4, stall_at=2, stall_s=1.0)]
        clock.t = 0
        # Two prompts at once take turns on the one compute resource.
        await asyncio.gather(engine.prefill([1, *PROMPT]), engine.prefill([2, *PROMPT]))
        return pre, after_prefill, ticks, clock.t

    pre, after_prefill, ticks, both = run(go())
    assert after_prefill == 5_000_000  # 100 tokens at 20k tokens/s
    assert (pre.gpu_tokens, pre.storage_tokens, pre.recompute_tokens) == (0, 0, 100)
    step = 2_000_000  # decode_base_ms with one request decoding
    assert [t - ticks[0] for t in ticks] == [0, step, 2 * step + 10**9, 3 * step + 10**9]
    assert both == 2 * 5_050_000
    assert engine.decoding == 0 and engine.gpu.get(chunk_hashes(PROMPT, 16, engine.root)[0])
