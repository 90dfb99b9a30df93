"""The simulator sends each token's top-k logprobs in vLLM's format (#43 case 2), and G3's
correctness rule holds on them: the real simulator over loopback, the real load generator and
the real cold-recovery chain; a correct restore PASSes, a corrupted one FAILs, never excused."""

import asyncio
import json

from test_phases import TINY, plan
from test_sim_server import ids_of, sim, stream

from gates.core.verdicts import Outcome
from gates.inference import Repetition, correctness, run_cold_recovery
from gates.loadgen import Endpoint, LoadSettings
from gates.loadgen.chunks import classify
from gates.sim.model import FaultConfig
from gates.sim.server import build_app

PROMPT = list(range(1000, 1100))


def test_the_stream_carries_vllm_s_completion_logprobs_by_token_id():
    async def go():
        async with sim() as (s, _):
            return await stream(s, prompt=PROMPT, max_tokens=5, logprobs=2,
                                return_tokens_as_token_ids=True)
    events = run(go())
    chunks = [e for e in events if isinstance(e, dict) and e["choices"]]
    assert len(chunks) == 5
    offset = 0
    for e in chunks:
        choice = e["choices"][0]
        lp, token = choice["logprobs"], choice["token_ids"][0]
        assert set(lp) == {"text_offset", "token_logprobs", "tokens", "top_logprobs"}
        assert lp["tokens"] == [f"token_id:{token}"] and lp["text_offset"] == [offset]
        offset += len(choice["text"])
        top = lp["top_logprobs"][0]
        assert len(top) == 2 and next(iter(top)) == f"token_id:{token}"
        assert lp["token_logprobs"][0] == top[f"token_id:{token}"]
        first, second = sorted(top.values(), reverse=True)
        assert -1.5 <= first < -0.7 and first - second >= 1.25  # never a near-tie
        parsed = classify(json.dumps(e))  # the load generator's own reading
        assert parsed.top_logprobs[0][0] == (token, first)


def test_logprobs_are_sent_only_when_asked_and_keyed_by_text_otherwise():
    async def go():
        async with sim() as (s, _):
            plain = await stream(s, prompt=PROMPT, max_tokens=2)
            text = await stream(s, prompt=PROMPT, max_tokens=2, logprobs=1)
            async with s.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 2,
                                                       "logprobs": 21}) as r:
                refused = r.status, await r.text()
            return plain, text, refused
    plain, text, refused = run(go())
    assert all(e["choices"][0]["logprobs"] is None for e in plain if e != "[DONE]" and
               e["choices"])
    keys = [next(iter(e["choices"][0]["logprobs"]["top_logprobs"][0]))
            for e in text if e != "[DONE]" and e["choices"]]
    assert keys and all(not k.startswith("token_id:") for k in keys)
    assert refused[0] == 400 and "logprobs" in refused[1]


def test_equal_outputs_have_equal_logprobs_whatever_served_the_kv():
    async def go():
        async with sim() as (s, _):
            a = await stream(s, prompt=PROMPT, max_tokens=6, logprobs=2,
                             return_tokens_as_token_ids=True)
            b = await stream(s, prompt=PROMPT, max_tokens=6, logprobs=2,  # the GPU cache now
                             return_tokens_as_token_ids=True)
            return a, b
    a, b = run(go())
    assert ids_of(a) == ids_of(b)
    assert [e["choices"][0]["logprobs"] for e in a if e != "[DONE]" and e["choices"]] == \
        [e["choices"][0]["logprobs"] for e in b if e != "[DONE]" and e["choices"]]


async def _cold(tier_dir, faults=None):
    """One cold recovery on the real simulator, asked for output detail as G3 asks it."""
    from aiohttp import web
    app = build_app("tiny", tier_dir, faults)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        endpoint = Endpoint(url=f"http://127.0.0.1:{port}", model=TINY.model_id)
        return await run_cold_recovery(plan(contexts=8), [endpoint], LoadSettings(
            concurrency=2, stall_timeout=30, output_detail=True), eviction="reset")
    finally:
        await runner.cleanup()


def _rep(arm, cold):
    records = cold.probe.records
    return Repetition(arm=arm, concurrency=1, repetition=0, ttfts=[1.0], output_throughput=1.0,
                      sent=len(records), errors=0,
                      outputs={r.request_id: r.output_ids for r in records},
                      logprobs={r.request_id: r.output_logprobs for r in records},
                      top_logprobs={r.request_id: r.output_top_logprobs for r in records})


def test_a_correct_restore_passes_and_a_corrupted_one_fails_with_top_k(tmp_path):
    recompute = _rep("recompute", run(_cold(None)))
    restored = _rep("candidate", run(_cold(tmp_path / "kv")))
    corrupted = _rep("candidate", run(_cold(tmp_path / "bad", FaultConfig(corrupt_fraction=1.0))))
    for rep in (recompute, restored, corrupted):  # every token's top-2 reached the record
        assert all(len(t) == 2 for tops in rep.top_logprobs.values() for t in tops)
        assert all(len(rep.top_logprobs[r]) == len(ids) for r, ids in rep.outputs.items())
    ok = correctness(restored, recompute, 6, 0.1, 0.02, 25.0)
    assert ok.outcome is Outcome.PASS and ok.value == 0, ok.note
    assert "8 of 8 probed contexts matched token for token; largest logprob gap 0.0000" in \
        ok.note
    bad = correctness(corrupted, recompute, 6, 0.1, 0.02, 25.0)
    assert bad.outcome is Outcome.FAIL and bad.value == 8, bad.note
    assert "near-tie, numerics" not in bad.note


def run(coro):
    return asyncio.run(coro)
