"""gates.inference.attribution: storage attribution by engine on before/after /metrics pairs,
and the devices' own read bytes (tests/data/metrics/README.md: where each name comes from)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.inference import (
    ADAPTERS,
    QUANTITIES,
    SIM_METRICS,
    SIM_VLLM_ALIASES,
    AttributionError,
    DiskIO,
    FakeDiskCounters,
    MetricSet,
    PsutilDiskCounters,
    attribute,
    detect_engine,
    device_read_bytes,
    parse_metrics,
    restore_gbps,
)

DATA = Path(__file__).parent / "data" / "metrics"
# Every pair records the probe phase of one cold-recovery run: 8 contexts of 8192 tokens,
# each probed with a 64-token question; all 65,536 context tokens should come from storage.
PROBE_PROMPT, CONTEXT, QUESTIONS = 8 * (8192 + 64), 8 * 8192, 8 * 64
KV_PER_TOKEN = 126976  # Qwen3-Coder-480B FP8


def pair(name: str) -> tuple[MetricSet, MetricSet]:
    """The before and after scrapes of one engine."""
    return (parse_metrics((DATA / f"{name}.before.prom").read_text()),
            parse_metrics((DATA / f"{name}.after.prom").read_text()))


def run(name: str, engine: str | None = None, **kw):
    before, after = pair(name)
    return attribute(engine or name, before, after, **kw)


def test_vllm_with_a_kv_connector():
    a = run("vllm")
    assert a.prompt_tokens == PROBE_PROMPT
    assert a.storage_read_tokens == CONTEXT
    assert a.gpu_hit_tokens == 0
    assert a.recomputed_tokens == QUESTIONS
    assert a.cached_tokens == CONTEXT
    assert a.storage_fraction == pytest.approx(CONTEXT / PROBE_PROMPT)
    assert a.matched["storage_read_tokens"] == [
        'vllm:prompt_tokens_by_source_total{engine="0",'
        'model_name="Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8",source="external_kv_transfer"}']
    # vLLM alone exposes no bytes: unknown, not zero.
    assert a.storage_read_bytes is None and "storage_read_bytes" in a.unknown


def test_older_vllm_names_match_and_what_it_lacks_is_unknown():
    a = run("vllm-0.8", "vllm")
    assert a.prompt_tokens == PROBE_PROMPT
    assert a.gpu_hit_tokens == 0
    assert a.matched["gpu_hit_tokens"][0].startswith("vllm:gpu_prefix_cache_hits_total{")
    for quantity in ("storage_read_tokens", "recomputed_tokens", "cached_tokens"):
        assert getattr(a, quantity) is None
        assert quantity in a.unknown


def test_vllm_with_lmcache():
    a = run("lmcache")
    assert a.storage_read_tokens == CONTEXT
    assert a.matched["storage_read_tokens"][0].startswith("lmcache:num_hit_tokens_total{")
    assert a.storage_read_bytes == CONTEXT * KV_PER_TOKEN
    assert a.storage_write_bytes == 0
    assert a.storage_write_tokens is None  # this LMCache version counts no stored tokens
    assert a.prompt_tokens == PROBE_PROMPT and a.recomputed_tokens == QUESTIONS


def lmcache_backends(hit: int, **backends: int) -> MetricSet:
    """A scrape with LMCache's per-backend retrieved tokens and its aggregate hit counter."""
    family = "lmcache:num_retrieve_retrieved_tokens_by_backend_total"
    lines = [f"# TYPE {family} counter"]
    lines += [f'{family}{{backend="{b}"}} {v}' for b, v in backends.items()]
    lines += ["# TYPE lmcache:num_hit_tokens_total counter", f"lmcache:num_hit_tokens_total {hit}"]
    return parse_metrics("\n".join(lines))


def test_lmcache_per_backend_counters_leave_out_the_cpu_tier():
    a = attribute("lmcache", lmcache_backends(0, LocalCPUBackend=0, LocalDiskBackend=0),
                  lmcache_backends(1000, LocalCPUBackend=300, LocalDiskBackend=700))
    assert a.storage_read_tokens == 700
    # Only the CPU tier answered: the family exists, so storage served 0, and the aggregate
    # counter (which includes DRAM hits) is not asked.
    a = attribute("lmcache", lmcache_backends(0, LocalCPUBackend=0),
                  lmcache_backends(300, LocalCPUBackend=300))
    assert a.storage_read_tokens == 0


def test_vllm_native_offload_tiering_bytes():
    a = run("vllm-native")
    assert a.storage_read_bytes == CONTEXT * KV_PER_TOKEN
    assert a.matched["storage_read_bytes"][0].startswith(
        "vllm:kv_offload_tiering_read_bytes_total{")
    assert a.storage_write_bytes == 0
    assert a.storage_read_tokens == CONTEXT


def test_vllm_native_without_tiering_counts_only_non_cpu_transfers():
    text = ('# TYPE vllm:kv_offload_total_bytes_total counter\n'
            'vllm:kv_offload_total_bytes_total{{transfer_type="CPU_to_GPU"}} {cpu}\n'
            'vllm:kv_offload_total_bytes_total{{transfer_type="SHARED_STORAGE_to_GPU"}} {fs}\n'
            'vllm:kv_offload_total_bytes_total{{transfer_type="GPU_to_SHARED_STORAGE"}} {w}\n')
    a = attribute("vllm-native", parse_metrics(text.format(cpu=0, fs=0, w=0)),
                  parse_metrics(text.format(cpu=100, fs=4000, w=50)))
    assert a.storage_read_bytes == 4000
    assert a.storage_write_bytes == 50


def test_sglang_hicache():
    a = run("sglang")
    assert a.storage_read_tokens == CONTEXT
    assert a.cached_tokens == CONTEXT
    assert a.prompt_tokens == PROBE_PROMPT
    assert a.recomputed_tokens == QUESTIONS
    assert a.matched["recomputed_tokens"] == ["derived: prompt_tokens - cached_tokens"]
    assert a.gpu_hit_tokens is None and a.storage_read_bytes is None


def test_newer_sglang_splits_cached_tokens_by_source():
    family = "sglang:cached_tokens_total"

    def scrape(device: int, host: int, storage: int) -> MetricSet:
        return parse_metrics(f"# TYPE {family} counter\n"
                             f'{family}{{cache_source="device"}} {device}\n'
                             f'{family}{{cache_source="host"}} {host}\n'
                             f'{family}{{cache_source="storage_HiCacheFile"}} {storage}\n')

    a = attribute("sglang", scrape(0, 0, 0), scrape(10, 20, 4096))
    assert (a.gpu_hit_tokens, a.storage_read_tokens, a.cached_tokens) == (10, 4096, 4126)
    # Without the cache_source label (older SGLang) the device split is unknown, not 0.
    old = parse_metrics(f"# TYPE {family} counter\n{family} 5\n")
    assert attribute("sglang", old, old).gpu_hit_tokens is None


def test_dynamo_kvbm_blocks_become_tokens_only_with_a_block_size():
    a = run("dynamo-kvbm")
    assert a.storage_read_blocks == 4096
    assert a.storage_read_tokens is None and "storage_read_tokens" in a.unknown
    assert a.storage_write_blocks == 0
    b = run("dynamo-kvbm", block_tokens=16)
    assert b.storage_read_tokens == CONTEXT
    assert b.matched["storage_read_tokens"] == ["derived: storage_read_blocks x 16"]
    assert b.prompt_tokens is None  # KVBM's own endpoint has no prompt counter


def test_llamacpp_has_no_storage_tier():
    a = run("llamacpp")
    assert a.recomputed_tokens == QUESTIONS
    assert a.cached_tokens == CONTEXT
    assert a.prompt_tokens == PROBE_PROMPT
    assert a.storage_read_tokens is None and a.storage_read_bytes is None


def test_kvgate_simulator():
    a = run("kvgate-sim")
    assert (a.prompt_tokens, a.gpu_hit_tokens, a.storage_read_tokens, a.recomputed_tokens) == (
        PROBE_PROMPT, 0, CONTEXT, QUESTIONS)
    assert a.storage_read_bytes == CONTEXT * 1024
    assert a.storage_write_bytes == 0
    assert a.cached_tokens == CONTEXT


def test_simulator_names_are_the_documented_ones():
    _, after = pair("kvgate-sim")
    assert set(SIM_METRICS) | set(SIM_VLLM_ALIASES) == set(after.names())
    assert all(after.type_of(n) == "counter" for n in after.names())
    readme = (DATA / "README.md").read_text()
    assert all(name in readme for name in SIM_METRICS)


@pytest.mark.parametrize("name, engine", [
    ("vllm", "vllm"), ("vllm-0.8", "vllm"), ("lmcache", "lmcache"),
    ("vllm-native", "vllm-native"), ("sglang", "sglang"), ("dynamo-kvbm", "dynamo-kvbm"),
    ("llamacpp", "llamacpp"), ("kvgate-sim", "kvgate-sim")])
def test_detect_engine_from_a_scrape(name, engine):
    assert detect_engine(pair(name)[1]) == engine


def test_detect_engine_on_an_unrelated_scrape():
    assert detect_engine(parse_metrics("process_cpu_seconds_total 1\n")) is None


def test_name_drift_underscore_prefix_and_missing_total():
    before = parse_metrics("vllm_prompt_tokens 10\nvllm_external_prefix_cache_hits 0\n")
    after = parse_metrics("vllm_prompt_tokens 110\nvllm_external_prefix_cache_hits 64\n")
    a = attribute("vllm", before, after)
    assert (a.prompt_tokens, a.storage_read_tokens) == (100, 64)


def test_a_counter_reset_is_reported():
    before = parse_metrics("# TYPE kvgate_sim_prompt_tokens_total counter\n"
                           "kvgate_sim_prompt_tokens_total 500\n")
    after = parse_metrics("# TYPE kvgate_sim_prompt_tokens_total counter\n"
                          "kvgate_sim_prompt_tokens_total 40\n")
    a = attribute("kvgate-sim", before, after)
    assert a.prompt_tokens == 40 and a.resets == ["kvgate_sim_prompt_tokens_total"]


def test_nothing_exposed_means_every_quantity_unknown():
    empty = parse_metrics("")
    a = attribute("vllm", empty, empty)
    assert a.unknown == list(QUANTITIES)
    assert all(getattr(a, q) is None for q in QUANTITIES)


def test_unknown_engine():
    with pytest.raises(AttributionError, match="known: vllm"):
        attribute("tgi", MetricSet(), MetricSet())


def test_every_adapter_rule_compiles_and_names_a_known_quantity():
    for rules in ADAPTERS.values():
        assert set(rules) <= set(QUANTITIES)


# ---- device side -------------------------------------------------------------------------

def snap(**reads: int) -> dict[str, DiskIO]:
    return {name: DiskIO(read_bytes=value) for name, value in reads.items()}


def test_device_read_bytes_over_the_named_devices():
    disks = FakeDiskCounters([snap(nvme0n1=100, nvme1n1=50, sda=7),
                              snap(nvme0n1=1100, nvme1n1=2050, sda=9)])
    before, after = disks.read(), disks.read()
    assert device_read_bytes(before, after, ["nvme0n1", "/dev/nvme1n1"]) == 3000
    assert disks.read() == after and disks.calls == 3


def test_device_read_bytes_refuses_missing_or_shrinking_counters():
    with pytest.raises(AttributionError, match="'md0' has no I/O counters; present: sda"):
        device_read_bytes(snap(sda=1), snap(sda=2), ["md0"])
    with pytest.raises(AttributionError, match="went down"):
        device_read_bytes(snap(sda=10), snap(sda=2), ["sda"])


def test_restore_gbps():
    assert restore_gbps(5.23e9, 1.0) == pytest.approx(5.23)
    assert restore_gbps(CONTEXT * KV_PER_TOKEN, 2.0) == pytest.approx(4.16, abs=0.01)
    assert restore_gbps(100, 0) is None
    assert restore_gbps(100, float("nan")) is None


def test_psutil_counters_read_this_machine():
    counters = PsutilDiskCounters().read()
    assert isinstance(counters, dict)
    assert all(c.read_bytes >= 0 for c in counters.values())
