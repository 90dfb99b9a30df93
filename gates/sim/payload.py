"""The KV bytes of a simulated chunk: a header with a checksum, a keystream body, digests.

Pure: no I/O. A chunk's bytes follow from its hash alone, so a tier read can be checked
against what the chunk must be, and a recomputed chunk needs no bytes at all.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from typing import Protocol


class Profile(Protocol):
    """What a chunk's bytes depend on of a simulator profile (gates.sim.model.Profile)."""

    chunk_tokens: int
    kv_bytes_per_token: int

    @property
    def chunk_bytes(self) -> int: ...


MAGIC = b"KVGSIM01"
HEADER = struct.Struct("<8s16sIIQ16s")  # magic, chunk hash, tokens, bytes/token, body, checksum
HEADER_SIZE = 64  # HEADER.size (56) padded, so the body starts on a round offset
DIGEST_SIZE = 16

KEYSTREAM_SALT = b"kvgate-kv"
SPOT_BLOCKS = 4  # keystream blocks a read chunk is checked against, besides its checksum


def chunk_payload(h: bytes, profile: Profile) -> bytes:
    """The KV bytes of a chunk: a header with a body checksum, then a body derived from h."""
    # PBKDF2 as a keystream: full entropy, so a deduplicating or compressing array cannot
    # make the simulated KV cheaper than real KV, and OpenSSL runs it without the GIL
    # (shake_256 holds it ~1 ms per chunk, which would jitter the event loop's timing).
    body = hashlib.pbkdf2_hmac("sha512", h, KEYSTREAM_SALT, 1,
                               dklen=profile.chunk_bytes - HEADER_SIZE)
    header = HEADER.pack(MAGIC, h, profile.chunk_tokens, profile.kv_bytes_per_token, len(body),
                         hashlib.blake2b(body, digest_size=DIGEST_SIZE).digest())
    return header.ljust(HEADER_SIZE, b"\0") + body


def verify_payload(data: bytes) -> bool:
    """Whether a chunk's header is ours and its body matches the checksum in it."""
    if len(data) < HEADER_SIZE:
        return False
    magic, _, _, _, body_len, checksum = HEADER.unpack_from(data)
    body = data[HEADER_SIZE:]
    return (magic == MAGIC and body_len == len(body)
            and hashlib.blake2b(body, digest_size=DIGEST_SIZE).digest() == checksum)


def keystream_block(h: bytes, index: int) -> bytes:
    """Bytes 64 x (index - 1) to 64 x index of chunk h's body, made alone (index from 1)."""
    # PBKDF2 with one iteration: block i of its output is HMAC(h, salt || INT(i)), RFC 8018
    # section 5.2, so any 64 bytes of a body can be checked without making the whole body.
    return hmac.new(h, KEYSTREAM_SALT + index.to_bytes(4, "big"), "sha512").digest()


def _spot_checked(h: bytes, body: bytes, checksum: bytes) -> bool:
    """Whether the body's first, last and SPOT_BLOCKS - 2 checksum-chosen blocks are h's own."""
    # Cheap, not proof against a forger who knows this code: one could keep the checked blocks
    # and the checksum consistent over a body that is otherwise wrong. The simulator is never
    # procurement evidence; this catches corruption, truncation and another chunk's file.
    blocks = len(body) // 64
    if blocks == 0:
        return body == keystream_block(h, 1)[:len(body)]
    picks = {0, blocks - 1} | {int.from_bytes(checksum[i:i + 4], "little") % blocks
                               for i in range(0, 4 * (SPOT_BLOCKS - 2), 4)}
    return all(body[i * 64:(i + 1) * 64] == keystream_block(h, i + 1) for i in picks)


def _clean(h: bytes, tokens: int, bytes_per_token: int) -> bytes:
    return hashlib.blake2b(b"kvgate-clean\0" + h + struct.pack("<II", tokens, bytes_per_token),
                           digest_size=DIGEST_SIZE).digest()


def clean_digest(h: bytes, profile: Profile) -> bytes:
    """The digest of a chunk's correctly computed KV: derived from its hash, no bytes made."""
    # Recompute needs no bytes: making each chunk's body here (PBKDF2 over the whole chunk)
    # was CPU work under the compute lock that grew with the chunk size.
    return _clean(h, profile.chunk_tokens, profile.kv_bytes_per_token)


def kv_digest(data: bytes) -> bytes:
    """Digest of the KV bytes actually used; the outputs are a function of these.

    A chunk read back whole and unchanged (header, checksum and spot-checked keystream blocks)
    gives its clean digest; any other bytes give a digest of those bytes, so outputs differ.
    """
    if verify_payload(data) and not any(data[HEADER.size:HEADER_SIZE]):
        _, h, tokens, bytes_per_token, _, checksum = HEADER.unpack_from(data)
        if tokens * bytes_per_token == len(data) and _spot_checked(h, data[HEADER_SIZE:],
                                                                   checksum):
            return _clean(h, tokens, bytes_per_token)
    return hashlib.blake2b(b"kvgate-read\0" + data, digest_size=DIGEST_SIZE).digest()


def is_corrupted(h: bytes, fraction: float) -> bool:
    """Whether the corruption fault hits this chunk: fixed per chunk, like a bad sector."""
    draw = int.from_bytes(hashlib.blake2b(b"corrupt\0" + h, digest_size=8).digest(), "little")
    return draw < fraction * 2**64


def corrupt(data: bytes, h: bytes) -> bytes:
    """The chunk with one body byte flipped, at a place derived from its hash."""
    out = bytearray(data)
    pos = HEADER_SIZE + int.from_bytes(h[:8], "little") % (len(out) - HEADER_SIZE)
    out[pos] ^= 0xFF
    return bytes(out)
