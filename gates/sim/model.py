"""The reference engine simulator's physics: profiles, hash chains, GPU cache, timing, outputs.

Pure: no I/O, no clock. The tier (_sim_tier) and the server (_sim_server) do the I/O.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .payload import DIGEST_SIZE, HEADER_SIZE

# Qwen3-Coder-480B-A35B FP8: 62 layers x 8 KV heads x 128 dims x 2 (K, V) x 1 byte.
QWEN3_CODER_480B_KV_BYTES_PER_TOKEN = 126_976
# Bytes per token are divided by this so a 100K-token context is ~200 MB of chunk files,
# which a 2-core test machine with a few GB of disk can hold many of.
QWEN_SCALE = 64



class Profile(BaseModel):
    """What the simulated engine is: model size, chunking, speeds, cache capacity."""

    model_config = ConfigDict(frozen=True)

    name: str
    chunk_tokens: int = Field(gt=0)
    kv_bytes_per_token: int = Field(gt=0)
    prefill_tokens_per_s: float = Field(gt=0)  # the one shared compute resource
    decode_base_ms: float = Field(gt=0)  # per output token with one request decoding
    decode_alpha: float = Field(ge=0)  # slowdown per extra request in the decode batch
    gpu_cache_chunks: int = Field(ge=0)  # LRU "GPU" prefix cache, in chunks
    # An LRU DRAM tier between the GPU cache and the storage (LMCache's local CPU backend,
    # SGLang's host pool), in chunks; 0 = none. It holds every chunk the engine computed or
    # restored (inclusive, write-through: the storage still gets every chunk).
    cpu_tier_chunks: int = Field(default=0, ge=0)
    readers: int = Field(default=4, ge=1)  # parallel storage-tier readers
    max_model_len: int = Field(gt=0)
    vocab_size: int = Field(gt=1)
    scale_note: str = ""

    @model_validator(mode="after")
    def _room_for_header(self) -> Profile:
        if self.chunk_bytes < 2 * HEADER_SIZE:
            raise ValueError(f"profile {self.name}: chunk of {self.chunk_bytes} bytes is too "
                             f"small for the {HEADER_SIZE}-byte chunk header")
        return self

    @property
    def model_id(self) -> str:
        """The served model name, e.g. kvgate-sim-tiny."""
        return f"kvgate-sim-{self.name}"

    @property
    def chunk_bytes(self) -> int:
        """Size of one chunk file: chunk_tokens x kv_bytes_per_token."""
        return self.chunk_tokens * self.kv_bytes_per_token


PROFILES: dict[str, Profile] = {
    p.name: p for p in [
        Profile(name="tiny", chunk_tokens=16, kv_bytes_per_token=1024,
                prefill_tokens_per_s=20_000, decode_base_ms=2.0, decode_alpha=0.05,
                gpu_cache_chunks=64, readers=4, max_model_len=65_536, vocab_size=32_000,
                scale_note="test profile: 16 KiB chunk files, a 1 000-token prompt "
                           "recomputes in 50 ms"),
        Profile(name="qwen3-coder-480b-scaled", chunk_tokens=256,
                kv_bytes_per_token=QWEN3_CODER_480B_KV_BYTES_PER_TOKEN // QWEN_SCALE,
                prefill_tokens_per_s=8_000, decode_base_ms=25.0, decode_alpha=0.05,
                gpu_cache_chunks=1024, readers=4, max_model_len=262_144,
                vocab_size=151_936,
                scale_note=f"Qwen3-Coder-480B FP8 on 8 GPUs: KV bytes per token 126,976 / "
                           f"{QWEN_SCALE} = 1,984 (496 KiB chunk files of 256 tokens); "
                           f"prefill and decode speeds are full-scale, not scaled, so a "
                           f"local disk restores KV ~{QWEN_SCALE}x 'faster' than a real "
                           f"tier would; throttle reads to emulate a real tier's GB/s"),
    ]
}


def get_profile(name: str) -> Profile:
    """The named built-in profile; ValueError naming the known ones otherwise."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown simulator profile {name!r}; known: "
                         f"{', '.join(sorted(PROFILES))}") from None


class FaultConfig(BaseModel):
    """Faults to inject; request numbers count generation requests from 1 since last set."""

    model_config = ConfigDict(extra="forbid")

    error_every: int = Field(default=0, ge=0)  # HTTP 500 on requests N, 2N, 3N, ...
    error_fraction: float = Field(default=0.0, ge=0.0, le=1.0)  # exactly floor(n*f) of n
    stall_every: int = Field(default=0, ge=0)
    stall_s: float = Field(default=0.0, ge=0.0)
    stall_after_tokens: int = Field(default=1, ge=0)
    drop_every: int = Field(default=0, ge=0)  # close the connection mid-stream, no [DONE]
    drop_after_tokens: int = Field(default=1, ge=0)
    corrupt_fraction: float = Field(default=0.0, ge=0.0, le=1.0)  # of chunks, by chunk hash
    read_bytes_per_s: float | None = Field(default=None, gt=0)  # storage tier read cap


def fault_hits(n: int, every: int, fraction: float = 0.0) -> bool:
    """Whether request number n (from 1) gets the fault: every Nth, or a fraction of them."""
    if every and n % every == 0:
        return True
    # The epsilon keeps 0.1 * 30 = 3.0000000000000004 from hitting one request early.
    return fraction > 0 and math.floor(n * fraction + 1e-9) > math.floor((n - 1) * fraction + 1e-9)


def text_ids(text: str) -> list[int]:
    """Token ids for a text prompt: its UTF-8 bytes (no tokenizer to download)."""
    return list(text.encode())


def chat_ids(messages: Iterable[tuple[str, str]]) -> list[int]:
    """Token ids for chat messages (role, content), in a ChatML-like template."""
    text = "".join(f"<|im_start|>{role}\n{content}<|im_end|>\n" for role, content in messages)
    return text_ids(text + "<|im_start|>assistant\n")


def _pack(ids: Sequence[int]) -> bytes:
    return struct.pack(f"<{len(ids)}I", *ids)


def root_hash(model_id: str) -> bytes:
    """The hash the chain starts from; per model, so profiles never share chunks."""
    return hashlib.blake2b(b"kvgate-sim-root\0" + model_id.encode(),
                           digest_size=DIGEST_SIZE).digest()


def chunk_hashes(ids: Sequence[int], chunk_tokens: int, root: bytes) -> list[bytes]:
    """One hash per whole chunk: blake2b(previous hash + this chunk's ids); no partial tail."""
    hashes, prev = [], root
    for start in range(0, len(ids) - chunk_tokens + 1, chunk_tokens):
        prev = hashlib.blake2b(prev + _pack(ids[start:start + chunk_tokens]),
                               digest_size=DIGEST_SIZE).digest()
        hashes.append(prev)
    return hashes


class LruCache:
    """The small "GPU" prefix cache: chunk hash -> digest of its KV, least recently used out."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._items: OrderedDict[bytes, bytes] = OrderedDict()

    def __contains__(self, h: bytes) -> bool:
        return h in self._items

    def __len__(self) -> int:
        return len(self._items)

    def get(self, h: bytes) -> bytes | None:
        """The chunk's digest, marking it most recently used; None when absent."""
        if h not in self._items:
            return None
        self._items.move_to_end(h)
        return self._items[h]

    def put(self, h: bytes, digest: bytes) -> None:
        """Insert or refresh a chunk, evicting the least recently used beyond capacity."""
        if not self.capacity:  # a tier that is off (the CPU tier in every gate): no churn
            return
        self._items[h] = digest
        self._items.move_to_end(h)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def clear(self) -> None:
        """Forget every chunk (POST /reset_prefix_cache)."""
        self._items.clear()


class PrefillPlan(BaseModel):
    """Where each part of a prompt's KV comes from, in prompt order."""

    model_config = ConfigDict(frozen=True)

    chunk_tokens: int
    gpu_chunks: int = 0
    cpu_chunks: int = 0
    storage_chunks: int = 0
    compute_chunks: int = 0
    tail_tokens: int = 0  # the partial last chunk: always recomputed, never stored

    @property
    def gpu_tokens(self) -> int:
        """Prompt tokens served by the GPU cache."""
        return self.gpu_chunks * self.chunk_tokens

    @property
    def cpu_tokens(self) -> int:
        """Prompt tokens served by the CPU (DRAM) tier."""
        return self.cpu_chunks * self.chunk_tokens

    @property
    def storage_tokens(self) -> int:
        """Prompt tokens whose KV is read from the storage tier."""
        return self.storage_chunks * self.chunk_tokens

    @property
    def recompute_tokens(self) -> int:
        """Prompt tokens prefilled on the compute resource."""
        return self.compute_chunks * self.chunk_tokens + self.tail_tokens


def plan_prefill(n_tokens: int, hashes: Sequence[bytes], chunk_tokens: int,
                 in_gpu: Callable[[bytes], bool], in_tier: Callable[[bytes], bool],
                 in_cpu: Callable[[bytes], bool] = lambda h: False) -> PrefillPlan:
    """GPU hits up to the first GPU miss, then CPU-tier hits up to the first CPU-tier miss,
    then storage hits up to the first storage miss, then compute.

    Prefix semantics as in vLLM + a KV connector: a chunk after a miss is never reused.
    """
    gpu = _run(hashes, 0, in_gpu)
    cpu = _run(hashes, gpu, in_cpu)
    storage = _run(hashes, cpu, in_tier)
    return PrefillPlan(chunk_tokens=chunk_tokens, gpu_chunks=gpu, cpu_chunks=cpu - gpu,
                       storage_chunks=storage - cpu, compute_chunks=len(hashes) - storage,
                       tail_tokens=n_tokens - len(hashes) * chunk_tokens)


def _run(hashes: Sequence[bytes], start: int, found: Callable[[bytes], bool]) -> int:
    """The index of the first chunk from start on that is not found."""
    end = start
    while end < len(hashes) and found(hashes[end]):
        end += 1
    return end


def prefill_seconds(profile: Profile, tokens: int) -> float:
    """Time the shared compute resource needs to prefill this many tokens."""
    return tokens / profile.prefill_tokens_per_s


def decode_seconds(profile: Profile, batch: int) -> float:
    """Time per output token with `batch` requests decoding: base x (1 + alpha x (batch-1))."""
    return profile.decode_base_ms * (1 + profile.decode_alpha * (max(batch, 1) - 1)) / 1000


def output_ids(digests: Sequence[bytes], tail_ids: Sequence[int], n: int,
               vocab_size: int) -> list[int]:
    """Greedy output ids: a function of the KV digests used and the uncached prompt tail."""
    seed = hashlib.blake2b(b"".join(digests) + _pack(tail_ids), digest_size=32).digest()
    stream = hashlib.shake_256(seed).digest(4 * n)
    return [int.from_bytes(stream[4 * i:4 * i + 4], "little") % vocab_size for i in range(n)]


_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo",
              "be", "da", "fu", "gi", "ho", "ju", "pe", "zo"]


def token_text(token_id: int) -> str:
    """A short, never empty text for a token id, e.g. ' kalo'."""
    return " " + _SYLLABLES[token_id % 16] + _SYLLABLES[(token_id // 16) % 16]
