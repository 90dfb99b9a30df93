"""gates.proof.attribution: storage attribution by engine on the recorded before/after
/metrics pairs (tests/data/metrics/README.md: where each name comes from), what is not exposed,
and the devices' own read bytes. Ranks, permutations and version drift: test_attribution_ranks.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.core.configuration import ADAPTER_NAMES
from gates.proof import (
    AttributionError,
    MetricSet,
    PsutilDiskCounters,
    attribute,
    detect_engine,
    device_read_bytes,
    parse_metrics,
    restore_gbps,
)
from gates.proof.adapters import ADAPTERS, QUANTITIES, SIM_METRICS, SIM_VLLM_ALIASES
from gates.proof.attribution import StorageAttribution
from gates.proof.disks import DiskIO, FakeDiskCounters
from gates.proof.promtext import Sample

DATA = Path(__file__).parent / "data" / "metrics"
PROBE = 8192  # every engine file: the probe reads one 8,192-token context back from storage


def scrape(name: str) -> MetricSet:
    """One recorded scrape, e.g. "sglang.after"."""
    return parse_metrics((DATA / f"{name}.prom").read_text())


def run(engine: str, before: str, after: str | None = None, **kw):
    return attribute(engine, scrape(f"{before}.before"), scrape(f"{after or before}.after"), **kw)


def merged(*names: str) -> MetricSet:
    """Several scrape targets in one MetricSet, each series labelled with its target."""
    sets = {n.split(".")[0]: scrape(n) for n in names}  # the target, e.g. "dynamo-kvbm"
    return MetricSet(samples=[Sample(name=s.name, labels={**s.labels, "scrape_target": target},
                                     value=s.value)
                              for target, m in sets.items() for s in m.samples],
                     types={k: v for m in sets.values() for k, v in m.types.items()})


def test_vllm_with_a_connector_that_names_no_tier():
    a = run("vllm", "vllm")  # ExampleConnector: its hits are external_unspecified
    assert (a.prompt_tokens, a.storage_read_tokens, a.gpu_hit_tokens) == (8208, PROBE, 0)
    assert (a.recomputed_tokens, a.cached_tokens) == (16, PROBE)
    # The blind counter carried the claim (it comes first); the engine's split is said last.
    assert a.matched["storage_read_tokens"][0] == (
        'vllm:prompt_tokens_by_source_total{engine="0",model_name="Qwen/Qwen3-0.6B",'
        'source="external_kv_transfer"}')
    assert "external_unspecified 8,192 (unattributed)" in a.matched["storage_read_tokens"][-1]
    caveat = a.caveats["storage_read_tokens"]
    assert caveat.startswith("tier-blind: ") and "; counted before the transfer: " in caveat
    assert a.storage_read_bytes is None and "storage_read_bytes" in a.unknown
    assert a.storage_read_failures is None  # vLLM's core has no load-failure counter
    assert (a.rank_reads, a.rank_mode) == ({}, "")  # one DP engine


def test_vllm_native_tiering_reads_the_fs_tier():
    a = run("vllm-native", "vllm-native")
    assert a.storage_read_tokens == PROBE
    assert a.matched["storage_read_tokens"][0].startswith(
        'vllm:prompt_tokens_cached_by_source_total{') and 'source="disk"' in \
        a.matched["storage_read_tokens"][0]
    assert a.caveats["storage_read_tokens"].startswith("counted before the transfer: ")
    assert a.storage_read_bytes == 32 * 29_360_128  # 32 chunks promoted from tier 1:fs
    assert a.matched["storage_read_bytes"] == [
        'vllm:kv_offload_tiering_read_bytes_total{engine="0",model_name="Qwen/Qwen3-0.6B",'
        'tier="1:fs"}']
    assert a.storage_write_bytes == 0 and a.recomputed_tokens == 0
    # The failure families are lazy: HELP and TYPE only, no series -> not exposed, not 0.
    assert a.storage_read_failures is None


def test_lmcache_in_process_is_tier_blind():
    a = run("lmcache", "lmcache")
    assert a.storage_read_tokens == PROBE
    assert a.caveats["storage_read_tokens"].startswith("tier-blind: ")
    assert a.storage_read_bytes == 0  # remote backends only; this is the local disk backend
    assert a.caveats["storage_write_tokens"].startswith("counted before the transfer: ")
    assert a.prompt_tokens is None  # the recording holds lmcache:* only, not vLLM's families


def test_lmcache_multiprocess_server():
    a = run("lmcache", "lmcache-mp")
    assert a.storage_read_tokens == PROBE
    assert a.matched["storage_read_tokens"][0].startswith("lmcache_mp_lookup_hit_l2_tokens_total")
    assert a.caveats["storage_read_tokens"].startswith("tier-blind: ")
    assert a.storage_read_failures is None  # l2_prefetch_failure has no series until one fails
    assert a.storage_write_blocks == 0  # the seed stored its 32 chunks before this phase


def test_sglang_hicache_single_rank():
    a = run("sglang", "sglang")
    assert (a.prompt_tokens, a.cached_tokens, a.storage_read_tokens) == (8256, PROBE, PROBE)
    assert a.recomputed_tokens == 64 and a.gpu_hit_tokens == 0
    assert a.matched["storage_read_tokens"] == [
        'sglang:cached_tokens_total{cache_source="storage",engine_type="unified",'
        'model_name="Qwen/Qwen3-8B"}', "derived: 8,192 tokens the engine attributes to storage; "
        "its split sglang[:_]cached_tokens_total{cache_source}: storage 8,192 (by backend)"]
    assert "storage_read_tokens" not in a.caveats  # tier-aware, counted after the transfer
    # cached_tokens{device} has no series (it appears once > 0): the scheduler's split answers.
    assert a.matched["gpu_hit_tokens"][0].startswith("sglang:prefill_effective_tokens_total{")
    assert a.storage_read_failures == 0 and a.storage_read_bytes is None
    assert (a.rank_reads, a.rank_mode) == ({}, "")


def test_dynamo_kvbm_with_its_frontend_block_size_from_the_scrape():
    before = merged("dynamo-kvbm.before", "dynamo-frontend.before")
    after = merged("dynamo-kvbm.after", "dynamo-frontend.after")
    a = attribute("dynamo-kvbm", before, after)
    assert a.storage_read_blocks == 512 and a.storage_read_tokens == 512 * 16
    assert a.matched["storage_read_tokens"] == [
        "derived: storage_read_blocks x 16 (dynamo_frontend_model_kv_cache_block_size)"]
    assert a.caveats["storage_read_tokens"].startswith("counted before the transfer: ")
    assert "#15079" in a.caveats["storage_read_tokens"]
    assert (a.prompt_tokens, a.cached_tokens, a.recomputed_tokens) == (8256, PROBE, 64)
    assert a.storage_read_failures == 0
    # A block size the site gives that the engine contradicts is an error, not a choice.
    wrong = attribute("dynamo-kvbm", before, after, block_tokens=32)
    assert wrong.storage_read_tokens is None
    assert "contradicts the engine's own dynamo_frontend_model_kv_cache_block_size = 16" in \
        wrong.errors["storage_read_tokens"]
    assert attribute("dynamo-kvbm", before, after, block_tokens=16).storage_read_tokens == 8192


def test_kvbm_alone_without_a_block_size_falls_back_to_matched_tokens():
    a = run("dynamo-kvbm", "dynamo-kvbm")
    assert a.storage_read_blocks == 512
    assert a.storage_read_tokens == PROBE and a.matched["storage_read_tokens"] == [
        "kvbm_matched_tokens"]
    caveat = a.caveats["storage_read_tokens"]
    assert caveat.startswith("tier-blind: ") and "counted before the transfer: " in caveat
    assert a.prompt_tokens is None  # KVBM's own endpoint has no prompt counter
    b = run("dynamo-kvbm", "dynamo-kvbm", block_tokens=16)
    assert b.matched["storage_read_tokens"] == ["derived: storage_read_blocks x 16"]


def test_llamacpp_has_no_storage_tier():
    a = run("llamacpp", "llamacpp")
    assert a.recomputed_tokens == 8 * 64 and a.cached_tokens == 8 * 8192
    assert a.storage_read_tokens is None and a.storage_read_bytes is None


def test_kvgate_simulator():
    a = run("kvgate-sim", "kvgate-sim")
    assert (a.prompt_tokens, a.gpu_hit_tokens, a.storage_read_tokens, a.recomputed_tokens) == (
        8 * (8192 + 64), 0, 8 * 8192, 8 * 64)
    assert a.storage_read_bytes == 8 * 8192 * 1024 and a.storage_write_bytes == 0


def test_simulator_names_are_the_documented_ones():
    # The 2026-11-29 recording holds documented names only; the current simulator's
    # (kvgate-sim-cpu-tier) serves every name the adapter reads, each a counter, and every one
    # of its own names is documented.
    readme = (DATA / "README.md").read_text()
    old = scrape("kvgate-sim.after")
    assert set(old.names()) <= set(SIM_METRICS) | set(SIM_VLLM_ALIASES)
    now = scrape("kvgate-sim-cpu-tier.after")
    assert set(SIM_METRICS) | set(SIM_VLLM_ALIASES) <= set(now.names())
    assert all(now.type_of(n) == "counter" for n in SIM_METRICS)
    assert all(f"`{n}`" in readme for n in now.names() if n.startswith("kvgate_sim_"))


def test_the_simulators_cpu_tier_hits_are_never_storage_reads():
    a = run("kvgate-sim", "kvgate-sim-cpu-tier")
    assert (a.prompt_tokens, a.cpu_hit_tokens, a.storage_read_tokens, a.gpu_hit_tokens) == (
        4 * (512 + 4), 4 * 512, 0, 0)
    assert a.storage_read_bytes == 0 and a.recomputed_tokens == 4 * 4


@pytest.mark.parametrize("name, engine", [
    ("vllm", "vllm"), ("vllm-native", "vllm-native"), ("lmcache", "lmcache"),
    ("lmcache-mp", "lmcache"), ("lmcache-tp8", "lmcache"), ("sglang", "sglang"),
    ("sglang-tp8", "sglang"), ("dynamo-kvbm", "dynamo-kvbm"),
    ("dynamo-frontend", "dynamo-kvbm"), ("llamacpp", "llamacpp"), ("kvgate-sim", "kvgate-sim"),
    ("kvgate-sim-cpu-tier", "kvgate-sim")])
def test_detect_engine_from_a_scrape(name, engine):
    assert detect_engine(scrape(f"{name}.after")) == engine


def test_detect_engine_on_an_unrelated_scrape():
    assert detect_engine(parse_metrics("process_cpu_seconds_total 1\n")) is None


def test_every_recording_is_in_the_readme_table():
    readme = (DATA / "README.md").read_text()
    for path in DATA.glob("*.prom"):
        stem = path.name.split(".")[0]
        assert f"`{stem}`" in readme, f"{path.name} is not in README.md's table"
        head = path.read_text()[:200].upper()
        if stem not in ("llamacpp", "kvgate-sim"):  # recorded before the headers were asked
            assert "WRITTEN FROM SOURCE" in head or "CAPTURED FROM A RUNNING" in head, path.name


# ---- not exposed: None, never 0 -----------------------------------------------------------

def test_nothing_exposed_means_every_quantity_unknown():
    empty = parse_metrics("")
    for engine in ADAPTERS:
        a = attribute(engine, empty, empty)
        assert a.unknown == list(QUANTITIES)
        assert all(getattr(a, q) is None for q in QUANTITIES)


def test_a_family_without_the_rules_label_values_is_not_exposed():
    text = ('# TYPE sglang:cached_tokens_total counter\n'
            'sglang:cached_tokens_total{{cache_source="device"}} {n}\n')
    a = attribute("sglang", parse_metrics(text.format(n=0)), parse_metrics(text.format(n=50)))
    assert a.gpu_hit_tokens == 50
    assert a.storage_read_tokens is None and "storage_read_tokens" in a.unknown


def test_vllm_dram_hits_are_not_storage_reads():
    # A connector that attributes its hits to host (DRAM): the disk series answers 0.
    text = (DATA / "vllm.after.prom").read_text()
    text = text.replace('source="host"} 0.0', 'source="host"} 8192.0').replace(
        'source="external_unspecified"} 8192.0', 'source="external_unspecified"} 0.0')
    a = attribute("vllm", scrape("vllm.before"), parse_metrics(text))
    assert a.storage_read_tokens == 0
    assert a.caveats["storage_read_tokens"].startswith("counted before the transfer: ")


def test_vllm_native_without_tiering_has_no_storage_bytes():
    # The deprecated counter only ever says CPU_to_GPU / GPU_to_CPU: DRAM, never storage.
    text = ('# TYPE vllm:kv_offload_total_bytes_total counter\n'
            'vllm:kv_offload_total_bytes_total{{transfer_type="CPU_to_GPU"}} {n}\n')
    a = attribute("vllm-native", parse_metrics(text.format(n=0)),
                  parse_metrics(text.format(n=4096)))
    assert a.storage_read_bytes is None and a.storage_write_bytes is None


def test_vllm_native_tiering_failures_are_counted():
    text = (DATA / "vllm-native.after.prom").read_text() + (
        'vllm:kv_offload_tiering_promotion_allocation_failures_total'
        '{engine="0",model_name="Qwen/Qwen3-0.6B"} 3.0\n')
    a = attribute("vllm-native", scrape("vllm-native.before"), parse_metrics(text))
    assert a.storage_read_failures == 3


def test_a_counter_reset_is_an_error_of_its_quantity_not_its_new_value():
    # Issue #25 item 2: 500 -> 40 used to count as 40 (PromQL's increase()), noted nowhere.
    before = parse_metrics("# TYPE kvgate_sim_prompt_tokens_total counter\n"
                           "kvgate_sim_prompt_tokens_total 500\n")
    after = parse_metrics("# TYPE kvgate_sim_prompt_tokens_total counter\n"
                          "kvgate_sim_prompt_tokens_total 40\n")
    a = attribute("kvgate-sim", before, after)
    assert a.prompt_tokens is None and "prompt_tokens" in a.unknown
    assert a.errors["prompt_tokens"].startswith("kvgate_sim_prompt_tokens_total fell from 500 "
                                                "to 40 between the scrapes")


def test_totals_without_a_before_scrape_are_the_counters_themselves():
    # settle() reads what was written since the engine started: no pairing, no errors.
    a = attribute("kvgate-sim", None, scrape("kvgate-sim.after"))
    assert a.storage_write_bytes == scrape("kvgate-sim.after").sum(
        "kvgate_sim_storage_write_bytes_total") and not a.errors


def test_unknown_engine():
    with pytest.raises(AttributionError, match="known: vllm"):
        attribute("tgi", MetricSet(), MetricSet())


def test_adapters_are_the_site_engine_names_and_name_known_quantities():
    assert tuple(ADAPTERS) == ADAPTER_NAMES
    for rules in ADAPTERS.values():
        assert set(rules) <= set(QUANTITIES)
    assert "storage_read_failures" in QUANTITIES


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
    assert restore_gbps(100, 0) is None
    assert restore_gbps(100, float("nan")) is None


def test_psutil_counters_read_this_machine():
    counters = PsutilDiskCounters().read()
    assert isinstance(counters, dict)
    assert all(c.read_bytes >= 0 for c in counters.values())


_KVBM = ("kvbm_matched_tokens {tokens}\nkvbm_onboard_blocks_d2d {blocks}\n"
         "dynamo_frontend_model_kv_cache_block_size {size}\n")


def _kvbm(size: float) -> StorageAttribution:
    return attribute("dynamo-kvbm", parse_metrics(_KVBM.format(tokens=0, blocks=0, size=size)),
                     parse_metrics(_KVBM.format(tokens=8192, blocks=512, size=size)))


@pytest.mark.parametrize("size", [-16, 16.5, 0])
def test_a_block_size_that_is_not_a_positive_whole_number_converts_no_blocks(size):
    a = _kvbm(size)
    assert a.storage_read_tokens == 8192 and a.matched["storage_read_tokens"] == [
        "kvbm_matched_tokens"] and not a.errors


def test_a_block_of_one_token_converts_blocks_one_for_one():
    a = _kvbm(1)
    assert a.storage_read_tokens == 512 and a.matched["storage_read_tokens"] == [
        "derived: storage_read_blocks x 1 (dynamo_frontend_model_kv_cache_block_size)"]


def _sim(**after: float) -> StorageAttribution:
    """The simulator's counters from 0 to the values given (a name left out: not exposed)."""
    def text(values: dict[str, float]) -> str:
        return "".join(f"kvgate_sim_{q}_total {v}\n" for q, v in values.items())
    return attribute("kvgate-sim", parse_metrics(text(dict.fromkeys(after, 0))),
                     parse_metrics(text(after)))


def test_what_the_counters_do_not_say_is_derived_from_what_they_do():
    a = _sim(prompt_tokens=100, gpu_hit_tokens=10, storage_read_tokens=80, recomputed_tokens=10)
    assert a.cached_tokens == 90
    assert a.matched["cached_tokens"] == ["derived: gpu_hit_tokens + storage_read_tokens"]
    b = _sim(gpu_hit_tokens=10, storage_read_tokens=80, recomputed_tokens=30)
    assert b.prompt_tokens == 120
    assert b.matched["prompt_tokens"] == ["derived: recomputed_tokens + cached_tokens"]
    c = _sim(prompt_tokens=100, gpu_hit_tokens=10, storage_read_tokens=80)
    assert c.recomputed_tokens == 10
    assert c.matched["recomputed_tokens"] == ["derived: prompt_tokens - cached_tokens"]
    assert c.unknown == ["storage_read_bytes", "storage_read_blocks", "storage_write_tokens",
                         "storage_write_bytes", "storage_write_blocks", "storage_read_failures",
                         "cpu_hit_tokens"]


def test_a_figure_a_counter_gave_is_never_replaced_by_a_derived_one():
    # The engine's own prompt count stands even where the parts add up to something else.
    a = _sim(prompt_tokens=500, gpu_hit_tokens=10, storage_read_tokens=80, recomputed_tokens=10)
    assert a.prompt_tokens == 500
    assert a.matched["prompt_tokens"] == ["kvgate_sim_prompt_tokens_total"]
    assert a.recomputed_tokens == 10 and a.cached_tokens == 90


def test_a_counter_that_could_not_be_read_is_not_derived_from_the_others():
    before = parse_metrics("kvgate_sim_prompt_tokens_total 500\nkvgate_sim_gpu_hit_tokens_total 0\n"
                           "kvgate_sim_storage_read_tokens_total 0\n"
                           "kvgate_sim_recomputed_tokens_total 0\n")
    after = parse_metrics("kvgate_sim_prompt_tokens_total 40\nkvgate_sim_gpu_hit_tokens_total 10\n"
                          "kvgate_sim_storage_read_tokens_total 80\n"
                          "kvgate_sim_recomputed_tokens_total 10\n")
    a = attribute("kvgate-sim", before, after)
    assert a.prompt_tokens is None and "prompt_tokens" not in a.matched
    assert a.errors["prompt_tokens"].startswith("kvgate_sim_prompt_tokens_total fell from 500")
    assert a.cached_tokens == 90 and a.recomputed_tokens == 10


def test_an_unknown_engine_is_refused_naming_every_known_one():
    with pytest.raises(AttributionError) as e:
        attribute("tgi", MetricSet(), MetricSet())
    assert str(e.value) == ("unknown engine 'tgi'; known: vllm, lmcache, vllm-native, sglang, "
                            "dynamo-kvbm, llamacpp, kvgate-sim")


def test_an_expected_restart_shown_by_the_start_time_counts_from_the_restart():
    def scrape(prompt: float, started: float) -> MetricSet:
        return parse_metrics(f"process_start_time_seconds {started}\n"
                             f"kvgate_sim_prompt_tokens_total {prompt}\n")
    a = attribute("kvgate-sim", scrape(500, 1.0), scrape(40, 2.0), restart_expected=True)
    assert a.prompt_tokens == 40 and not a.errors


def test_blocks_converted_without_a_token_counter_carry_the_blocks_caveat():
    text = "kvbm_onboard_blocks_d2d {}\ndynamo_frontend_model_kv_cache_block_size 16\n"
    a = attribute("dynamo-kvbm", parse_metrics(text.format(0)), parse_metrics(text.format(512)))
    assert a.storage_read_tokens == 512 * 16
    assert a.caveats["storage_read_tokens"] == a.caveats["storage_read_blocks"]
    assert a.caveats["storage_read_tokens"].startswith("counted before the transfer: ")
