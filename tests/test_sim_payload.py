"""A simulated chunk's bytes and digests: a read chunk is clean only when it is its own."""

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from gates.sim.model import chunk_hashes, get_profile, root_hash
from gates.sim.payload import (
    HEADER,
    HEADER_SIZE,
    KEYSTREAM_SALT,
    chunk_payload,
    clean_digest,
    keystream_block,
    kv_digest,
    verify_payload,
)

TINY = get_profile("tiny")
QWEN = get_profile("qwen3-coder-480b-scaled")
HASHES = chunk_hashes(list(range(16 * 8)), 16, root_hash(TINY.model_id))


def _resealed(data: bytes, body: bytes) -> bytes:
    """The chunk with a new body and a checksum recomputed for it: a forgery that verifies."""
    fields = list(HEADER.unpack_from(data))
    fields[4], fields[5] = len(body), hashlib.blake2b(body, digest_size=16).digest()
    return HEADER.pack(*fields).ljust(HEADER_SIZE, b"\0") + body


def test_a_chunk_read_back_unchanged_gives_its_clean_digest():
    for profile in (TINY, QWEN):
        data = chunk_payload(HASHES[0], profile)
        assert kv_digest(data) == clean_digest(HASHES[0], profile)


def test_another_chunks_file_gives_that_chunks_digest_not_this_ones():
    other = chunk_payload(HASHES[1], TINY)
    assert kv_digest(other) == clean_digest(HASHES[1], TINY) != clean_digest(HASHES[0], TINY)


def test_a_forged_body_with_a_valid_checksum_is_not_clean():
    data = chunk_payload(HASHES[0], TINY)
    for body in (bytes(len(data) - HEADER_SIZE),  # zeros: what a thin-provisioned read gives
                 chunk_payload(HASHES[1], TINY)[HEADER_SIZE:]):  # another chunk's body
        forged = _resealed(data, body)
        assert verify_payload(forged)
        assert kv_digest(forged) != clean_digest(HASHES[0], TINY)


def test_a_header_that_says_another_shape_is_not_clean():
    data = bytearray(chunk_payload(HASHES[0], TINY))
    fields = list(HEADER.unpack_from(data))
    fields[2], fields[3] = 32, 512  # the same size, another tokens x bytes-per-token
    data[:HEADER.size] = HEADER.pack(*fields)
    assert verify_payload(bytes(data))
    assert kv_digest(bytes(data)) != clean_digest(HASHES[0], TINY)


def test_truncated_or_empty_reads_are_not_clean():
    data = chunk_payload(HASHES[0], TINY)
    for bad in (b"", data[:HEADER_SIZE], data[:-1]):
        assert kv_digest(bad) != clean_digest(HASHES[0], TINY)


@given(st.integers(min_value=0, max_value=TINY.chunk_bytes - 1),
       st.integers(min_value=1, max_value=255))
def test_any_byte_changed_anywhere_is_not_clean(position, flip):
    data = bytearray(chunk_payload(HASHES[2], TINY))
    data[position] ^= flip
    assert kv_digest(bytes(data)) != clean_digest(HASHES[2], TINY)


@given(st.binary(min_size=16, max_size=16), st.integers(min_value=1, max_value=300))
def test_a_keystream_block_is_that_block_of_the_pbkdf2_body(h, index):
    body = hashlib.pbkdf2_hmac("sha512", h, KEYSTREAM_SALT, 1, dklen=64 * index)
    assert keystream_block(h, index) == body[-64:]
