"""The llama.cpp slot protocol against a scripted llama-server double over real loopback HTTP.

The double replays a stream recorded from the real server and keeps slot files the way
llama-server does (bare names under the slot-save path); the real server runs in
tests/test_llamacpp_e2e.py.
"""

import asyncio
import json
from pathlib import Path

import pytest
from aiohttp import web

from gates.engines.llamacpp import run_slot_cold_recovery
from gates.engines.llamacpp.cold import slot_attribution, slot_file
from gates.engines.llamacpp.http import parse_slot_result
from gates.inference import PhaseError
from gates.loadgen import Endpoint, LoadSettings, cold_recovery
from gates.proof import parse_metrics

DATA = Path(__file__).parent / "data" / "llamacpp"
RESTORE_DELAY = 0.2  # s the double takes to restore: it must show in the probe's TTFT


class FakeLlamaServer:
    """Slots, slot files, one recorded stream and the two llamacpp: counters."""

    def __init__(self, kv_dir, slots=2):
        self.kv_dir, self.slots, self.calls = kv_dir, slots, []
        self.held = {}  # slot -> tokens in it
        self.prompt, self.cached = 0, 0

    def app(self):
        app = web.Application()
        app.router.add_get("/props", self.props)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_post("/slots/{slot}", self.slot)
        app.router.add_post("/v1/completions", self.complete)
        return app

    async def props(self, request):
        return web.json_response({"total_slots": self.slots})

    async def metrics(self, request):
        return web.Response(text=f"llamacpp:prompt_tokens_total {self.prompt}\n"
                                 f"llamacpp:prompt_tokens_cached_total {self.cached}\n")

    async def slot(self, request):
        slot, action = int(request.match_info["slot"]), request.query["action"]
        body = await request.json()
        self.calls.append((action, slot, body.get("filename")))
        path = self.kv_dir / body.get("filename", "none")
        if action == "save":
            path.write_bytes(b"k" * 16 * self.held[slot])
            return web.json_response({"id_slot": slot, "filename": path.name,
                                      "n_saved": self.held[slot],
                                      "n_written": path.stat().st_size})
        if action == "restore":
            await asyncio.sleep(RESTORE_DELAY)
            if not path.exists():
                return web.json_response({"error": {"message": "no file"}}, status=400)
            self.held[slot] = path.stat().st_size // 16
            return web.json_response({"id_slot": slot, "filename": path.name,
                                      "n_restored": self.held[slot],
                                      "n_read": path.stat().st_size})
        self.held.pop(slot, None)
        return web.json_response({"id_slot": slot, "n_erased": 0})

    async def complete(self, request):
        body = await request.json()
        self.calls.append(("complete", body["id_slot"], body["cache_prompt"]))
        reuse = self.held.get(body["id_slot"], 0) if body["cache_prompt"] else 0
        self.cached += reuse
        self.prompt += len(body["prompt"]) - reuse
        self.held[body["id_slot"]] = len(body["prompt"])
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write((DATA / "probe-stream.txt").read_bytes())
        return response


async def serve(kv_dir, tier=True, slots=2, concurrency=2, contexts=3, erase=True,
                server=FakeLlamaServer):
    fake = server(kv_dir, slots)
    runner = web.AppRunner(fake.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    plan = cold_recovery(contexts, 64, 8, 8, 0, 4296, chunk_tokens=1, warmup=1)
    try:
        cold = await run_slot_cold_recovery(
            plan, [Endpoint(url=f"http://127.0.0.1:{port}")],
            LoadSettings(concurrency=concurrency, stall_timeout=30),
            kv_dir=kv_dir if tier else None, erase=erase)
    finally:
        await runner.cleanup()
    return cold, fake


def test_the_probe_restores_each_context_from_its_slot_file(tmp_path):
    cold, fake = asyncio.run(serve(tmp_path))
    actions = [c[0] for c in fake.calls]
    assert actions.count("save") == 3 and actions.count("restore") == 3
    assert actions.index("erase") > max(i for i, a in enumerate(actions) if a == "save")
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"ctx-000{i}.bin" for i in range(3)]
    probe = cold.probe.records
    assert all(r.ok for r in probe) and len(probe) == 3
    assert all(r.ttft >= RESTORE_DELAY for r in probe)  # TTFT runs from the restore request
    assert all(r.output_ids[:2] == [340, 3394] for r in probe)
    a = cold.attribution[0]
    assert a.storage_read_tokens == 3 * 64 and a.storage_read_bytes == 3 * 64 * 16
    assert a.gpu_hit_tokens == 0 and a.cached_tokens == 3 * 64
    assert cold.storage_read_tokens() == cold.expected_kv_tokens == 3 * 64
    assert "posix_fadvise(DONTNEED) after fsync on 3 KV files" in cold.page_cache
    assert set(cold.probe_read_bytes) == {f"probe-ctx-000{i}" for i in range(3)}


def test_without_a_tier_nothing_is_saved_and_every_probe_recomputes(tmp_path):
    cold, fake = asyncio.run(serve(tmp_path, tier=False))
    assert not [c for c in fake.calls if c[0] != "complete"]
    assert all(cache_prompt is False for _, _, cache_prompt in fake.calls)
    assert cold.attribution[0].storage_read_tokens == 0 and cold.page_cache == ""
    assert "cache_prompt=false" in cold.eviction and not list(tmp_path.iterdir())


def test_eviction_none_leaves_the_slots_but_the_probe_still_restores(tmp_path):
    cold, fake = asyncio.run(serve(tmp_path, erase=False))
    actions = [c[0] for c in fake.calls]
    assert "erase" not in actions and actions.count("restore") == 3
    assert cold.eviction.startswith("no eviction")


def test_fewer_slots_than_the_concurrency_is_refused(tmp_path):
    with pytest.raises(PhaseError, match="1 slots, fewer than concurrency 2.*--parallel 2"):
        asyncio.run(serve(tmp_path, slots=1))


class EndlessProps(FakeLlamaServer):
    """A /props that never ends (not llama-server, or a broken proxy in front of it)."""

    async def props(self, request):
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        await response.write(b'{"total_slots": 2, "pad": "')
        for _ in range(64):
            await response.write(b"x" * 65536)
        return response


def test_an_endless_props_answer_is_refused_at_its_cap_naming_the_url(tmp_path):
    with pytest.raises(PhaseError, match=r"GET http://127\.0\.0\.1:\d+/props: the answer is "
                                         r"larger than 1,048,576 bytes"):
        asyncio.run(serve(tmp_path, server=EndlessProps))


def test_slot_attribution_from_recorded_counters_and_restore():
    before = parse_metrics((DATA / "metrics-before-probe.txt").read_text())
    after = parse_metrics((DATA / "metrics-after-probe.txt").read_text())
    restore = parse_slot_result((DATA / "slot-restore.json").read_text(), "u")
    a = slot_attribution(before, after, [restore])
    assert (a.storage_read_tokens, a.storage_read_bytes) == (1024, 16793840)
    assert a.cached_tokens == 1024 and a.gpu_hit_tokens == 0 and a.recomputed_tokens == 16
    assert a.prompt_tokens == 1040
    assert "n_read" in a.matched["storage_read_bytes"][0]
    assert "storage_read_tokens" not in a.unknown


def test_slot_file_is_a_bare_name_per_context():
    plan = cold_recovery(2, 16, 4, 4, 0, 4296, chunk_tokens=1, warmup=0)
    names = [slot_file(r) for r in plan.phase("probe")]
    assert names == ["ctx-0000.bin", "ctx-0001.bin"]
    assert json.dumps(names).count("/") == 0
