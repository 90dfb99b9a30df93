"""gates.loadgen.workloads: deterministic token-id workloads and Mooncake trace replay."""

from __future__ import annotations

import json
from itertools import combinations, pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gates.loadgen import (
    EVICT,
    PROBE,
    SEED,
    WARMUP,
    PlannedRequest,
    WorkloadError,
    cold_recovery,
    mooncake_replay,
    multi_turn,
    shared_prefix,
    workload_hash,
)
from gates.loadgen.traces import MOONCAKE_BLOCK, parse_mooncake
from gates.loadgen.workloads import block_tokens

TRACE = Path(__file__).parent / "data" / "mooncake" / "sample_trace.jsonl"
VOCAB = 32000


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest shared prefix of two prompts."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


# ---- token blocks ------------------------------------------------------------------------

def test_block_tokens_is_a_pure_function_of_its_key():
    assert block_tokens("k", 100, VOCAB) == block_tokens("k", 100, VOCAB)
    assert block_tokens("k", 100, VOCAB) != block_tokens("j", 100, VOCAB)
    # Longer blocks extend shorter ones: the stream does not depend on the length asked.
    assert block_tokens("k", 1000, VOCAB)[:100] == block_tokens("k", 100, VOCAB)


def test_block_tokens_pinned_values_stay_the_same_across_versions():
    # A change here changes every workload hash: G3 could no longer match G2's records.
    assert block_tokens("kvgate", 4, 32000) == [22150, 20496, 18941, 19231]


@given(st.text(max_size=100), st.integers(0, 700), st.integers(2, 300000))
@settings(max_examples=60, deadline=None)
def test_block_tokens_exact_length_and_range(key, size, vocab):
    reserved = min(1000, vocab - 1)
    ids = block_tokens(key, size, vocab, reserved)
    assert len(ids) == size
    assert all(reserved <= t < vocab for t in ids)


def test_block_tokens_rejects_an_empty_vocabulary():
    with pytest.raises(WorkloadError, match="reserved < vocab"):
        block_tokens("k", 4, 1000, reserved=1000)


# ---- cold recovery -----------------------------------------------------------------------

def plan_cold(**kw):
    args = dict(contexts=4, context_tokens=1000, question_tokens=20, output_tokens=16, seed=7,
                vocab=VOCAB, filler_contexts=3, chunk_tokens=256)
    return cold_recovery(**{**args, **kw})


def test_cold_recovery_phases_in_order_with_exact_lengths():
    plan = plan_cold()
    assert [r.phase for r in plan.requests] == [WARMUP] * 2 + [SEED] * 4 + [EVICT] * 3 + [PROBE] * 4
    assert all(len(r.prompt) == 1000 and r.max_tokens == 1 for r in plan.phase(SEED))
    assert all(len(r.prompt) == 1000 and r.max_tokens == 1 for r in plan.phase(EVICT))
    assert all(len(r.prompt) == 1020 and r.max_tokens == 16 for r in plan.phase(PROBE))
    assert all(len(r.prompt) == 64 for r in plan.phase(WARMUP))
    assert len({r.request_id for r in plan.requests}) == len(plan.requests)


def test_cold_recovery_probe_is_its_seed_plus_a_new_question():
    plan = plan_cold()
    seeds = {r.context_id: r.prompt for r in plan.phase(SEED)}
    for probe in plan.phase(PROBE):
        assert probe.prompt[:1000] == seeds[probe.context_id]
        assert common_prefix(probe.prompt, seeds[probe.context_id]) == 1000


def test_cold_recovery_expected_kv_is_whole_chunks_of_each_context():
    plan = plan_cold()
    assert plan.expected_kv_tokens == {f"ctx-{i:04d}": 768 for i in range(4)}
    assert plan.total_expected_kv_tokens == 4 * 768
    assert plan_cold(chunk_tokens=1000).total_expected_kv_tokens == 4000


def test_cold_recovery_prompts_share_no_prefix_with_one_another():
    plan = plan_cold(contexts=50, filler_contexts=50, warmup=10, context_tokens=40)
    prompts = [r.prompt for r in plan.requests if r.phase != PROBE]
    firsts = [p[0] for p in prompts]
    assert len(set(firsts)) == len(prompts)


def test_cold_recovery_is_deterministic_and_seeded():
    assert plan_cold() == plan_cold()
    assert plan_cold(seed=8).phase(SEED)[0].prompt != plan_cold().phase(SEED)[0].prompt


@pytest.mark.parametrize("bad", [dict(contexts=0), dict(question_tokens=0),
                                 dict(filler_contexts=-1), dict(chunk_tokens=0)])
def test_cold_recovery_rejects_bad_sizes(bad):
    with pytest.raises(WorkloadError):
        plan_cold(**bad)


# ---- multi-turn and shared prefix --------------------------------------------------------

def test_multi_turn_each_turn_extends_the_previous_prompt():
    plan = multi_turn(sessions=3, turns=4, first_tokens=100, turn_tokens=30, output_tokens=20,
                      seed=1, vocab=VOCAB)
    assert len(plan.requests) == 12
    for s in range(3):
        turns = [r for r in plan.requests if r.session == f"session-{s:04d}"]
        assert [r.turn for r in turns] == [0, 1, 2, 3]
        assert [len(r.prompt) for r in turns] == [100, 150, 200, 250]
        for prev, nxt in pairwise(turns):
            assert nxt.prompt[:len(prev.prompt)] == prev.prompt
    first = [r.prompt for r in plan.requests if r.turn == 0]
    assert common_prefix(first[0], first[1]) == 0


def test_shared_prefix_groups_share_exactly_their_prefix():
    plan = shared_prefix(groups=3, per_group=4, prefix_tokens=200, suffix_tokens=50,
                         output_tokens=8, seed=3, vocab=VOCAB)
    assert len(plan.requests) == 12 and all(len(r.prompt) == 250 for r in plan.requests)
    g0 = [r.prompt for r in plan.requests if r.context_id == "group-0000"]
    g1 = [r.prompt for r in plan.requests if r.context_id == "group-0001"]
    assert all(common_prefix(g0[0], p) == 200 for p in g0[1:])
    assert common_prefix(g0[0], g1[0]) == 0


# ---- Mooncake trace replay ---------------------------------------------------------------

def test_sample_trace_replays_with_exact_lengths_and_times():
    rows = [json.loads(line) for line in TRACE.read_text().splitlines()]
    plan = mooncake_replay(TRACE.read_text(), seed=5, vocab=VOCAB)
    assert len(plan.requests) == len(rows) == 20
    for row, req in zip(rows, plan.requests, strict=True):
        assert len(req.prompt) == row["input_length"]
        assert req.max_tokens == row["output_length"]
        assert req.at == pytest.approx(row["timestamp"] / 1000)


def test_equal_leading_hash_ids_give_equal_leading_tokens():
    rows = [json.loads(line) for line in TRACE.read_text().splitlines()]
    plan = mooncake_replay(TRACE.read_text(), seed=5, vocab=VOCAB)
    checked = 0
    for i, j in combinations(range(20), 2):
        a, b = rows[i], rows[j]
        same = common_prefix(a["hash_ids"], b["hash_ids"])
        shared = common_prefix(plan.requests[i].prompt, plan.requests[j].prompt)
        full = min(a["input_length"], b["input_length"], same * MOONCAKE_BLOCK)
        # Shared blocks give shared tokens; the first different block differs at once
        # (a collision of a whole token is possible, 1/vocab, but not in this seed).
        assert shared == full
        checked += same > 0
    assert checked >= 10


def test_time_scale_and_max_requests():
    text = TRACE.read_text()
    fast = mooncake_replay(text, seed=5, vocab=VOCAB, time_scale=0.5, max_requests=5)
    slow = mooncake_replay(text, seed=5, vocab=VOCAB)
    assert len(fast.requests) == 5
    assert [r.at for r in fast.requests] == [r.at / 2 for r in slow.requests[:5]]
    assert [r.prompt for r in fast.requests] == [r.prompt for r in slow.requests[:5]]


def test_times_count_from_the_first_request():
    lines = '{"timestamp": 1000, "input_length": 10, "output_length": 2, "hash_ids": [1]}\n' \
            '{"timestamp": 3500, "input_length": 10, "output_length": 2, "hash_ids": [2]}\n'
    assert [r.at for r in mooncake_replay(lines, seed=0, vocab=VOCAB).requests] == [0.0, 2.5]


@pytest.mark.parametrize("line, field", [
    ('{"input_length": 10, "output_length": 2, "hash_ids": [1]}', "timestamp"),
    ('{"timestamp": -1, "input_length": 10, "output_length": 2, "hash_ids": [1]}', "timestamp"),
    ('{"timestamp": NaN, "input_length": 10, "output_length": 2, "hash_ids": [1]}', "timestamp"),
    ('{"timestamp": "0", "input_length": 10, "output_length": 2, "hash_ids": [1]}', "timestamp"),
    ('{"timestamp": 1e999, "input_length": 10, "output_length": 2, "hash_ids": [1]}',
     "timestamp"),
    ('{"timestamp": 0, "input_length": 0, "output_length": 2, "hash_ids": [1]}', "input_length"),
    ('{"timestamp": 0, "input_length": 1.5, "output_length": 2, "hash_ids": [1]}',
     "input_length"),
    ('{"timestamp": 0, "input_length": true, "output_length": 2, "hash_ids": [1]}',
     "input_length"),
    ('{"timestamp": 0, "input_length": 10, "hash_ids": [1]}', "output_length"),
    ('{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": []}', "hash_ids"),
    ('{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [-1]}', "hash_ids"),
    ('{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": "1"}', "hash_ids"),
    ('{"timestamp": 0, "input_length": 600, "output_length": 2, "hash_ids": [1]}', "hash_ids"),
    ('{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1, 2]}', "hash_ids"),
    ('[1, 2]', "not a JSON object"),
    ('{"timestamp": 0,', "not JSON"),
])
def test_a_bad_trace_line_names_its_line_and_field(line, field):
    good = '{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1]}'
    with pytest.raises(WorkloadError, match=field) as caught:
        parse_mooncake(f"{good}\n\n{line}\n")
    assert "trace line 3" in str(caught.value)


def test_an_empty_trace_and_bad_options_are_refused():
    with pytest.raises(WorkloadError, match="no requests"):
        mooncake_replay("\n", seed=0, vocab=VOCAB)
    with pytest.raises(WorkloadError, match="time_scale"):
        mooncake_replay(TRACE.read_text(), seed=0, vocab=VOCAB, time_scale=0)
    with pytest.raises(WorkloadError, match="max_requests"):
        mooncake_replay(TRACE.read_text(), seed=0, vocab=VOCAB, max_requests=0)


ENTRY = st.fixed_dictionaries({
    "timestamp": st.integers(0, 10**7),
    "input_length": st.integers(1, 3000),
    "output_length": st.integers(1, 100),
}).flatmap(lambda d: st.lists(st.integers(0, 6), min_size=-(-d["input_length"] // 512),
                              max_size=-(-d["input_length"] // 512))
           .map(lambda ids: {**d, "hash_ids": ids}))


@settings(max_examples=60, deadline=None)
@given(st.lists(ENTRY, min_size=1, max_size=6))
def test_prompt_length_always_equals_input_length(rows):
    plan = mooncake_replay("\n".join(json.dumps(r) for r in rows), seed=1, vocab=VOCAB)
    assert [len(r.prompt) for r in plan.requests] == [r["input_length"] for r in rows]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=80), ENTRY.map(json.dumps),
                          st.dictionaries(st.sampled_from(["timestamp", "input_length",
                                                           "output_length", "hash_ids"]),
                                          st.one_of(st.none(), st.booleans(), st.integers(),
                                                    st.floats(), st.text(max_size=5),
                                                    st.lists(st.integers(), max_size=3)))
                          .map(json.dumps)), max_size=5))
def test_arbitrary_lines_raise_only_workload_error(lines):
    try:
        entries = parse_mooncake("\n".join(lines))
    except WorkloadError as exc:
        assert str(exc).startswith("trace line ")
    else:
        assert len(entries) <= len(lines)


# ---- workload hash -----------------------------------------------------------------------

def test_workload_hash_is_stable_and_changes_with_the_recipe():
    h = workload_hash(plan_cold())
    assert h == workload_hash(plan_cold()) and len(h) == 64
    assert int(h, 16) >= 0
    assert workload_hash(plan_cold(seed=8)) != h
    assert workload_hash(plan_cold(context_tokens=1001)) != h
    assert workload_hash(plan_cold(output_tokens=17)) != h
    assert workload_hash(plan_cold(chunk_tokens=512)) != h


def test_workload_hash_pinned_for_a_small_plan():
    plan = shared_prefix(groups=1, per_group=1, prefix_tokens=2, suffix_tokens=1,
                         output_tokens=1, seed=0, vocab=VOCAB)
    assert workload_hash(plan) == workload_hash(plan.model_copy(deep=True))
    assert workload_hash(plan) == PINNED_HASH


PINNED_HASH = "4ce95428e79e8055dd09a6a7e8154031cb145fbead6b06f4232c990da9fd493b"


def test_planned_request_refuses_zero_max_tokens():
    with pytest.raises(ValueError, match="max_tokens"):
        PlannedRequest(request_id="r", phase=PROBE, prompt=[1], max_tokens=0)


def test_the_eviction_mode_is_part_of_the_workload_hash():
    from gates.loadgen import workload_hash

    plan = cold_recovery(2, 64, 8, 4, seed=1, vocab=32000, chunk_tokens=16, warmup=0)
    assert workload_hash(plan) == workload_hash(plan)  # the pinned, condition-free form
    assert workload_hash(plan, eviction="reset") != workload_hash(plan, eviction="none")
    assert workload_hash(plan, eviction="reset") != workload_hash(plan)
