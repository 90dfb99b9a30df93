"""KV-cache geometry and workload sizing: bytes per token, chunk files, working set. Pure."""

from __future__ import annotations

import math
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ..core.quantities import UnitError, parse_size
from .spec import DTYPE_BYTES, ModelError, ModelSpec, resolve_dtype, resolve_model

LMCACHE_CHUNK_TOKENS = 256


def parse_tokens(value: int | str) -> int:
    """Token count from 32768, "32k" or "1M"; k and M are binary (128k = 131,072 tokens)."""
    if isinstance(value, str) and not re.fullmatch(r"\s*[0-9.]+\s*[kKmM]?\s*", value):
        # parse_size would read "32KB" as 32,000: not what anyone means by a context length.
        raise UnitError(f"{value!r} is not a token count (write it like 32768, '32k' or '1M')")
    return parse_size(value)


class KVGeometry(BaseModel):
    """KV bytes per token for one model, dtype and tensor-parallel size."""

    model_config = ConfigDict(frozen=True)

    model: str
    attention: Literal["gqa", "mla"]
    dtype: str
    tp: int
    bytes_per_token: int  # the model's logical KV, all heads once
    per_rank_bytes_per_token: int
    stored_bytes_per_token: int  # what all ranks together write and read
    heads_per_rank: int | None
    replication: float  # stored / logical
    note: str


def kv_geometry(model: str | ModelSpec, dtype: str = "auto", tp: int = 1) -> KVGeometry:
    """Bytes per token: GQA 2·layers·kv_heads·head_dim·bytes, MLA layers·(rank+rope)·bytes."""
    spec = resolve_model(model)
    dtype = resolve_dtype(dtype, spec)
    if tp < 1:
        raise ModelError(f"tensor-parallel size must be >= 1, got {tp}")
    size = DTYPE_BYTES[dtype]
    if spec.attention == "mla":
        logical = spec.layers * (spec.kv_lora_rank + spec.qk_rope_head_dim) * size
        note = ("MLA: the latent is not split by head, so every rank holds and writes "
                f"the full {logical:,} B/token ({tp}× stored; a connector that keeps one copy "
                "and broadcasts it stores 1/TP of that)" if tp > 1 else "MLA latent cache")
        return KVGeometry(model=spec.name, attention="mla", dtype=dtype, tp=tp,
                          bytes_per_token=logical, per_rank_bytes_per_token=logical,
                          stored_bytes_per_token=logical * tp, heads_per_rank=None,
                          replication=float(tp), note=note)
    heads = spec.kv_heads
    if heads % tp and tp % heads:
        # vLLM refuses this too: KV heads must split evenly, or replicate evenly.
        raise ModelError(f"{spec.name}: {heads} KV heads cannot be split over TP {tp} "
                         "(one must divide the other)")
    per_rank_heads = max(1, heads // tp)
    per_head = 2 * spec.layers * spec.head_dim * size  # K and V
    logical = per_head * heads
    per_rank = per_head * per_rank_heads
    if tp > heads:
        note = (f"TP {tp} > {heads} KV heads: each head is replicated on {tp // heads} ranks, "
                f"so {tp // heads}× the logical KV is stored")
    else:
        note = f"{per_rank_heads} KV head(s) per rank; no replication"
    return KVGeometry(model=spec.name, attention="gqa", dtype=dtype, tp=tp,
                      bytes_per_token=logical, per_rank_bytes_per_token=per_rank,
                      stored_bytes_per_token=per_rank * tp, heads_per_rank=per_rank_heads,
                      replication=per_rank * tp / logical, note=note)


class Chunking(BaseModel):
    """Chunk files for one context: LMCache writes one file per chunk per rank."""

    chunk_tokens: int
    chunk_file_bytes: int  # a full chunk on one rank
    chunks_per_context: int
    files_per_context: int
    last_chunk_tokens: int  # the partial tail; some engines do not store it
    context_stored_bytes: int


def chunking(geometry: KVGeometry, context_tokens: int,
             chunk_tokens: int = LMCACHE_CHUNK_TOKENS) -> Chunking:
    """Chunk file size and count for a context (per-rank files; file headers not counted)."""
    if chunk_tokens < 1 or context_tokens < 0:
        raise ModelError("chunk size must be >= 1 token and the context >= 0 tokens")
    chunks = math.ceil(context_tokens / chunk_tokens)
    tail = context_tokens - (chunks - 1) * chunk_tokens if chunks else 0
    return Chunking(chunk_tokens=chunk_tokens,
                    chunk_file_bytes=chunk_tokens * geometry.per_rank_bytes_per_token,
                    chunks_per_context=chunks, files_per_context=chunks * geometry.tp,
                    last_chunk_tokens=tail,
                    context_stored_bytes=context_tokens * geometry.stored_bytes_per_token)


class Sizing(BaseModel):
    """What a workload needs from the tier: capacity and write bandwidth."""

    sessions: int
    context_tokens: int
    reuse: int
    context_bytes: int
    working_set_bytes: int
    fill: float
    capacity_bytes: int
    new_contexts_per_s: float
    write_bps: float
    turnover_s: float | None  # how long until the tier has rewritten the working set once


def size_workload(geometry: KVGeometry, sessions: int, context_tokens: int, reuse: int = 1,
                  new_contexts_per_s: float = 0.0, fill: float = 0.8) -> Sizing:
    """Working set = sessions × reuse × context × stored bytes/token; capacity = that / fill."""
    if sessions < 0 or context_tokens < 0 or reuse < 1 or new_contexts_per_s < 0:
        raise ModelError("sessions and context must be >= 0, reuse >= 1, new contexts/s >= 0")
    if not 0 < fill <= 1:
        raise ModelError(f"fill must be in (0, 1], got {fill}")
    context_bytes = context_tokens * geometry.stored_bytes_per_token
    working = sessions * reuse * context_bytes
    write = new_contexts_per_s * context_bytes
    return Sizing(sessions=sessions, context_tokens=context_tokens, reuse=reuse,
                  context_bytes=context_bytes, working_set_bytes=working, fill=fill,
                  # Flash and filesystems slow down when full: plan to fill only part of it.
                  capacity_bytes=math.ceil(working / fill), new_contexts_per_s=new_contexts_per_s,
                  write_bps=write, turnover_s=working / write if write > 0 else None)


def fmt_tokens(tokens: int) -> str:
    """Token count as people say it: 32768 -> "32K", 131072 -> "128K", 1000 -> "1,000"."""
    if tokens >= 1024**2 and tokens % 1024**2 == 0:
        return f"{tokens // 1024**2}M"
    return f"{tokens // 1024}K" if tokens >= 1024 and tokens % 1024 == 0 else f"{tokens:,}"


def fmt_bytes(n: float) -> str:
    """Bytes in decimal units, as storage is sold: 33285996544 -> "33.3 GB"."""
    for unit, factor in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= factor:
            return f"{n / factor:.3g} {unit}"
    return f"{n:.0f} B"
