"""The simulator's pure physics: profiles, hash chain, GPU cache, plan, timing, outputs."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from gates.sim.model import (
    PROFILES,
    QWEN3_CODER_480B_KV_BYTES_PER_TOKEN,
    FaultConfig,
    LruCache,
    Profile,
    chat_ids,
    chunk_hashes,
    decode_seconds,
    fault_hits,
    get_profile,
    output_ids,
    plan_prefill,
    prefill_seconds,
    root_hash,
    text_ids,
    token_text,
)
from gates.sim.payload import (
    HEADER_SIZE,
    chunk_payload,
    clean_digest,
    corrupt,
    is_corrupted,
    kv_digest,
    verify_payload,
)

TINY = get_profile("tiny")
ROOT = root_hash(TINY.model_id)


def test_profiles_scale_qwen_and_keep_chunks_o_direct_aligned():
    qwen = get_profile("qwen3-coder-480b-scaled")
    assert qwen.kv_bytes_per_token * 64 == QWEN3_CODER_480B_KV_BYTES_PER_TOKEN
    assert qwen.chunk_bytes == 256 * 1984
    assert "126,976" in qwen.scale_note
    for p in PROFILES.values():
        assert p.chunk_bytes % 4096 == 0
        assert p.model_id == f"kvgate-sim-{p.name}"
    # Restoring a chunk from a 1 GB/s disk beats recomputing it, by a wide margin.
    assert qwen.chunk_bytes / 1e9 < prefill_seconds(qwen, qwen.chunk_tokens) / 10


def test_unknown_profile_names_the_known_ones():
    with pytest.raises(ValueError, match="tiny"):
        get_profile("nope")


def test_profile_refuses_chunks_smaller_than_the_header():
    with pytest.raises(ValidationError, match="header"):
        Profile(name="x", chunk_tokens=1, kv_bytes_per_token=8, prefill_tokens_per_s=1,
                decode_base_ms=1, decode_alpha=0, gpu_cache_chunks=1, max_model_len=10,
                vocab_size=10)


def test_hash_chain_covers_whole_chunks_only():
    ids = list(range(100))
    hashes = chunk_hashes(ids, 16, ROOT)
    assert len(hashes) == 6  # 96 tokens; the 4-token tail is never hashed
    assert chunk_hashes(ids[:96], 16, ROOT) == hashes
    assert chunk_hashes(ids[:15], 16, ROOT) == []


def test_hash_chain_changes_from_the_edited_chunk_on():
    ids = list(range(96))
    edited = ids.copy()
    edited[40] = 9999  # in chunk 2
    a, b = chunk_hashes(ids, 16, ROOT), chunk_hashes(edited, 16, ROOT)
    assert a[:2] == b[:2]
    assert all(x != y for x, y in zip(a[2:], b[2:], strict=True))


def test_hash_chain_depends_on_position_and_model():
    block = list(range(16))
    # The same block after a different prefix is a different chunk.
    assert chunk_hashes(block * 2, 16, ROOT)[1] != chunk_hashes(block, 16, ROOT)[0]
    other = root_hash("kvgate-sim-other")
    assert chunk_hashes(block, 16, other) != chunk_hashes(block, 16, ROOT)


@given(st.lists(st.integers(0, 2**32 - 1), max_size=80),
       st.lists(st.integers(0, 2**32 - 1), max_size=40))
def test_shared_prefix_means_shared_leading_hashes(prefix, rest):
    whole = len(prefix) // 8 * 8
    assert chunk_hashes(prefix + rest, 8, ROOT)[:whole // 8] == chunk_hashes(prefix, 8, ROOT)


def test_lru_evicts_least_recently_used():
    lru = LruCache(2)
    lru.put(b"a", b"1")
    lru.put(b"b", b"2")
    assert lru.get(b"a") == b"1"  # a is now the most recent
    lru.put(b"c", b"3")
    assert b"b" not in lru and b"a" in lru and b"c" in lru
    assert lru.get(b"b") is None
    lru.clear()
    assert len(lru) == 0


def test_lru_of_zero_capacity_holds_nothing():
    lru = LruCache(0)
    lru.put(b"a", b"1")
    assert len(lru) == 0


def _plan(gpu: set, tier: set, n_chunks=6, tail=4, cpu: set = frozenset()):
    hashes = [bytes([i]) for i in range(n_chunks)]
    return plan_prefill(n_chunks * 16 + tail, hashes, 16, lambda h: h[0] in gpu,
                        lambda h: h[0] in tier, lambda h: h[0] in cpu)


def test_plan_gpu_then_cpu_tier_then_storage_then_compute():
    plan = _plan(gpu={0}, cpu={0, 1, 2}, tier={0, 1, 2, 3, 4})
    assert (plan.gpu_chunks, plan.cpu_chunks, plan.storage_chunks, plan.compute_chunks) == \
        (1, 2, 2, 1)
    assert (plan.gpu_tokens, plan.cpu_tokens, plan.storage_tokens, plan.recompute_tokens) == \
        (16, 32, 32, 20)
    # prefix semantics across the tiers: a CPU-tier chunk after a CPU-tier miss is not used
    plan = _plan(gpu=set(), cpu={0, 2}, tier={1})
    assert (plan.cpu_chunks, plan.storage_chunks, plan.compute_chunks) == (1, 1, 4)


def test_plan_gpu_then_storage_then_compute():
    plan = _plan(gpu={0, 1}, tier={0, 1, 2, 3})
    assert (plan.gpu_chunks, plan.storage_chunks, plan.compute_chunks) == (2, 2, 2)
    assert (plan.gpu_tokens, plan.storage_tokens, plan.recompute_tokens) == (32, 32, 36)


def test_plan_stops_at_the_first_miss():
    # Chunk 3 is in the tier but chunk 2 is not: prefix semantics never reuse it.
    plan = _plan(gpu=set(), tier={0, 1, 3, 4, 5})
    assert (plan.gpu_chunks, plan.storage_chunks, plan.compute_chunks) == (0, 2, 4)
    # A GPU hit after the first GPU miss is not used either; storage continues the prefix.
    plan = _plan(gpu={0, 2}, tier={1, 2})
    assert (plan.gpu_chunks, plan.storage_chunks, plan.compute_chunks) == (1, 2, 3)


def test_plan_without_a_tier_recomputes_everything_after_the_gpu():
    plan = _plan(gpu=set(), tier=set())
    assert plan.recompute_tokens == 100 and plan.storage_tokens == 0


def test_payload_is_deterministic_sized_and_checksummed():
    h = chunk_hashes(list(range(16)), 16, ROOT)[0]
    data = chunk_payload(h, TINY)
    assert len(data) == TINY.chunk_bytes
    assert data == chunk_payload(h, TINY)
    assert data[:8] == b"KVGSIM01" and h in data[:HEADER_SIZE]
    assert verify_payload(data)
    assert clean_digest(h, TINY) == kv_digest(data)


def test_corruption_flips_a_body_byte_and_changes_the_digest():
    h = chunk_hashes(list(range(16)), 16, ROOT)[0]
    data = chunk_payload(h, TINY)
    bad = corrupt(data, h)
    assert len(bad) == len(data)
    assert sum(a != b for a, b in zip(data, bad, strict=True)) == 1
    assert not verify_payload(bad)
    assert kv_digest(bad) != kv_digest(data)


def test_corruption_fraction_is_fixed_per_chunk():
    hashes = chunk_hashes(list(range(16 * 400)), 16, ROOT)
    hit = [h for h in hashes if is_corrupted(h, 0.25)]
    assert 60 < len(hit) < 140
    assert hit == [h for h in hashes if is_corrupted(h, 0.25)]
    assert not any(is_corrupted(h, 0.0) for h in hashes)
    assert all(is_corrupted(h, 1.0) for h in hashes)


def test_outputs_are_a_function_of_the_kv_used():
    hashes = chunk_hashes(list(range(100)), 16, ROOT)
    digests = [clean_digest(h, TINY) for h in hashes]
    tail = list(range(96, 100))
    out = output_ids(digests, tail, 20, TINY.vocab_size)
    assert out == output_ids(digests, tail, 20, TINY.vocab_size)
    assert len(out) == 20 and all(0 <= t < TINY.vocab_size for t in out)
    assert output_ids(digests, tail, 5, TINY.vocab_size) == out[:5]
    bad = digests.copy()
    bad[3] = kv_digest(corrupt(chunk_payload(hashes[3], TINY), hashes[3]))
    assert output_ids(bad, tail, 20, TINY.vocab_size) != out
    assert output_ids(digests, [*tail[:-1], 7], 20, TINY.vocab_size) != out


def test_decode_slows_with_the_batch():
    assert decode_seconds(TINY, 1) == pytest.approx(TINY.decode_base_ms / 1000)
    assert decode_seconds(TINY, 0) == decode_seconds(TINY, 1)
    assert decode_seconds(TINY, 11) == pytest.approx(
        TINY.decode_base_ms * (1 + TINY.decode_alpha * 10) / 1000)
    assert prefill_seconds(TINY, 20_000) == pytest.approx(1.0)


def test_every_nth_fault_hits_exactly():
    assert [n for n in range(1, 10) if fault_hits(n, 3)] == [3, 6, 9]
    assert not any(fault_hits(n, 0) for n in range(1, 10))


@pytest.mark.parametrize("fraction", [0.1, 0.25, 0.3, 1 / 3, 0.5, 1.0])
def test_fractional_faults_hit_floor_n_times_fraction(fraction):
    for n in (10, 30, 100):
        hits = sum(fault_hits(i, 0, fraction) for i in range(1, n + 1))
        assert hits == int(n * fraction + 1e-9)


def test_fault_config_rejects_unknown_fields():
    with pytest.raises(ValidationError):
        FaultConfig.model_validate({"error_evry": 3})
    assert FaultConfig().read_bytes_per_s is None


def test_text_and_chat_ids_are_deterministic_bytes():
    assert text_ids("hé") == [104, 195, 169]
    ids = chat_ids([("user", "hi")])
    assert ids == chat_ids([("user", "hi")]) and ids != chat_ids([("user", "ho")])
    assert bytes(ids).decode().endswith("<|im_start|>assistant\n")


def test_token_text_is_short_and_never_empty():
    assert all(1 < len(token_text(t)) <= 5 for t in range(0, 40_000, 97))
