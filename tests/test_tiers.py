"""gates.proof.tiers and the rules that read them: only a tier classified as storage from the
engine's source carries the proof; an unknown tier that moved is INCONCLUSIVE, named."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gates.proof import attribute, parse_metrics
from gates.proof.tiers import TIERS, tier_class

DATA = Path(__file__).parent / "data" / "metrics"


def text(name: str) -> str:
    return (DATA / f"{name}.prom").read_text()


def run(engine: str, before: str, after: str):
    return attribute(engine, parse_metrics(before), parse_metrics(after))


@pytest.mark.parametrize("space, value, kind", [
    ("vllm.cache_hit_source", "disk", "storage"), ("vllm.cache_hit_source", "host", "memory"),
    ("vllm.cache_hit_source", "p2p", "peer"),
    ("vllm.cache_hit_source", "external_unspecified", "unattributed"),
    ("vllm.cache_hit_source", "cxl", "unknown"),
    ("vllm.tier", "0:primary", "memory"), ("vllm.tier", "1:fs", "storage"),
    ("vllm.tier", "2:obj", "storage"), ("vllm.tier", "1:example", "memory"),
    ("vllm.tier", "1:p2p", "peer"), ("vllm.tier", "2:kvcr", "unknown"),
    ("vllm.tier", "fs", "unknown"),
    ("sglang.cache_source", "storage_HiCacheFile", "storage"),
    ("sglang.cache_source", "storage_MooncakeStore", "peer"),
    ("sglang.cache_source", "storage_Other", "unknown"),
    ("sglang.storage_backend", "file", "storage"), ("sglang.storage_backend", "mooncake", "peer"),
    ("sglang.storage_backend", "aibrix", "unknown"),
])
def test_each_value_is_classified_from_the_engines_source(space, value, kind):
    assert tier_class(space, value) == kind


def test_every_classified_value_is_in_the_recordings_readme():
    readme = (DATA / "README.md").read_text()
    for space, table in TIERS.items():
        for value, kind in table.items():
            shown = value.replace(r"\d+", "N")  # the table writes a tier index as N
            assert f"`{shown}`" in readme and space in readme, (space, value, kind)


def test_vllm_natives_example_tier_is_memory_not_storage():
    # ExampleSecondaryTierManager keeps a dict in memory: 010cc10 counted "1:example" as
    # storage (any tier but 0:primary and p2p).
    def example(t: str) -> str:
        return t.replace('tier="1:fs"', 'tier="1:example"')
    a = run("vllm-native", example(text("vllm-native.before")), example(text("vllm-native.after")))
    assert a.storage_read_bytes is None and not a.unclassified


def test_an_out_of_tree_vllm_tier_that_moved_is_named_not_counted():
    def kvcr(t: str) -> str:
        return t.replace('tier="1:fs"', 'tier="1:kvcr"')
    a = run("vllm-native", kvcr(text("vllm-native.before")), kvcr(text("vllm-native.after")))
    assert a.storage_read_bytes is None
    assert 'tier="1:kvcr" moved in the probe' in a.unclassified["storage_read_bytes"]


def test_a_new_vllm_cache_hit_source_that_moved_is_named():
    after = text("vllm-native.after").replace('source="p2p"', 'source="cxl"')
    before = text("vllm-native.before").replace('source="p2p"', 'source="cxl"')
    after = re.sub(r'(source="cxl"\} )0\.0', r"\g<1>4096.0", after)
    a = run("vllm-native", before, after)
    assert 'source="cxl" moved in the probe' in a.unclassified["storage_read_tokens"]


@pytest.mark.parametrize("backend, kind", [("mooncake", "peer"), ("aibrix", "unknown")])
def test_sglang_storage_is_classified_by_its_backend(backend, kind):
    def use(t: str) -> str:
        return t.replace('storage_backend="file"', f'storage_backend="{backend}"')
    a = run("sglang", use(text("sglang.before")), use(text("sglang.after")))
    assert a.storage_read_tokens is None
    if kind == "unknown":
        assert f'storage_backend="{backend}"' in a.unclassified["storage_read_tokens"]
    else:
        assert "storage_read_tokens" not in a.unclassified  # known: another host's memory


def test_sglang_before_0_5_20_names_its_backend_class_in_cache_source():
    def old(t: str, cls: str) -> str:
        return t.replace('cache_source="storage"', f'cache_source="storage_{cls}"')
    file = run("sglang", old(text("sglang.before"), "HiCacheFile"),
               old(text("sglang.after"), "HiCacheFile"))
    assert file.storage_read_tokens == 8192
    pool = run("sglang", old(text("sglang.before"), "MooncakeStore"),
               old(text("sglang.after"), "MooncakeStore").replace(
                   'storage_backend="file"', 'storage_backend="mooncake"'))
    assert pool.storage_read_tokens is None
