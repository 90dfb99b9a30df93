"""The engine's own attribution of its hits to tiers outranks every tier-blind counter (issue #43
case 6): tokens it names memory or peer are never storage; only its unattributed remainder may be
claimed by a blind counter, bounded by what that counter saw beyond the attributed tiers; a
blind counter that counted a memory tier in an unknown amount proves nothing. Recordings in
tests/data/metrics (README.md says how each was made)."""

from __future__ import annotations

from _expositions import render
from hypothesis import given, settings
from hypothesis import strategies as st
from test_attribution import DATA, PROBE, merged, run, scrape

from gates.proof import attribute, parse_metrics


def test_vllm_cpu_tier_hits_with_one_unattributed_token_are_not_storage():
    # The OffloadingConnector put 8,191 tokens on host and left 1 uncovered: the blind
    # external_kv_transfer counter saw all 8,192, and may claim only the 1.
    a = run("vllm-native", "vllm-native", "vllm-native-cpu-tier")
    assert a.cpu_hit_tokens == 8191
    assert a.storage_read_tokens == 1
    derived = a.matched["storage_read_tokens"][-1]
    assert "host 8,191 (memory)" in derived and "external_unspecified 1 (unattributed)" in derived
    assert "of the 1 unattributed tokens 1 claimed by the tier-blind" in derived
    assert "8,192 seen less 8,191 attributed" in derived
    assert a.caveats["storage_read_tokens"].startswith("tier-blind: 1 of the 1 tokens ")
    assert a.storage_read_bytes is None  # no promotion from the fs tier


def test_vllm_an_unattributed_remainder_no_blind_counter_saw_is_not_storage():
    # The blind counter saw only what the engine attributed to host: nothing is left over.
    text = (DATA / "vllm-native-cpu-tier.after.prom").read_text().replace(
        'source="external_kv_transfer"} 8192.0', 'source="external_kv_transfer"} 8191.0')
    a = attribute("vllm-native", scrape("vllm-native.before"), parse_metrics(text))
    assert a.storage_read_tokens == 0
    assert "of the 1 unattributed tokens 0 claimed" in a.matched["storage_read_tokens"][-1]
    assert not a.caveats["storage_read_tokens"].startswith("tier-blind")


def test_sglang_host_hits_are_not_claimed_by_the_per_rank_prefetch_counter():
    a = run("sglang", "sglang", "sglang-host")
    assert a.cpu_hit_tokens == PROBE
    # The engine names no storage tier for this phase: not exposed, and the per-rank
    # prefetched_tokens (8,192 on tp_rank 0) may not answer in its place.
    assert a.storage_read_tokens is None and "storage_read_tokens" in a.unknown
    assert a.rank_reads == {} and "storage_read_tokens" not in a.matched


def test_sglang_storage_and_host_hits_split_as_the_engine_says():
    text = (DATA / "sglang-host.after.prom").read_text().replace(
        'sglang:cached_tokens_total{cache_source="host",engine_type="unified",'
        'model_name="Qwen/Qwen3-8B"} 8192.0',
        'sglang:cached_tokens_total{cache_source="host",engine_type="unified",'
        'model_name="Qwen/Qwen3-8B"} 7000.0\n'
        'sglang:cached_tokens_total{cache_source="storage",engine_type="unified",'
        'model_name="Qwen/Qwen3-8B"} 1192.0')
    a = attribute("sglang", scrape("sglang.before"), parse_metrics(text))
    assert (a.storage_read_tokens, a.cpu_hit_tokens) == (1192, 7000)


def test_sglang_requests_without_a_split_are_the_only_tokens_the_prefetch_counter_may_claim():
    # cache_source="total": SGLang's fallback for a request with no per-source details.
    def total(t: str, host: float, rest: float) -> str:
        return t.replace(
            'sglang:cached_tokens_total{cache_source="storage",engine_type="unified",'
            'model_name="Qwen/Qwen3-8B"} 8192.0',
            'sglang:cached_tokens_total{cache_source="host",engine_type="unified",'
            f'model_name="Qwen/Qwen3-8B"}} {host}\n'
            'sglang:cached_tokens_total{cache_source="total",engine_type="unified",'
            f'model_name="Qwen/Qwen3-8B"}} {rest}')
    after = (DATA / "sglang.after.prom").read_text()
    a = attribute("sglang", scrape("sglang.before"), parse_metrics(total(after, 8000.0, 192.0)))
    assert a.storage_read_tokens == 192  # not the 8,192 prefetched_tokens saw
    assert a.caveats["storage_read_tokens"].startswith("tier-blind: 192 of the 192 tokens")
    assert a.rank_reads in ({}, {"tp_rank=0": 192})


def _mp(after: str, l2_name: str) -> str:
    return after.replace('lmcache_mp_l2_load_completed_requests_total{l2_name="fs"} 1.0',
                         f'lmcache_mp_l2_load_completed_requests_total{{l2_name="fs"}} 1.0\n'
                         f'lmcache_mp_l2_load_completed_requests_total{{l2_name="{l2_name}"}} '
                         "1.0")


def test_lmcache_mp_l2_tokens_prove_nothing_once_a_memory_l2_adapter_served():
    after = (DATA / "lmcache-mp.after.prom").read_text()
    for l2_name in ("p2p", "mooncake_store", "valkey"):
        a = attribute("lmcache", scrape("lmcache-mp.before"), parse_metrics(_mp(after, l2_name)))
        assert a.storage_read_tokens is None
        assert 'peer 1' in a.unclassified["storage_read_tokens"]
        assert "lmcache_mp_lookup_hit_l2_tokens_total" in a.unclassified["storage_read_tokens"]
    # A storage adapter beside fs (s3) leaves the L2 tokens standing, with their caveat.
    a = attribute("lmcache", scrape("lmcache-mp.before"), parse_metrics(_mp(after, "s3")))
    assert a.storage_read_tokens == PROBE
    assert a.caveats["storage_read_tokens"].startswith("tier-blind: ")


def test_kvbm_matched_tokens_prove_nothing_once_host_onboards_moved():
    text = (DATA / "dynamo-kvbm.after.prom").read_text().replace(
        "kvbm_onboard_blocks_h2d 0", "kvbm_onboard_blocks_h2d 64")
    a = attribute("dynamo-kvbm", scrape("dynamo-kvbm.before"), parse_metrics(text))
    assert a.storage_read_tokens is None
    assert "kvbm_onboard_blocks_h2d 64" in a.unclassified["storage_read_tokens"]
    # With the block size the d2d blocks say how many came from disk: that stands.
    before = merged("dynamo-kvbm.before", "dynamo-frontend.before")
    after = merged("dynamo-kvbm.after", "dynamo-frontend.after")
    assert attribute("dynamo-kvbm", before, after).storage_read_tokens == 512 * 16


TIERS = ("device", "host", "p2p", "disk", "external_unspecified")
_counts = st.integers(min_value=0, max_value=10_000)


@st.composite
def _engines(draw):
    """1-3 DP engines' phase deltas: the engine's split, and what the blind counters saw."""
    out = []
    for _ in range(draw(st.integers(1, 3))):
        split = {t: draw(_counts) for t in TIERS}
        external = sum(v for t, v in split.items() if t != "device")
        # The blind counters count at other moments (admission vs first output): they may see
        # more or fewer than the split adds up to.
        out.append((split, external + draw(st.integers(-external, 10_000)),
                    external + draw(st.integers(-external, 10_000))))
    return out


def _scrape(engines, after: bool) -> str:
    rows = [{"vllm:prompt_tokens_cached_by_source":
             {t: float(split[t] if after else 0) for t in TIERS},
             "vllm:prompt_tokens_by_source": {"external_kv_transfer": float(b if after else 0)},
             "vllm:external_prefix_cache_hits": {"": float(h if after else 0)}}
            for split, b, h in engines]
    return render(rows)


@settings(max_examples=300, deadline=None)
@given(_engines(), st.sampled_from(["vllm", "vllm-native", "lmcache", "dynamo-kvbm"]))
def test_storage_claimed_never_exceeds_what_the_engine_left_unattributed(engines, engine):
    a = attribute(engine, parse_metrics(_scrape(engines, False)),
                  parse_metrics(_scrape(engines, True)))
    ceiling = [split["disk"] + split["external_unspecified"] for split, _, _ in engines]
    if a.storage_read_tokens is not None:
        assert a.storage_read_tokens <= sum(ceiling)
        # ... and never more than the blind counter saw beyond the attributed tiers, plus disk.
        blind = [split["disk"] + max(0, b - split["host"] - split["p2p"] - split["disk"])
                 for split, b, _ in engines]
        assert a.storage_read_tokens <= sum(blind)
    for rank, value in a.rank_reads.items():
        assert value <= ceiling[int(rank.split("=")[1])]


def test_a_tier_the_rules_cannot_place_leaves_only_its_quantity_unread():
    from _expositions import CACHED_BY_SOURCE, engine_counts

    def engine(prompt: float, nvme: float) -> dict:
        counts = engine_counts(prompt=prompt, compute=64, disk=100, host=50)
        counts[CACHED_BY_SOURCE[0]]["nvme9"] = nvme  # a source no vLLM release names
        return counts

    a = attribute("vllm", parse_metrics(render([engine(1000, 0)])),
                  parse_metrics(render([engine(2000, 8)])))
    assert a.unclassified == {"storage_read_tokens": (
        'vllm[:_]prompt_tokens_cached_by_source_total: source="nvme9" moved in the probe, and '
        "the engine's source read for kvgate does not say whether that tier is storage, memory "
        "or another host's memory")}
    assert a.storage_read_tokens is None and "storage_read_tokens" not in a.errors
    # The quantities after it are still read.
    assert (a.prompt_tokens, a.gpu_hit_tokens, a.cpu_hit_tokens) == (1000, 0, 0)
