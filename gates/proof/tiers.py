"""Where a cache hit came from: every tier, source and backend label value an engine can emit,
classified from that engine's source as storage, memory, peer, compute or unattributed.

Only "storage" carries the storage-read proof. "memory" is the engine's own GPU or DRAM,
"peer" another host's memory (a distributed DRAM pool, another instance), "compute" a
prefill, "unattributed" a connector that does not say which tier answered (the next, tier-blind
rule answers, with its caveat). A value missing from these tables is unknown: a rule that meets
one that moved in the probe answers INCONCLUSIVE, naming the label — never storage. Each entry
cites the file (and, where the stored source allowed a reliable count, the line) it was read
from; tests/data/metrics/README.md repeats the tables. Pure data.
"""

from __future__ import annotations

import re

STORAGE, MEMORY, PEER, COMPUTE = "storage", "memory", "peer", "compute"
UNATTRIBUTED = "unattributed"
BY_BACKEND = "by backend"  # SGLang >= 0.5.20 cache_source="storage": the backend label decides

# value regex (full match) -> class, per label space "engine.label".
TIERS: dict[str, dict[str, str]] = {
    # vLLM PromptTokenStats sources (vllm/v1/metrics/stats.py ALL_SOURCES, 0.32.0 @5df63a720):
    # a prefill, a GPU prefix-cache hit, and whatever a KV connector loaded (any of its tiers).
    "vllm.source": {"local_compute": COMPUTE, "local_cache_hit": MEMORY,
                    "external_kv_transfer": UNATTRIBUTED},
    # vLLM CacheHitSource (vllm/v1/metrics/cache_hit_source.py lines 18-24 @8548f56c): device
    # (GPU), host (DRAM), p2p (another instance), disk, external_unspecified (an uninstrumented
    # connector or remote store).
    "vllm.cache_hit_source": {"device": MEMORY, "host": MEMORY, "p2p": PEER, "disk": STORAGE,
                              "external_unspecified": UNATTRIBUTED},
    # vLLM native tiering: "0:primary" is the CPU tier (tiering/metrics.py PRIMARY_TIER_LABEL),
    # secondary tier i is f"{i + 1}:{type}" (tiering/metrics.py tier_label). Built-in types
    # (tiering/factory.py, the register_tier calls at its end): "example" keeps a dict in
    # memory (tiering/example/manager.py docstring: "A simple in-memory secondary tier"),
    # "fs" files (tiering/fs/manager.py FileSystemTierManager), "obj" an object store
    # (tiering/obj/manager.py ObjectStoreSecondaryTierManager), "p2p" another instance's
    # memory (tiering/p2p/manager.py). "kvcr" (registered in-tree in 0.32.0, factory.py) keeps
    # both local DRAM and G3 storage (tiering/kvcr/manager.py _record_inventory) and names no
    # medium, so its hits are external_unspecified (tiering/base.py cache_hit_source): unknown,
    # like any out-of-tree type (a class name and module_path).
    "vllm.tier": {"0:primary": MEMORY, r"\d+:example": MEMORY, r"\d+:fs": STORAGE,
                  r"\d+:obj": STORAGE, r"\d+:p2p": PEER},
    # SGLang cache_source (python/sglang/srt/observability/metrics_collector.py
    # observe_one_finished_request; managers/scheduler_components/output_streamer.py): device
    # and host pools, and the L3 storage backend: "storage" (>= 0.5.20; its backend is the
    # storage_backend label below) or "storage_<BackendClass>" (<= 0.5.19), classified as the
    # backend it names (mem_cache/storage/backend_factory.py register_backend class names).
    # "total" is its fallback when a finished request carries no per-source details
    # (metrics_collector.py, "Fallback for backward compatibility", 0.5.23 wheel): unattributed.
    "sglang.cache_source": {"device": MEMORY, "host": MEMORY, "storage": BY_BACKEND,
                            "total": UNATTRIBUTED,
                            "storage_HiCacheFile": STORAGE, "storage_HiCacheHF3FS": STORAGE,
                            "storage_HiCacheNixl": STORAGE, "storage_MooncakeStore": PEER,
                            "storage_KVCCStore": PEER, "storage_SimHiCacheStorage": MEMORY,
                            "storage_HiCacheShm": MEMORY},
    # SGLang storage_backend = --hicache-storage-backend (mem_cache/unified_cache/
    # storage_attachment.py _resolve_metrics_collector labels), one of the names registered in
    # mem_cache/storage/backend_factory.py @001067ff: file (HiCacheFile: files in a directory),
    # hf3fs (the 3FS file system), nixl (NIXL file plugins POSIX/GDS/3FS or object store:
    # storage/nixl/hicache_nixl.py) are storage; mooncake (MooncakeDistributedStore, a DRAM
    # pool across hosts: storage/mooncake_store/mooncake_store.py) and kvcc ("peer-to-peer G2
    # KV coordinator", backend_factory.py) peer memory; sim ("no-IO storage simulator": keys
    # only, storage/sim_storage.py) and shm ("no actual storage transfer": storage/shm/
    # hicache_shm.py) memory. aibrix, eic, simm, mori and "dynamic" are not classified here.
    "sglang.storage_backend": {"file": STORAGE, "hf3fs": STORAGE, "nixl": STORAGE,
                               "mooncake": PEER, "kvcc": PEER, "sim": MEMORY, "shm": MEMORY},
    # LMCache MP l2_name = the L2 adapter's registered type name (LMCache 0.5.6 sdist,
    # lmcache/v1/distributed/l2_adapters/*_l2_adapter.py register_l2_adapter_type, each module's
    # docstring): fs ("File-system based ... raw tensor bytes on disk"), fs_native (the native
    # filesystem connector), hf3fs (3FS), raw_block (a raw block device), s3 (an object store)
    # are storage; p2p ("reads KV objects from a single peer cache server ... from the peer's
    # L1"), mooncake_store (Mooncake Store), valkey and resp (Redis/Valkey) other hosts' memory;
    # mock ("a mock-up L2 adapter with a specific RAM size") memory. dax, nixl_*, aerospike,
    # bigtable, hfbucket, plugin, native_plugin, eviction, fault_inject and
    # sagemaker_hyperpod are not classified here: unknown.
    "lmcache.l2_name": {"fs": STORAGE, "fs_native": STORAGE, "hf3fs": STORAGE,
                        "raw_block": STORAGE, "s3": STORAGE, "p2p": PEER,
                        "mooncake_store": PEER, "valkey": PEER, "resp": PEER, "mock": MEMORY},
}
_COMPILED = {space: [(re.compile(k), v) for k, v in table.items()]
             for space, table in TIERS.items()}


def tier_class(space: str, value: str) -> str:
    """The class of one label value in a label space; "unknown" when the table lacks it."""
    for pattern, kind in _COMPILED[space]:
        if pattern.fullmatch(value):
            return kind
    return "unknown"
