"""gates.proof.tiers and the rules that read them: only a tier classified as storage from the
engine's source carries the proof; an unknown tier that moved is INCONCLUSIVE, named."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gates.proof import attribute, parse_metrics
from gates.proof.pairing import Pairing, PairingError
from gates.proof.rules import Unclassified, rule
from gates.proof.split import Blind, Split, attributes, check_void, split_reads
from gates.proof.tiers import STORAGE, TIERS, tier_class

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


# ---- split.py: the engine's own split bounds what a tier-blind counter may claim (issue #43)

SOURCE = {"tier": "source", "space": "vllm.cache_hit_source", "cls": STORAGE}
HITS = rule("hits", caveat="counted at admission", **SOURCE)  # the engine's tier-labelled split
NAMED = rule("hits", source="host|p2p|disk")  # what the engine attributed: a blind counter saw it
LOADED = rule("loaded", caveat="tier-blind: loaded counts every tier; at admission")


def phase(after: dict[str, float], before: dict[str, float] | None = None) -> Pairing:
    """Two scrapes of counters: every series 0 before (unless given) and at its value after."""
    def text(values: dict[str, float]) -> str:
        return "".join(f"{k} {v}\n" for k, v in values.items())
    return Pairing(parse_metrics(text(dict.fromkeys(after, 0.0) if before is None else before)),
                   parse_metrics(text(after)))


def hits(**by_source: float) -> dict[str, float]:
    return {f'hits_total{{source="{k}"}}': v for k, v in by_source.items()}


def test_unattributed_tokens_no_blind_counter_bounds_stay_out_and_the_split_is_said_whole():
    # A series without the tier label is shown as "(none)"; values sorted, each with its class.
    p = phase({"hits_total": 0.0, **hits(disk=5, host=994, external_unspecified=20, p2p=0,
                                          cxl=0)})
    found = split_reads(Split(tiers=HITS), p)
    assert found.value == 5 and found.caveat == "counted at admission"
    assert found.series == [
        'hits_total{source="disk"}',
        "derived: 5 tokens the engine attributes to storage; its split hits{source}: (none) 0 "
        "(unknown), cxl 0 (unknown), disk 5 (storage), external_unspecified 20 (unattributed), "
        "host 994 (memory), p2p 0 (peer); its 20 unattributed tokens are not counted as "
        "storage: no tier-blind counter bounds them"]


def test_with_no_storage_tier_named_the_splits_own_caveat_still_stands():
    found = split_reads(Split(tiers=HITS), phase(hits(host=10, external_unspecified=3)))
    assert found.value == 0 and found.caveat == "counted at admission"


def test_a_blind_counter_claims_only_what_it_saw_beyond_the_attributed_tiers():
    # 110 seen less the 95 attributed (disk 5 + host 90) leaves 15 of the 20 unattributed.
    p = phase({**hits(disk=5, host=90, external_unspecified=20), "loaded_total": 110})
    found = split_reads(Split(tiers=HITS, blind=[Blind(rule=LOADED, minus=[NAMED])]), p)
    said = ("hits{source}: disk 5 (storage), external_unspecified 20 (unattributed), "
            "host 90 (memory)")
    assert found.value == 20
    assert found.series == [
        "loaded_total", 'hits_total{source="disk"}',
        f"derived: 5 tokens the engine attributes to storage; its split {said}; of the 20 "
        "unattributed tokens 15 claimed by the tier-blind loaded (110 seen less 95 attributed)"]
    assert found.caveat == (
        "tier-blind: 15 of the 20 tokens are the engine's unattributed remainder as loaded saw "
        f"it (110 less 95 attributed), 5 it attributed to storage (its split {said}); loaded "
        "counts every tier; at admission")


DISK = 'hits_total{source="disk"}'


@pytest.mark.parametrize(("disk", "first"), [(14, "loaded_total"), (15, DISK), (16, DISK)])
def test_the_first_series_named_is_the_counter_that_carried_more_of_the_claim(disk, first):
    # The blind counter claims 15 each time: it comes first only where that is more than disk.
    p = phase({**hits(disk=disk, host=90, external_unspecified=20), "loaded_total": disk + 105})
    found = split_reads(Split(tiers=HITS, blind=[Blind(rule=LOADED, minus=[NAMED])]), p)
    assert found.value == disk + 15 and found.series[0] == first


def test_an_attributed_counter_not_exposed_takes_nothing_off_and_none_asked_is_not_said():
    p = phase({**hits(host=90, external_unspecified=20), "loaded_total": 6})
    absent = Blind(rule=LOADED, minus=[rule("named_elsewhere")])
    found = split_reads(Split(tiers=HITS, blind=[absent]), p)
    assert found.value == 6 and found.series[-1].endswith("(6 seen less 0 attributed)")
    found = split_reads(Split(tiers=HITS, blind=[Blind(rule=LOADED)]), p)
    assert found.value == 6 and found.series[-1].endswith("claimed by the tier-blind loaded "
                                                          "(6 seen)")


def test_with_nothing_left_unattributed_no_blind_counter_is_asked():
    blind = [Blind(rule=LOADED)]
    p = phase({**hits(host=90, external_unspecified=0), "loaded_total": 50})
    assert split_reads(Split(tiers=HITS, blind=blind), p) is None  # no storage tier: not exposed
    p = phase({**hits(disk=5, host=90, external_unspecified=0), "loaded_total": 50})
    found = split_reads(Split(tiers=HITS, blind=blind), p)
    assert found.value == 5 and found.caveat == "counted at admission"
    assert found.series == ['hits_total{source="disk"}', (
        "derived: 5 tokens the engine attributes to storage; its split hits{source}: disk 5 "
        "(storage), external_unspecified 0 (unattributed), host 90 (memory)")]


def ranked(rank: int, **by_source: float) -> dict[str, float]:
    return {f'hits_total{{engine="{rank}",source="{k}"}}': v for k, v in by_source.items()}


def test_each_engine_claims_at_most_its_own_unattributed_remainder():
    # DP engines serve different requests: the blind counter's engine 0 saw 15 of engine 0's
    # 20, engine 1 saw 40 of its 30. No storage tier named: nothing else is added.
    split = Split(tiers=HITS.model_copy(update={"split": ("engine",)}),
                  blind=[Blind(rule=rule("loaded", split=("engine",)))])
    p = phase({**ranked(0, host=5, external_unspecified=20),
               **ranked(1, host=5, external_unspecified=30),
               'loaded_total{engine="0"}': 15, 'loaded_total{engine="1"}': 40})
    found = split_reads(split, p)
    assert found.value == 45 and found.mode == "split"
    assert found.ranks == {"engine=0": 15, "engine=1": 30}


def test_a_blind_counter_without_ranks_is_held_against_the_engines_totals():
    # One LMCache MP server (or KVBM leader) behind two DP engines: its counter has no engine
    # label. It saw 45, less the 20 the engines attributed (disk 10, host 10): 25 of their 40
    # unattributed, on top of the 10 they attributed to storage. Rank by rank it claimed 0.
    engine = {"split": ("engine",)}
    split = Split(tiers=HITS.model_copy(update=engine),
                  blind=[Blind(rule=LOADED, minus=[NAMED.model_copy(update=engine)])])
    p = phase({**ranked(0, disk=5, host=10, external_unspecified=20),
               **ranked(1, disk=5, host=0, external_unspecified=20), "loaded_total": 45})
    found = split_reads(split, p)
    assert found.value == 35 and found.ranks == {}
    assert found.series[-1].endswith("of the 40 unattributed tokens 25 claimed by the tier-blind "
                                     "loaded (45 seen less 20 attributed)")


def test_disk_tokens_of_one_engine_only_are_kept_when_the_others_are_ranked():
    # Engine 0 read 5 tokens from disk, engine 1 none (no series of it): rank by rank the 5
    # were lost (40, "35 claimed"); on the totals they stand beside the 35 claimed.
    split = Split(tiers=HITS.model_copy(update={"split": ("engine",)}),
                  blind=[Blind(rule=rule("loaded", split=("engine",)))])
    p = phase({**ranked(0, disk=5, external_unspecified=20),
               **ranked(1, external_unspecified=30),
               'loaded_total{engine="0"}': 15, 'loaded_total{engine="1"}': 20})
    found = split_reads(split, p)
    assert found.value == 40 and found.ranks == {}
    assert "of the 50 unattributed tokens 35 claimed" in found.series[-1]


def test_a_ranked_blind_counter_never_claims_more_than_the_engines_unattributed_total():
    # The engine's split has no rank label, the blind counter has two ranks: each rank held
    # against the whole remainder (100) claimed 60 + 60 = 120 of it; on the totals, 100.
    split = Split(tiers=HITS, blind=[Blind(rule=rule("loaded", split=("engine",)))])
    p = phase({**hits(host=5, external_unspecified=100),
               'loaded_total{engine="0"}': 60, 'loaded_total{engine="1"}': 60})
    found = split_reads(split, p)
    assert found.value == 100 and found.ranks == {}


def test_ranks_that_line_up_claim_rank_by_rank_with_each_engines_disk_tokens():
    # Disk, remainder and blind counter all by engine: each engine's own disk tokens plus what
    # its blind rank saw of its remainder (5 + 15, 3 + 30). A counter to take off that the
    # engine does not expose takes nothing off.
    split = Split(tiers=HITS.model_copy(update={"split": ("engine",)}), blind=[Blind(
        rule=rule("loaded", split=("engine",)), minus=[rule("offloaded", split=("engine",))])])
    p = phase({**ranked(0, disk=5, external_unspecified=20),
               **ranked(1, disk=3, external_unspecified=30),
               'loaded_total{engine="0"}': 15, 'loaded_total{engine="1"}': 40})
    found = split_reads(split, p)
    assert found.value == 53 and found.ranks == {"engine=0": 20, "engine=1": 33}


def test_a_counter_to_take_off_without_the_ranks_makes_the_claim_one_of_totals():
    # The tokens to take off are counted for every engine at once: no engine's share of them
    # is known, so the claim is on the totals (8 + min(50, 55 - 10)), with no rank of its own.
    split = Split(tiers=HITS.model_copy(update={"split": ("engine",)}), blind=[Blind(
        rule=rule("loaded", split=("engine",)), minus=[rule("offloaded")])])
    p = phase({**ranked(0, disk=5, external_unspecified=20),
               **ranked(1, disk=3, external_unspecified=30),
               'loaded_total{engine="0"}': 15, 'loaded_total{engine="1"}': 40,
               "offloaded_total": 10})
    found = split_reads(split, p)
    assert found.value == 53 and found.ranks == {}


def test_a_blind_counter_whose_ranks_each_count_every_token_is_capped_by_the_engines_totals():
    # Shard ranks each saw the whole probe (80), whatever their ranks are called: each is held
    # against the engine's totals (100 unattributed, 10 attributed), never against the engine's
    # rank of the same name, and the least of them is what was read.
    split = Split(tiers=HITS.model_copy(update={"split": ("engine",)}), blind=[Blind(
        rule=rule("loaded", shard=("engine",)),
        minus=[NAMED.model_copy(update={"split": ("engine",)})])])
    p = phase({**ranked(0, disk=0, host=10, external_unspecified=100),
               **ranked(1, disk=0, host=0, external_unspecified=0),
               'loaded_total{engine="0"}': 80, 'loaded_total{engine="1"}': 80})
    found = split_reads(split, p)
    assert found.value == 70 and found.mode == "shard"
    assert found.ranks == {"engine=0": 70, "engine=1": 70}


def test_the_split_reads_its_tiers_whatever_the_rules_unless_says():
    # An unless stands the rule down where it answers alone; the split handles the
    # unattributed remainder itself.
    split = Split(tiers=HITS.model_copy(update={"unless": {"source": "external_unspecified"}}))
    found = split_reads(split, phase(hits(disk=5, external_unspecified=20)))
    assert found.value == 5
    assert found.series[-1].endswith("its 20 unattributed tokens are not counted as storage: no "
                                     "tier-blind counter bounds them")


def test_the_split_reads_only_the_series_its_rule_names():
    model_a = Split(tiers=HITS.model_copy(update={"labels": {"model": "a"}}))
    p = phase({'hits_total{model="a",source="disk"}': 5, 'hits_total{model="b",source="disk"}': 100,
               'hits_total{model="a",source="host"}': 7, 'hits_total{source="host"}': 1})
    assert attributes(model_a, p)
    found = split_reads(model_a, p)
    assert found.value == 5
    assert found.series[-1] == ("derived: 5 tokens the engine attributes to storage; its split "
                                "hits{source}: disk 5 (storage), host 7 (memory)")
    assert not attributes(model_a, phase({'hits_total{model="b",source="disk"}': 5}))
    # A label a series lacks reads as "", as every rule reads it.
    unlabelled = Split(tiers=HITS.model_copy(update={"labels": {"model": ""}}))
    assert attributes(unlabelled, phase(hits(disk=5)))


def test_a_memory_tiers_counter_that_fell_or_vanished_breaks_the_pairing():
    # A reset or a restart between the scrapes, even where only memory tiers show it.
    p = phase(hits(disk=5, host=40), before=hits(disk=0, host=50))
    with pytest.raises(PairingError, match="fell from 50 to 40"):
        split_reads(Split(tiers=HITS), p)
    p = phase(hits(disk=5), before=hits(disk=0, host=50))
    with pytest.raises(PairingError, match='source="host"} is in the before scrape but not in '
                                           "the after scrape"):
        split_reads(Split(tiers=HITS), p)


L2_LOADS = rule("loads", tier="l2_name", space="lmcache.l2_name", cls=STORAGE)
H2D = rule("h2d")  # no tier label: a memory tier by its name


def test_a_blind_counter_that_also_counted_memory_that_moved_proves_nothing():
    blind = Blind(rule=LOADED, void=[L2_LOADS, H2D])
    p = phase({'loads_total{l2_name="fs"}': 3, 'loads_total{l2_name="mock"}': 1,
               'loads_total{l2_name="p2p"}': 2, "h2d_total": 64})
    with pytest.raises(Unclassified) as refused:
        check_void(blind, p)
    assert str(refused.value) == (
        "loaded counts every tier of its kind, and the engine says memory served some of them "
        "(loads{l2_name} memory 1; loads{l2_name} peer 2) without saying how many tokens: none "
        "of it can be shown to be storage")
    # A gate without a tier label is asked once, as memory.
    with pytest.raises(Unclassified, match=r"of them \(h2d 64\) without"):
        check_void(blind, phase({'loads_total{l2_name="fs"}': 3, "h2d_total": 64}))


def test_a_blind_counters_claim_stands_where_its_memory_tiers_did_not_move():
    blind = Blind(rule=LOADED, void=[L2_LOADS, H2D])
    p = phase({**hits(external_unspecified=20), "loaded_total": 12,
               'loads_total{l2_name="fs"}': 3, 'loads_total{l2_name="mock"}': 0, "h2d_total": 0})
    assert split_reads(Split(tiers=HITS, blind=[blind]), p).value == 12
    p = phase({**hits(external_unspecified=20), "loaded_total": 12, "h2d_total": 1})
    with pytest.raises(Unclassified, match=r"\(h2d 1\)"):
        split_reads(Split(tiers=HITS, blind=[blind]), p)
