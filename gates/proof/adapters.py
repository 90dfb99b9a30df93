"""The engine adapters: for each engine, the rules that answer each quantity, most trusted first.

vLLM and the engines inside it are in adapters_vllm; SGLang, Dynamo KVBM, llama.cpp and the
kvgate simulator here. Every name, label and label value is cited beside its rule (repository
and path) and in tests/data/metrics/README.md. Pure data.
"""

from __future__ import annotations

from ..core.configuration import ADAPTER_NAMES
from .adapters_vllm import LMCACHE, LMCACHE_SPLIT, VLLM, VLLM_NATIVE, VLLM_SPLIT
from .rules import Rule, rule
from .split import Blind, Split
from .tiers import STORAGE

QUANTITIES = ("prompt_tokens", "cached_tokens", "gpu_hit_tokens", "storage_read_tokens",
              "storage_read_bytes", "storage_read_blocks", "storage_write_tokens",
              "storage_write_bytes", "storage_write_blocks", "recomputed_tokens",
              "storage_read_failures", "cpu_hit_tokens")
# Quantities whose shard ranks give the worst rank (a failure on one rank is a failure), not
# the least (what every rank read): failures, and GPU hits (a control that must stay ~0).
WORST = frozenset({"storage_read_failures", "gpu_hit_tokens", "cpu_hit_tokens"})

# The reference simulator's counters. `kvgate sim` serves exactly these (labels: model_name);
# every prompt token is counted in exactly one of gpu_hit, cpu_hit, storage_read and
# recomputed.
SIM_METRICS = {
    "kvgate_sim_prompt_tokens_total": "Prompt tokens received.",
    "kvgate_sim_gpu_hit_tokens_total": "Prompt tokens whose KV was found in the GPU LRU cache.",
    "kvgate_sim_storage_read_tokens_total":
        "Prompt tokens whose KV was read from chunk files in the storage tier.",
    "kvgate_sim_storage_read_bytes_total": "Bytes read from chunk files in the storage tier.",
    "kvgate_sim_cpu_hit_tokens_total": "Prompt tokens whose KV was in the CPU (DRAM) tier.",
    "kvgate_sim_recomputed_tokens_total": "Prompt tokens prefilled by computation.",
    "kvgate_sim_storage_write_bytes_total": "Bytes written to chunk files in the storage tier.",
}
# vLLM-style aliases the simulator also serves, so vLLM dashboards and scripts work on it.
SIM_VLLM_ALIASES = {
    "vllm:prompt_tokens_total": "kvgate_sim_prompt_tokens_total",
    "vllm:prefix_cache_hits_total": "kvgate_sim_gpu_hit_tokens_total",
}

# SGLang 0.5.23 (sgl-project/sglang python/sglang/srt/observability/metrics_collector.py).
_S = "sglang[:_]"  # ':' read as '_' too: prometheus/client_python#1177 (adapters_vllm)
# StorageMetricsCollector's per-rank labels (mem_cache/unified_cache/storage_attachment.py
# _resolve_metrics_collector): TP and PP ranks each hold a shard of every token's KV; DP
# ranks (attention DP) serve different requests; context-parallel ranks hold different
# tokens of a request, so they add up within a rank like any other label.
_SHARD, _SPLIT = ("tp_rank", "pp_rank"), ("dp_rank",)
# Every family of that collector, so a rank whose prefetched series was never created still
# counts (as 0): backuped and storage_prefetch_* are there from the seed on.
_STORAGE_RANKS = f"{_S}(?:prefetched|backuped|storage_prefetch_[a-z_]+)_tokens_total"
# prometheus_client in multiprocess mode exports a labelled child only once it is created, so
# a family appears with its first increment (sglang utils/common.py
# set_prometheus_multiproc_dir): every SGLang rule may meet a family absent before.
_RANKED = {"shard": _SHARD, "split": _SPLIT, "roster": _STORAGE_RANKS, "lazy": True}
# The storage backend names the tier of its series (storage_backend, tiers
# "sglang.storage_backend"): a mooncake or kvcc L3 is other hosts' memory, not storage.
_BACKEND = {"tier": "storage_backend", "space": "sglang.storage_backend", "cls": STORAGE}
# A finished request's cached tokens are split device / host / storage (output_streamer.py
# get_cached_tokens_details), or all "total" where it has no split (tiers): only that
# remainder may be claimed by the per-rank prefetched_tokens, less the storage tokens the
# engine named (split.py).
_CACHE_SOURCE = rule(f"{_S}cached_tokens_total", tier="cache_source", space="sglang.cache_source",
                     cls=STORAGE, backend="storage_backend", roster=_STORAGE_RANKS, lazy=True)
_PREFETCHED = rule(f"{_S}prefetched_tokens_total", **_RANKED, **_BACKEND)
_SGLANG_SPLIT = Split(tiers=_CACHE_SOURCE, blind=[Blind(
    rule=_PREFETCHED.model_copy(update={"caveat": (
        "tier-blind: sglang:prefetched_tokens counts tokens the storage backend delivered into "
        "host memory, whether or not a request then used them (managers/cache_controller.py)")}),
    minus=[_CACHE_SOURCE])])
SGLANG: dict[str, list[Rule]] = {
    "prompt_tokens": [rule(f"{_S}prompt_tokens_total", lazy=True)],  # TokenizerMetricsCollector
    "cached_tokens": [rule(f"{_S}cached_tokens_total", lazy=True)],  # every cache_source
    # cache_source device / host / storage (>= 0.5.20), storage_<BackendClass> (<= 0.5.19,
    # e.g. storage_HiCacheFile) (metrics_collector.py observe_one_finished_request;
    # managers/scheduler_components/output_streamer.py). A series exists only once it is > 0,
    # so the scheduler's pre-seeded admission-time split (SchedulerMetricsCollector) follows.
    "gpu_hit_tokens": [rule(f"{_S}cached_tokens_total", cache_source="device", lazy=True),
                       rule(f"{_S}prefill_effective_tokens_total", mode="device_hit",
                            shard=_SHARD, split=_SPLIT, lazy=True)],
    # Counted once per finished request, after its KV was in place, from the entry rank's view
    # (tp0); then prefetched_tokens (L3 -> host, added after the transfer completed, per rank,
    # min-reduced over the TP/PP group in managers/cache_controller.py): a per-rank rule after
    # the first answer still caps it, so one rank that read nothing shows. cache_source
    # "storage" is classified by the storage_backend of the storage collector's series.
    "storage_read_tokens": [_CACHE_SOURCE, _PREFETCHED],
    # L2 -> L3 writes, added when the storage acknowledged them (unified_radix_cache.py).
    "storage_write_tokens": [rule(f"{_S}backuped_tokens_total", **_RANKED)],
    # L3 hits that did not become usable because the transfer failed or ran out of time; the
    # other reasons (below_threshold, device_covered, capacity ...) are not storage failures.
    "storage_read_failures": [rule(f"{_S}storage_prefetch_unfulfilled_tokens_total",
                                   reason="storage_transfer|deadline", **_RANKED)],
    # HiCache's host (L2, DRAM) pool: cache_source="host" (metrics_collector.py): not storage.
    "cpu_hit_tokens": [rule(f"{_S}cached_tokens_total", cache_source="host", lazy=True)],
}
# Dynamo KVBM (ai-dynamo/dynamo lib/llm/src/block_manager/metrics_kvbm.rs, checked against
# kvbm==1.6.1): fixed prefix kvbm_, no labels, Rust IntCounters without "_total", served by
# the KVBM leader on its own port (DYN_KVBM_METRICS_PORT, default 6880). Its onboard counters
# are incremented before the transfer is issued (leader/slot.rs process_onboard_request).
_BEFORE = ("counted before the transfer: KVBM counts an onboard when it issues it, and a "
           "failed disk read still shows as a full hit (ai-dynamo/dynamo#15079; "
           "lib/bindings/kvbm/src/block_manager/vllm/connector/leader/slot.rs)")
_MATCHED = ("tier-blind: kvbm_matched_tokens adds host (DRAM) and disk matches together "
            "(leader/slot.rs acquire_local_matches); " + _BEFORE)
# The frontend (lib/llm/src/http/service/metrics.rs, prefix dynamo_frontend_): per-request
# histograms, observed once per request; cached_tokens is tier-blind (GPU, host and disk).
_F = "dynamo_frontend_"
# Host -> device onboards (leader/slot.rs): the DRAM tier's share of kvbm_matched_tokens, in
# blocks; without the block size nobody can say how many tokens, so matched tokens then prove
# nothing (split.py).
_MATCHED_TOKENS = rule("kvbm_matched_tokens", caveat=_MATCHED)
_KVBM_SPLIT = Split(tiers=VLLM_SPLIT.tiers, blind=[
    Blind(rule=_MATCHED_TOKENS, void=[rule("kvbm_onboard_blocks_h2d")]), *VLLM_SPLIT.blind])
DYNAMO_KVBM: dict[str, list[Rule]] = {
    **VLLM,  # matched when the vLLM worker's own /metrics is among the scrape targets
    "prompt_tokens": [rule(f"{_F}input_sequence_tokens_sum"), *VLLM["prompt_tokens"]],
    "cached_tokens": [rule(f"{_F}cached_tokens_sum"), *VLLM["cached_tokens"]],
    # Tokens from blocks when the block size is known (attribute(), BLOCK_SIZE); else these.
    "storage_read_tokens": [_MATCHED_TOKENS],
    # disk -> device and object storage -> device; h2d (host -> device) is DRAM, not storage.
    "storage_read_blocks": [rule("kvbm_onboard_blocks_(?:d2d|o2d)", caveat=_BEFORE)],
    # device -> disk, host -> disk, device -> object storage (offload.rs: on success).
    "storage_write_blocks": [rule("kvbm_offload_blocks_(?:d2d|h2d|d2o)")],
    "storage_read_failures": [rule("kvbm_object_read_failures")],  # blocks
}
# Tokens per block where an engine counts blocks: KVBM's block is vLLM's --block-size, which
# the Dynamo frontend exposes per model (metrics.rs model_kv_cache_block_size).
BLOCK_SIZE: dict[str, Rule] = {"dynamo-kvbm": rule(f"{_F}model_kv_cache_block_size")}

_T = "(?:_total)?"
LLAMACPP: dict[str, list[Rule]] = {
    # llama.cpp counts only the prompt tokens it evaluated; reused ones are counted apart.
    "recomputed_tokens": [rule(f"llamacpp[:_]prompt_tokens{_T}")],
    "cached_tokens": [rule(f"llamacpp[:_]prompt_tokens_cached{_T}")],
    "gpu_hit_tokens": [rule(f"llamacpp[:_]prompt_tokens_cached{_T}")],
}
SIM: dict[str, list[Rule]] = {q: [rule(f"kvgate_sim_{q}_total")] for q in QUANTITIES
                              if f"kvgate_sim_{q}_total" in SIM_METRICS}
ADAPTERS: dict[str, dict[str, list[Rule]]] = {
    "vllm": VLLM, "lmcache": LMCACHE, "vllm-native": VLLM_NATIVE, "sglang": SGLANG,
    "dynamo-kvbm": DYNAMO_KVBM, "llamacpp": LLAMACPP, "kvgate-sim": SIM}
# Engines that attribute their hits to tiers: that split bounds every blind counter (split.py).
SPLITS: dict[str, Split] = {
    "vllm": VLLM_SPLIT, "lmcache": LMCACHE_SPLIT, "vllm-native": VLLM_SPLIT,
    "sglang": _SGLANG_SPLIT, "dynamo-kvbm": _KVBM_SPLIT}
if tuple(ADAPTERS) != ADAPTER_NAMES:  # the site's `engine =` values are validated against these
    raise ImportError(f"adapters {tuple(ADAPTERS)} differ from core.ADAPTER_NAMES {ADAPTER_NAMES}")
# Most specific first: an LMCache server also serves vllm:* metrics, a native-offload one
# vllm:kv_offload_*, and a merged Dynamo scrape may hold a vLLM worker's.
SIGNATURES = [("kvgate-sim", "kvgate_sim_"), ("lmcache", "lmcache[:_]"),
              ("vllm-native", "vllm[:_]kv_offload_"), ("dynamo-kvbm", f"kvbm_|{_F}"),
              ("sglang", _S), ("llamacpp", "llamacpp[:_]"), ("vllm", "vllm[:_]")]
