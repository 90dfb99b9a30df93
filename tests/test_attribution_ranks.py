"""gates.proof.attribution per rank and across versions: 8-rank recordings (a rank at zero
fails the shard), data-parallel engines add up, the order of series and the rank numbering do
not matter, and the naming changes documented in tests/data/metrics/README.md still match."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gates.proof import MetricSet, attribute, parse_metrics
from gates.proof.promtext import Sample

DATA = Path(__file__).parent / "data" / "metrics"
PROBE = 8192


def text(name: str) -> str:
    return (DATA / f"{name}.prom").read_text()


def attribute_text(engine: str, before: str, after: str):
    return attribute(engine, parse_metrics(before), parse_metrics(after))


def test_lmcache_eight_workers_each_read_their_shard():
    a = attribute_text("lmcache", text("lmcache-tp8.before"), text("lmcache-tp8.after"))
    assert a.rank_mode == "shard"
    assert a.rank_reads == {f"worker_id={r}": PROBE for r in range(8)}
    assert a.storage_read_tokens == PROBE  # the least rank, not 8 x 8192 (a false PASS)
    assert a.storage_read_bytes == 0  # no remote backend; summed over workers if there were


def test_lmcache_a_worker_at_zero_fails_the_shard():
    a = attribute_text("lmcache", text("lmcache-tp8.before"),
                       text("lmcache-tp8-rank3-zero.after"))
    assert a.rank_reads["worker_id=3"] == 0
    assert sum(v == PROBE for v in a.rank_reads.values()) == 7
    assert a.storage_read_tokens == 0 and a.rank_mode == "shard"


def test_sglang_eight_tp_ranks():
    a = attribute_text("sglang", text("sglang-tp8.before"), text("sglang-tp8.after"))
    assert a.rank_mode == "shard"
    assert a.rank_reads == {f"tp_rank={r}": PROBE for r in range(8)}
    assert a.storage_read_tokens == PROBE
    assert a.storage_write_tokens == 128  # backuped: the least TP rank, not 8 x 128


def test_sglang_a_rank_whose_series_was_never_created_fails_the_shard():
    # tp_rank 5's prefetched series is absent; its other storage series say it exists.
    a = attribute_text("sglang", text("sglang-tp8.before"), text("sglang-tp8-rank5-zero.after"))
    assert a.rank_reads["tp_rank=5"] == 0 and len(a.rank_reads) == 8
    # The per-request count (entry rank's view) says 8192; the per-rank counter caps it.
    assert a.storage_read_tokens == 0
    assert a.matched["storage_read_tokens"][-1].startswith("derived: least of ")


def test_sglang_failures_take_the_worst_rank_and_only_storage_reasons():
    after = text("sglang-tp8.after")
    line = re.search(r'^sglang:storage_prefetch_unfulfilled_tokens_total\{[^}]*'
                     r'reason="storage_transfer"[^}]*tp_rank="2"\} 0\.0$', after, re.M).group()
    after = after.replace(line, line[:-3] + "64.0")
    other = re.search(r'^sglang:storage_prefetch_unfulfilled_tokens_total\{[^}]*'
                      r'reason="device_covered"[^}]*tp_rank="4"\} 0\.0$', after, re.M).group()
    after = after.replace(other, other[:-3] + "999.0")  # not a storage failure
    a = attribute_text("sglang", text("sglang-tp8.before"), after)
    assert a.storage_read_failures == 64


def dp(metrics: MetricSet, engines: int, idle: MetricSet | None = None,
       idle_engine: int | None = None) -> MetricSet:
    """vLLM data parallelism: every engine="0" series once per DP engine; one may stay idle."""
    idle_values = {s.key: s.value for s in (idle or metrics).samples}
    samples = []
    for s in metrics.samples:
        for e in range(engines if "engine" in s.labels else 1):
            value = idle_values.get(s.key, 0.0) if e == idle_engine else s.value
            labels = {**s.labels, "engine": str(e)} if "engine" in s.labels else s.labels
            samples.append(Sample(name=s.name, labels=labels, value=value))
    return MetricSet(samples=samples, types=metrics.types)


@pytest.mark.parametrize("engine", ["vllm", "vllm-native"])
def test_vllm_data_parallel_engines_split_the_requests(engine):
    before, after = parse_metrics(text(f"{engine}.before")), parse_metrics(text(f"{engine}.after"))
    a = attribute(engine, dp(before, 8), dp(after, 8))
    assert a.rank_mode == "split"
    assert a.rank_reads == {f"engine={e}": PROBE for e in range(8)}
    assert a.storage_read_tokens == 8 * PROBE  # different requests: the sum
    b = attribute(engine, dp(before, 8), dp(after, 8, idle=before, idle_engine=3))
    assert b.rank_reads["engine=3"] == 0 and b.storage_read_tokens == 7 * PROBE


# ---- order and numbering ------------------------------------------------------------------

def families(exposition: str) -> list[list[str]]:
    """The exposition's families (HELP, TYPE, then samples), its header comments dropped."""
    blocks: list[list[str]] = []
    for line in exposition.splitlines():
        if line.startswith("# HELP "):
            blocks.append([line])
        elif blocks:
            blocks[-1].append(line)
    return blocks


def shuffled(exposition: str, rng: random.Random, label: str, mapping: list[int]) -> str:
    """Families and their samples in another order, and rank label values renumbered."""
    blocks = families(exposition)
    rng.shuffle(blocks)
    out = []
    for block in blocks:
        meta = [b for b in block if b.startswith("#")]
        samples = [b for b in block if not b.startswith("#")]
        if not any(m.endswith(" histogram") for m in meta):  # buckets stay in order
            rng.shuffle(samples)
        out += meta + samples
    renumber = re.compile(rf'{label}="(\d+)"')
    return "\n".join(renumber.sub(lambda m: f'{label}="{mapping[int(m[1])]}"', line)
                     for line in out) + "\n"


CASES = [("lmcache", "lmcache-tp8", "lmcache-tp8-rank3-zero", "worker_id"),
         ("sglang", "sglang-tp8", "sglang-tp8-rank5-zero", "tp_rank"),
         ("sglang", "sglang-tp8", "sglang-tp8", "tp_rank"),
         ("vllm", "vllm", "vllm", "engine")]


@settings(max_examples=25, deadline=None)
@given(case=st.sampled_from(CASES), seed=st.integers(0, 2**32 - 1),
       mapping=st.permutations(list(range(8))))
def test_order_of_series_and_rank_numbering_do_not_change_the_attribution(case, seed, mapping):
    engine, before, after, label = case
    want = attribute_text(engine, text(f"{before}.before"), text(f"{after}.after"))
    got = attribute_text(engine, shuffled(text(f"{before}.before"), random.Random(seed), label,
                                          mapping),
                         shuffled(text(f"{after}.after"), random.Random(seed + 1), label,
                                  mapping))
    keep = {"matched", "rank_reads"}
    assert got.model_dump(exclude=keep) == want.model_dump(exclude=keep)
    renamed = {f"{label}={mapping[int(k.split('=')[1])]}": v for k, v in want.rank_reads.items()}
    assert got.rank_reads == renamed


# ---- naming changes between versions (tests/data/metrics/README.md) -----------------------

def test_sglang_up_to_0_5_19_names_the_storage_tier_by_its_backend_class():
    def old(t: str) -> str:
        return t.replace('cache_source="storage"', 'cache_source="storage_HiCacheFile"').replace(
            "Prompt tokens successfully transferred from L3 storage into host memory, before "
            "admission-time reuse or discard.", "Number of prefetched prompt tokens.")
    new = attribute_text("sglang", text("sglang.before"), text("sglang.after"))
    was = attribute_text("sglang", old(text("sglang.before")), old(text("sglang.after")))
    assert was.storage_read_tokens == new.storage_read_tokens == PROBE
    assert 'cache_source="storage_HiCacheFile"' in was.matched["storage_read_tokens"][0]


def test_lmcache_before_0_3_10_had_only_model_name_and_worker_id():
    def old(t: str) -> str:
        return re.sub(r',served_model_name="[^"]*"', "", t.replace('role="worker",', ""))
    for after in ("lmcache-tp8", "lmcache-tp8-rank3-zero"):
        new = attribute_text("lmcache", text("lmcache-tp8.before"), text(f"{after}.after"))
        was = attribute_text("lmcache", old(text("lmcache-tp8.before")),
                             old(text(f"{after}.after")))
        assert was.model_dump(exclude={"matched"}) == new.model_dump(exclude={"matched"})


def test_lmcache_mp_0_5_3_has_no_l2_hit_counter_so_reads_are_not_exposed():
    def old(t: str) -> str:
        return "\n".join(line for line in t.splitlines() if "lookup_hit_l2" not in line) + "\n"
    a = attribute_text("lmcache", old(text("lmcache-mp.before")), old(text("lmcache-mp.after")))
    assert a.storage_read_tokens is None  # not 0


def test_vllm_under_prometheus_multiproc_dir_has_no_created_samples():
    def multiproc(t: str) -> str:
        return "\n".join(line for line in t.splitlines()
                         if not re.match(r"(# (HELP|TYPE) )?vllm:\w+_created", line)) + "\n"
    for name in ("vllm", "vllm-native"):
        new = attribute_text(name, text(f"{name}.before"), text(f"{name}.after"))
        was = attribute_text(name, multiproc(text(f"{name}.before")),
                             multiproc(text(f"{name}.after")))
        assert was == new


def test_colons_escaped_to_underscores_still_match():
    # prometheus_client's OpenMetrics escaping (prometheus/client_python#1177): "vllm_...".
    def escaped(t: str) -> str:
        return t.replace("vllm:", "vllm_").replace("sglang:", "sglang_")
    for engine, name in (("vllm-native", "vllm-native"), ("sglang", "sglang-tp8")):
        new = attribute_text(engine, text(f"{name}.before"), text(f"{name}.after"))
        was = attribute_text(engine, escaped(text(f"{name}.before")),
                             escaped(text(f"{name}.after")))
        assert was.model_dump(exclude={"matched"}) == new.model_dump(exclude={"matched"})


def _prefetched(after: str, rank: int, tokens: float) -> str:
    return after.replace(f'storage_backend="file",tp_rank="{rank}"}} 8192.0',
                         f'storage_backend="file",tp_rank="{rank}"}} {tokens}')


def test_sglang_the_per_rank_counter_caps_the_per_request_count_rank_by_rank():
    # Rank 5 prefetched half the context: the least rank is what every shard read. Rank 3
    # counted more than the engine attributed to storage: no rank reads more than that count.
    after = _prefetched(_prefetched(text("sglang-tp8.after"), 5, 4096.0), 3, 9000.0)
    a = attribute_text("sglang", text("sglang-tp8.before"), after)
    assert (a.storage_read_tokens, a.rank_mode) == (4096, "shard")
    assert a.rank_reads == {f"tp_rank={r}": 4096 if r == 5 else PROBE for r in range(8)}
    series = a.matched["storage_read_tokens"]
    assert series[0].startswith('sglang:cached_tokens_total{cache_source="storage"')
    assert series[2].startswith("sglang:prefetched_tokens_total{") and 'tp_rank="0"' in series[2]
    assert series[-1] == ("derived: least of sglang[:_]cached_tokens_total{cache_source is "
                          "storage} and the per-rank sglang[:_]prefetched_tokens_total"
                          "{storage_backend is storage}")
    assert len(series) == 2 + 8 + 1


def test_sglang_ranks_that_agree_with_the_per_request_count_derive_nothing_more():
    a = attribute_text("sglang", text("sglang-tp8.before"), text("sglang-tp8.after"))
    assert a.matched["storage_read_tokens"][-1].startswith("sglang:prefetched_tokens_total{")
    assert not any(m.startswith("derived: least") for m in a.matched["storage_read_tokens"])


def _vllm_disk(after: bool) -> str:
    from _expositions import engine_counts, render

    disk = 2 * PROBE if after else PROBE  # one probe's worth read from vLLM's disk tier
    return render([engine_counts(prompt=8256 + (8256 if after else 0), compute=64, disk=disk)])


def test_lmcache_a_worker_at_zero_fails_the_shard_behind_vllms_own_disk_count():
    # vLLM's tier split says 8,192 tokens came from disk; LMCache's worker 3 read none of its
    # shard. The per-rank counter further down still speaks: the least rank is what was read.
    a = attribute_text("lmcache", _vllm_disk(False) + text("lmcache-tp8.before"),
                       _vllm_disk(True) + text("lmcache-tp8-rank3-zero.after"))
    assert (a.storage_read_tokens, a.rank_mode) == (0, "shard")
    assert a.rank_reads["worker_id=3"] == 0 and len(a.rank_reads) == 8
    assert a.matched["storage_read_tokens"][-1] == (
        "derived: least of vllm[:_]prompt_tokens_cached_by_source_total{source is storage} and "
        "the per-rank lmcache[:_]num_hit_tokens_total")


def test_a_counter_without_ranks_further_down_is_not_read_once_one_answered():
    # LMCache MP's L2 hit counter fell (its server restarted): it is not what answered, and
    # having no ranks it cannot cap the answer, so it is not read at all.
    l2 = ("# TYPE lmcache_mp_lookup_hit_l2_tokens counter\n"
          "lmcache_mp_lookup_hit_l2_tokens_total {}\n")
    a = attribute_text("lmcache", _vllm_disk(False) + l2.format(500),
                       _vllm_disk(True) + l2.format(40))
    assert a.storage_read_tokens == PROBE and "storage_read_tokens" not in a.errors


def test_only_counters_naming_their_ranks_by_the_same_labels_say_the_same_ranks():
    from gates.proof.attribution import _unmatched

    # DP x TP ranks beside a per-DP counter: different rank spaces, nothing to compare.
    assert _unmatched({"storage_read_tokens": {"dp_rank=0,tp_rank=0": 1.0,
                                               "dp_rank=0,tp_rank=1": 1.0},
                       "gpu_hit_tokens": {"dp_rank=0": 0.0, "dp_rank=1": 0.0}}) == {}
    # The same label, one value holding "=": the label is what precedes the first "=".
    assert _unmatched({"storage_read_tokens": {"engine=a=1": 1.0, "engine=b": 1.0},
                       "gpu_hit_tokens": {"engine=c=2": 0.0, "engine=b": 0.0}}) == {
        "storage_read_tokens": "rank engine=c=2 is in the gpu_hit_tokens counter but in neither "
                               "scrape of this one: its figure was not read, and the other "
                               "ranks' cannot stand for it",
        "gpu_hit_tokens": "rank engine=a=1 is in the storage_read_tokens counter but in "
                          "neither scrape of this one: its figure was not read, and the other "
                          "ranks' cannot stand for it"}


def test_a_counter_the_proof_does_not_read_neither_names_ranks_nor_is_refused():
    from gates.proof.attribution import _unmatched

    # The cached-token counter names a third engine the storage counter lacks: the proof does
    # not read cached tokens, so neither of them is refused for it.
    three = {f"engine={e}": 1.0 for e in range(3)}
    assert _unmatched({"cached_tokens": three,
                       "storage_read_tokens": {"engine=0": 1.0, "engine=1": 1.0}}) == {}
    assert _unmatched({"storage_write_tokens": {"engine=0": 1.0, "engine=1": 1.0},
                       "storage_read_tokens": three}) == {}
