"""Adapter rules of the engines that run inside vLLM: vLLM itself, its native offload tiers, and
LMCache. Every name, label and label value is cited beside its rule (repository and path), and
in tests/data/metrics/README.md. Pure data.
"""

from __future__ import annotations

from .rules import Rule, rule
from .split import Blind, Split
from .tiers import STORAGE

# Names as the engines' sources spell them. The one tolerance: prometheus_client's OpenMetrics
# output with its default escaping turns ':' into '_' on sample lines
# (prometheus/client_python#1177), so a scraper asking for OpenMetrics sees "vllm_...".
_V = "vllm[:_]"
_L = "lmcache[:_]"

# vLLM 0.32.0 (vllm-project/vllm @5df63a720): every family is labelled model_name and engine,
# engine = the data-parallel engine index (vllm/v1/metrics/loggers.py PrometheusStatLogger;
# vllm/v1/engine/async_llm.py). DP engines serve different requests; no label names a TP rank.
_ENGINE = ("engine",)
_ADMISSION = ("counted before the transfer: vLLM fixes the connector's hit count when the "
              "scheduler admits the request and does not correct it when the load fails "
              "(vllm/v1/core/sched/scheduler.py, vllm/v1/metrics/stats.py)")
_BLIND = ("tier-blind: {name} counts every token a KV connector loaded, from its DRAM tier "
          "or from storage alike (vllm/v1/metrics/loggers.py); ")
# The tier that served a hit: CacheHitSource (vllm/v1/metrics/cache_hit_source.py, 0.32.0
# @5df63a720 and 0.33.0 @4ba787ec9 alike), classified in tiers ("vllm.cache_hit_source": only
# disk is storage). device is the GPU prefix cache (loggers.py adds prefix_cache_stats.hits to
# it); the others are what a KV connector loaded, split per request by its
# get_external_cache_hit_sources (kv_connector/v1/base.py: the default names the connector's
# _cache_hit_source, external_unspecified unless it sets one; ExampleConnector and LMCache's
# set none). A request whose split does not add up is counted external_unspecified whole
# (stats.py PrefixCacheStats.record), and the OffloadingConnector leaves uncovered tokens
# external_unspecified (offloading/scheduler.py get_external_cache_hit_sources): the
# unattributed remainder, which split.py lets a tier-blind counter claim and nothing more.
_DISK = rule(f"{_V}prompt_tokens_cached_by_source_total", tier="source",
             space="vllm.cache_hit_source", cls=STORAGE, split=_ENGINE, caveat=_ADMISSION)
# The connector's hits the engine did attribute: every blind counter below counts them too.
_NAMED = rule(f"{_V}prompt_tokens_cached_by_source_total", source="host|p2p|disk",
              split=_ENGINE)
_EXTERNAL = [
    # vllm/v1/metrics/loggers.py, source values from vllm/v1/metrics/stats.py ALL_SOURCES
    # ("vllm.source" in tiers): external_kv_transfer is whatever the connector loaded.
    rule(f"{_V}prompt_tokens_by_source_total", source="external_kv_transfer", split=_ENGINE,
         caveat=_BLIND.format(name="prompt_tokens_by_source{external_kv_transfer}") +
         _ADMISSION),
    # vllm/v1/metrics/loggers.py: connector_prefix_cache_stats.hits, the same requests whose
    # hits cached_by_source splits (stats.py PrefixCacheStats.record).
    rule(f"{_V}external_prefix_cache_hits_total", split=_ENGINE,
         caveat=_BLIND.format(name="external_prefix_cache_hits") + _ADMISSION),
]
VLLM_SPLIT = Split(tiers=_DISK, blind=[Blind(rule=r, minus=[_NAMED]) for r in _EXTERNAL])
VLLM: dict[str, list[Rule]] = {
    "prompt_tokens": [rule(f"{_V}prompt_tokens_total", split=_ENGINE)],  # v1/metrics/loggers.py
    # prompt_tokens_by_source is counted once per request, at its first admission (stats.py
    # PrefillStats); prefix_cache_hits only at admission too, without the per-source split.
    "gpu_hit_tokens": [rule(f"{_V}prompt_tokens_by_source_total", source="local_cache_hit",
                            split=_ENGINE),
                       rule(f"{_V}prompt_tokens_cached_by_source_total", source="device",
                            split=_ENGINE),
                       rule(f"{_V}prefix_cache_hits_total", split=_ENGINE)],  # loggers.py
    "storage_read_tokens": [_DISK, *_EXTERNAL],
    "recomputed_tokens": [  # vllm/v1/metrics/stats.py ALL_SOURCES
        rule(f"{_V}prompt_tokens_by_source_total", source="local_compute", split=_ENGINE)],
    "cached_tokens": [rule(f"{_V}prompt_tokens_cached_total", split=_ENGINE)],  # loggers.py
    # The CPU (host DRAM) tier's hits, where the connector names the tier: CacheHitSource.HOST
    # (vllm/v1/metrics/cache_hit_source.py); a cold probe of the storage must show ~0.
    "cpu_hit_tokens": [rule(f"{_V}prompt_tokens_cached_by_source_total", source="host",
                            split=_ENGINE)],
}

# vLLM native offload with TieringOffloadingSpec: tier = "0:primary" (the CPU tier, lookups
# only) or f"{i + 1}:{type}" for secondary tier i (vllm/v1/kv_offload/tiering/metrics.py),
# classified in tiers ("vllm.tier": fs and obj are storage; example is a dict in memory, p2p
# another instance's memory, an out-of-tree type unknown). The tiering counters are created
# on the first job (OffloadingConnectorStats.increase_counter): absent before it.
_TIER = {"tier": "tier", "space": "vllm.tier", "cls": STORAGE, "lazy": True}
VLLM_NATIVE: dict[str, list[Rule]] = {
    **VLLM,
    # Bytes promoted from a secondary tier into the CPU tier, added when the job completed:
    # chunks x the CPU tier's chunk stride, logical bytes, not device I/O
    # (vllm/v1/kv_offload/tiering/metrics.py, tiering/manager.py). The deprecated
    # kv_offload_total_bytes{transfer_type} only ever says CPU_to_GPU / GPU_to_CPU
    # (distributed/kv_transfer/kv_connector/v1/offloading/metrics.py): no storage there.
    "storage_read_bytes": [rule(f"{_V}kv_offload_tiering_read_bytes_total", **_TIER)],
    "storage_write_bytes": [rule(f"{_V}kv_offload_tiering_write_bytes_total", **_TIER)],
    # Failed promotions (reads), failed cascades (writes: chunks the probe will then miss), and
    # promotions the CPU tier had no room for (no tier label) (vllm/v1/kv_offload/tiering/
    # base.py names, tiering/spec.py labels).
    "storage_read_failures": [rule(
        f"{_V}kv_offload_tiering_(?:promotion_job|cascade_job|promotion_allocation)"
        "_failures_total", lazy=True)],
}

# LMCache 0.5.6 in vLLM's process (LMCache/LMCache lmcache/observability.py PrometheusLogger):
# labels model_name, worker_id, role, served_model_name (the set grew over 0.3.x; matched by
# name, not by set); worker_id = vLLM's parallel_config.rank, a global rank
# (lmcache/integration/vllm/vllm_service_factory.py), and each rank reads its own KV shard.
# No counter tells its CPU, disk and remote backends apart (#3752; PR #3919 is not merged).
_WORKER = ("worker_id",)
_HIT = ("tier-blind: lmcache:num_hit_tokens counts tokens served by any LMCache backend, its "
        "CPU (DRAM) backend included, and with MLA models ranks other than 0 count rank 0's "
        "broadcast (lmcache/observability.py, lmcache/v1/cache_engine.py)")
# LMCache multiprocess mode (`lmcache server`, its own /metrics on --http-port, default 8080):
# OpenTelemetry instruments, "." -> "_", unit spliced in, counters "_total"
# (lmcache/v1/mp_observability/subscribers/metrics/). L2 is the storage tier behind L1 (DRAM).
_L2 = ("tier-blind: lmcache_mp_lookup_hit_l2_tokens adds every L2 adapter up (it has no "
       "l2_name), memory ones (p2p, valkey, mooncake_store) included "
       "(lmcache/v1/mp_observability/subscribers/metrics/lookup.py)")
# Tokens whose chunks landed in L1 from L2, counted after the L2 read (lookup.py); an
# OpenTelemetry counter exports no series before its first add: absent until then.
_L2_TOKENS = rule("lmcache_mp_lookup_hit_l2_tokens_total", caveat=_L2, lazy=True)
# Which L2 adapters served: load tasks completed per adapter type, l2_name = the adapter's
# registered type name (subscribers/metrics/l2.py lmcache_mp.l2_load_completed, unit
# requests; storage_controllers/prefetch_controller.py), classified in tiers
# ("lmcache.l2_name"). Tasks, not tokens: a memory adapter that moved voids the L2 tokens.
_L2_LOADS = rule("lmcache_mp_l2_load_completed_requests_total", tier="l2_name",
                 space="lmcache.l2_name", cls=STORAGE, lazy=True)
# Of lookup_hit, the tokens L1 (DRAM) already held (lookup.py lmcache_mp.lookup_hit_l1): the
# MP server's own attribution to memory, which vLLM sees as external_unspecified.
_L1_TOKENS = rule("lmcache_mp_lookup_hit_l1_tokens_total", lazy=True)
_LM_HIT = rule(f"{_L}num_hit_tokens_total", shard=_WORKER, caveat=_HIT)
LMCACHE_SPLIT = Split(tiers=_DISK, blind=[
    Blind(rule=_L2_TOKENS, void=[_L2_LOADS]), Blind(rule=_LM_HIT),
    *(Blind(rule=r, minus=[_NAMED, _L1_TOKENS]) for r in _EXTERNAL)])
LMCACHE: dict[str, list[Rule]] = {
    **VLLM,
    "storage_read_tokens": [_DISK, _L2_TOKENS, _LM_HIT, *_EXTERNAL],
    # RemoteBackend connectors only (storage_backend/connector/instrumented_connector.py):
    # 0 for the local disk, CPU and GDS backends. Each worker reads its own shard's bytes:
    # the workers' bytes add up (split), where their tokens do not (shard).
    "storage_read_bytes": [rule(f"{_L}num_remote_read_bytes_total", split=_WORKER)],
    "storage_write_tokens": [rule(
        f"{_L}num_stored_tokens_total", shard=_WORKER,
        caveat="counted before the transfer: lmcache:num_stored_tokens counts the tokens "
               "store() was given, before any backend wrote them (lmcache/v1/cache_engine.py)")],
    "storage_write_bytes": [rule(f"{_L}num_remote_write_bytes_total", split=_WORKER)],
    # L2 chunks stored (lmcache/v1/mp_observability/subscribers/metrics/l2.py).
    "storage_write_blocks": [rule("lmcache_mp_l2_store_completed_objects_chunks_total",
                                  lazy=True)],
    # Chunks L2 said it held but did not deliver into L1: reason l1_oom, l1_contended,
    # not_found (subscribers/metrics/l2_failures.py; storage_controllers/prefetch_controller.py).
    "storage_read_failures": [rule("lmcache_mp_l2_prefetch_failure_chunks_total", lazy=True)],
}
