"""The whole chain over real loopback HTTP: workload → load generator → simulator → metrics."""

import asyncio

import pytest
from aiohttp import web

from gates.inference import PhaseError, run_cold_recovery
from gates.inference.phases import settle
from gates.loadgen import Endpoint, LoadSettings, cold_recovery, summarize
from gates.proof import parse_metrics
from gates.sim.model import FaultConfig, get_profile
from gates.sim.server import build_app

TINY = get_profile("tiny")


def plan(seed=1, contexts=4):
    return cold_recovery(contexts=contexts, context_tokens=20 * TINY.chunk_tokens + 5,
                         question_tokens=8, output_tokens=6, seed=seed, vocab=TINY.vocab_size,
                         chunk_tokens=TINY.chunk_tokens, warmup=1, warmup_tokens=8)


async def serve_and_run(tier_dir, faults=None, workload=None, eviction="reset", **kw):
    app = build_app("tiny", tier_dir, faults)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        endpoint = Endpoint(url=f"http://127.0.0.1:{port}", model=TINY.model_id)
        return await run_cold_recovery(workload or plan(), [endpoint],
                                       LoadSettings(concurrency=2, stall_timeout=30),
                                       eviction=eviction, **kw)
    finally:
        await runner.cleanup()


def test_cold_recovery_probe_reads_the_contexts_kv_from_storage(tmp_path):
    result = asyncio.run(serve_and_run(tmp_path / "kv"))
    expected = plan().total_expected_kv_tokens
    assert result.engine == "kvgate-sim"
    assert result.storage_read_tokens() == expected
    assert result.storage_read_bytes() == expected * TINY.kv_bytes_per_token
    assert result.attribution[0].gpu_hit_tokens == 0
    assert all(r.ok for r in result.probe.records) and len(result.probe.records) == 4
    assert result.restore_gbps() > 0
    summary = summarize(result.probe.records, result.probe.wall)
    assert summary.outcomes["ok"] == 4 and summary.ttft.n == 4 and summary.tpot.n == 4


def test_recompute_arm_reads_nothing_from_storage(tmp_path):
    result = asyncio.run(serve_and_run(None))
    assert result.storage_read_bytes() in (0, None)
    assert result.attribution[0].recomputed_tokens >= plan().total_expected_kv_tokens


def test_without_eviction_the_gpu_cache_answers_not_storage(tmp_path):
    small = plan(contexts=2)  # 40 chunks: all fit the tiny profile's 64-chunk GPU cache
    result = asyncio.run(serve_and_run(tmp_path / "kv", workload=small, eviction="none"))
    assert result.storage_read_tokens() == 0
    assert result.attribution[0].gpu_hit_tokens == small.total_expected_kv_tokens


def test_corrupted_chunks_change_the_outputs_against_recompute(tmp_path):
    clean = asyncio.run(serve_and_run(None))
    corrupt = asyncio.run(serve_and_run(tmp_path / "kv", FaultConfig(corrupt_fraction=1.0)))
    by_id = {r.request_id: r.output_ids for r in clean.probe.records}
    assert all(r.output_ids for r in corrupt.probe.records)
    assert all(by_id[r.request_id] != r.output_ids for r in corrupt.probe.records)


def test_storage_restore_matches_recompute_when_nothing_is_corrupted(tmp_path):
    clean = asyncio.run(serve_and_run(None))
    restored = asyncio.run(serve_and_run(tmp_path / "kv"))
    by_id = {r.request_id: r.output_ids for r in clean.probe.records}
    assert all(by_id[r.request_id] == r.output_ids for r in restored.probe.records)


def test_http_500_faults_are_counted_exactly(tmp_path):
    result = asyncio.run(serve_and_run(tmp_path / "kv", FaultConfig(error_every=3)))
    every = [*[r for r in result.seed.records], *result.probe.records]
    failed = [r for r in every if r.outcome == "http_error"]
    assert failed and all(r.status == 500 for r in failed)


def test_a_dead_endpoint_is_a_phase_error_naming_the_url():
    # The scrapes only cost the proof; the eviction cannot be done, so the run stops there.
    endpoint = Endpoint(url="http://127.0.0.1:9", model="x")
    with pytest.raises(PhaseError, match="127.0.0.1:9/reset_prefix_cache"):
        asyncio.run(run_cold_recovery(plan(), [endpoint], LoadSettings()))


class Garbled:
    """A metrics source that serves text no parser accepts, naming the URL and line."""

    async def scrape(self, url):
        try:
            return parse_metrics('vllm:prompt_tokens_total{a="1" 3\n')
        except ValueError as exc:
            raise PhaseError(f"{url}: {exc}") from None


def test_a_garbled_exposition_costs_the_proof_not_the_load_run(tmp_path):
    result = asyncio.run(serve_and_run(tmp_path / "kv", engine="kvgate-sim", source=Garbled()))
    assert "/metrics: line 1" in result.metrics_error
    assert len(result.probe.records) == 4 and all(r.ok for r in result.probe.records)


class Scripted:
    """A metrics source that serves one snapshot per scrape from a list, then the last one."""

    def __init__(self, texts):
        self.texts, self.scrapes = list(texts), 0

    async def scrape(self, url):
        text = self.texts[min(self.scrapes, len(self.texts) - 1)]
        self.scrapes += 1
        return parse_metrics(text)


def sim_counters(written, pending):
    return ("# TYPE kvgate_sim_storage_write_bytes_total counter\n"
            f"kvgate_sim_storage_write_bytes_total {written}\n"
            "# TYPE kvgate_sim_pending_writes gauge\n"
            f"kvgate_sim_pending_writes {pending}\n")


def test_settle_waits_while_the_simulator_still_has_writes_queued():
    # Counters that hold still say nothing while the simulator says 2 writes are queued: the
    # quiet polls start only once it says 0 (then three more polls, quiet_for / 3 apart).
    source = Scripted([sim_counters(100, 2)] * 5 + [sim_counters(100, 0)])
    waited = asyncio.run(settle(source, ["http://x/metrics"], "kvgate-sim", quiet_for=0.3))
    assert source.scrapes == 5 + 1 + 3
    assert waited >= 8 * 0.1


def test_settle_takes_the_arms_quiet_time():
    source = Scripted([sim_counters(100, 0)])
    waited = asyncio.run(settle(source, ["http://x/metrics"], "kvgate-sim", quiet_for=0.6))
    assert source.scrapes == 4 and waited >= 3 * 0.2  # three intervals of 0.6 / 3 s
    moving = Scripted([sim_counters(n, 0) for n in (1, 2, 3)] + [sim_counters(3, 0)])
    asyncio.run(settle(moving, ["http://x/metrics"], "kvgate-sim", quiet_for=0.3))
    assert moving.scrapes == 3 + 3  # quiet counts from the last change


def test_the_page_cache_drop_says_the_quiet_time_it_waited_for(tmp_path):
    kv = tmp_path / "kv"
    result = asyncio.run(serve_and_run(kv, write_quiet=0.45, kv_dir=kv, engine="kvgate-sim"))
    assert "held still for 0.15 s" in result.page_cache
