"""gates.model.workingset: a sweep's sizes as whole contexts, and the tiers drawn beside them."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gates.model import Tier, space_needed, sweep_forecast, sweep_sizes, tiers
from gates.model.workingset import fewest_contexts

MiB = 1024**2


def test_the_default_series_doubles_from_the_smallest_working_set_in_odd_contexts():
    sizes = sweep_sizes([], concurrency=8, context_bytes=2 * MiB)
    assert [s.contexts for s in sizes] == [9, 19, 37, 73, 145]
    assert [s.working_set for s in sizes] == [c * 2 * MiB for c in (9, 19, 37, 73, 145)]
    assert all(s.asked == 0 for s in sizes)


def test_an_asked_size_takes_the_whole_odd_contexts_that_hold_it():
    sizes = sweep_sizes([18 * MiB, 20 * MiB + 1, 64 * MiB], concurrency=8,
                        context_bytes=2 * MiB)
    assert [(s.asked, s.contexts) for s in sizes] == [(18 * MiB, 9), (20 * MiB + 1, 11),
                                                       (64 * MiB, 33)]


def test_a_size_below_what_the_concurrency_needs_is_refused_naming_it_and_the_floor():
    with pytest.raises(ValueError) as caught:
        sweep_sizes([4 * MiB], concurrency=8, context_bytes=2 * MiB)
    text = str(caught.value)
    assert "sweep.sizes[0] = 4 MiB" in text and "9 contexts of 2 MiB = 18 MiB" in text


def test_two_sizes_that_come_to_the_same_contexts_are_refused():
    with pytest.raises(ValueError, match=r"sweep.sizes\[0\] and \[1\] .* both come to 9"):
        sweep_sizes([17 * MiB, 18 * MiB], concurrency=8, context_bytes=2 * MiB)


def test_a_context_without_kv_is_refused():
    with pytest.raises(ValueError, match="holds no KV"):
        sweep_sizes([], concurrency=8, context_bytes=0)


@given(st.integers(1, 64), st.integers(1, 4 * MiB),
       st.lists(st.integers(1, 2**34), min_size=1, max_size=8, unique=True))
def test_every_point_has_more_contexts_than_requests_in_flight_and_an_odd_number(
        concurrency, context_bytes, asked):
    try:
        sizes = sweep_sizes(sorted(asked), concurrency, context_bytes)
    except ValueError as exc:  # refused, with the key named: never a wrong workload
        assert "sweep.sizes[" in str(exc)
        return
    for s in sizes:
        assert s.contexts > concurrency and s.contexts % 2 == 1
        assert s.working_set == s.contexts * context_bytes >= s.asked
    assert [s.contexts for s in sizes] == sorted({s.contexts for s in sizes})
    assert fewest_contexts(concurrency) <= sizes[0].contexts


def test_the_target_must_hold_the_largest_point_in_both_arms():
    sizes = sweep_sizes([18 * MiB, 64 * MiB], concurrency=8, context_bytes=2 * MiB)
    assert space_needed(sizes) == 2 * 66 * MiB


def test_tiers_are_the_known_ones_smallest_first():
    found = tiers(memory_bytes=24 * 1024 * MiB, cpu_tier=None, gpu_cache=MiB)
    assert [(t.name, t.bytes) for t in found] == [("GPU KV cache", MiB),
                                                  ("host memory (page cache)", 24 * 1024 * MiB)]
    assert [t.source for t in tiers(None, 8 * MiB)] == [
        "the candidate arm's cpu_tier ([sweep] cpu_tier where set)"]


def test_the_forecast_gives_no_gain_where_memory_holds_the_set_and_the_ratio_beyond():
    gpu = Tier(name="GPU KV cache", bytes=12 * MiB, source="t", kind="gpu")
    cpu = Tier(name="CPU tier", bytes=24 * MiB, source="t", kind="cpu")
    f = sweep_forecast([10 * MiB, 22 * MiB, 42 * MiB], [cpu, gpu], (10e6, "[sizing] baseline_bw"),
                       (1e9, "G1's KV-restore bandwidth"))
    assert [(p.served_by, p.ttft_reduction) for p in f.points] == [
        ("GPU KV cache", 0.0), ("CPU tier", 0.0), ("storage", pytest.approx(99.0))]
    assert f.points[2].throughput_gain == pytest.approx(9900.0)  # an upper bound: no decode
    assert f.assumptions[0] == "baseline 10 MB/s ([sizing] baseline_bw), candidate 1 GB/s " \
        "(G1's KV-restore bandwidth)"
    assert any("upper bound" in a for a in f.assumptions)
