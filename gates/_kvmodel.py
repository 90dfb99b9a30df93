"""KV-cache geometry and workload sizing: bytes per token, chunk files, working set. Pure."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ._units import UnitError, parse_size

# Bytes per KV element. FP8 KV caches (vLLM --kv-cache-dtype fp8) store one byte per element.
DTYPE_BYTES = {"fp8": 1, "bf16": 2, "fp16": 2, "fp32": 4}
# config.json's torch_dtype (or "dtype", its newer name) describes the weights; vLLM's default
# KV dtype ("auto") follows it, so it is the right default for the KV cache too.
TORCH_DTYPES = {
    "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32",
    "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "float8_e4m3fnuz": "fp8", "fp8": "fp8",
}
LMCACHE_CHUNK_TOKENS = 256


class ModelError(ValueError):
    """A model that cannot be found or whose config.json cannot be read."""


class ModelSpec(BaseModel):
    """The attention geometry that decides KV-cache size."""

    model_config = ConfigDict(frozen=True)

    name: str
    attention: Literal["gqa", "mla"]
    layers: int = Field(gt=0)
    kv_heads: int | None = Field(default=None, gt=0)
    head_dim: int | None = Field(default=None, gt=0)
    kv_lora_rank: int | None = Field(default=None, gt=0)
    qk_rope_head_dim: int | None = Field(default=None, gt=0)
    dtype: str = "bf16"  # the KV dtype used when the caller says "auto"
    source: str = "built-in catalogue"

    @model_validator(mode="after")
    def _complete(self) -> ModelSpec:
        need = ("kv_heads", "head_dim") if self.attention == "gqa" else (
            "kv_lora_rank", "qk_rope_head_dim")
        missing = [k for k in need if getattr(self, k) is None]
        if missing:
            raise ValueError(f"{self.name}: {self.attention.upper()} needs {', '.join(missing)}")
        if self.dtype not in DTYPE_BYTES:
            raise ValueError(f"{self.name}: unknown KV dtype {self.dtype!r}")
        return self


CATALOGUE = {
    # Figures from each model's config.json on Hugging Face. The seed ran Qwen3-Coder-480B
    # as an FP8 checkpoint with an FP8 KV cache: 126,976 B/token.
    "qwen3-coder-480b-a35b": ModelSpec(name="Qwen3-Coder-480B-A35B", attention="gqa", layers=62,
                                       kv_heads=8, head_dim=128, dtype="fp8"),
    "qwen2.5-32b": ModelSpec(name="Qwen2.5-32B", attention="gqa", layers=64, kv_heads=8,
                             head_dim=128),
    "llama-3.1-70b": ModelSpec(name="Llama-3.1-70B", attention="gqa", layers=80, kv_heads=8,
                               head_dim=128),
    "deepseek-v3": ModelSpec(name="DeepSeek-V3/R1", attention="mla", layers=61,
                             kv_lora_rank=512, qk_rope_head_dim=64),
}
ALIASES = {
    "qwen3-coder-480b": "qwen3-coder-480b-a35b", "qwen3-coder-480b-a35b-instruct":
    "qwen3-coder-480b-a35b", "qwen3-coder-480b-a35b-instruct-fp8": "qwen3-coder-480b-a35b",
    "qwen3-coder-480b-fp8": "qwen3-coder-480b-a35b", "qwen2.5-32b-instruct": "qwen2.5-32b",
    "llama-3.1-70b-instruct": "llama-3.1-70b", "meta-llama-3.1-70b": "llama-3.1-70b",
    "meta-llama-3.1-70b-instruct": "llama-3.1-70b", "deepseek-r1": "deepseek-v3",
    "deepseek-v3/r1": "deepseek-v3", "deepseek-v3-0324": "deepseek-v3",
}


def _int_key(cfg: dict, key: str, path: Path) -> int:
    value = cfg[key]
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ModelError(f"{path}: key {key!r} must be a positive integer, got {value!r}")
    return value


def dtype_from_config(value: object, path: Path | str = "config.json") -> str:
    """The KV dtype name for a config.json torch_dtype such as "bfloat16"."""
    if not isinstance(value, str) or value.lower().removeprefix("torch.") not in TORCH_DTYPES:
        raise ModelError(f"{path}: key 'torch_dtype' has {value!r}, not one of "
                         f"{', '.join(sorted(TORCH_DTYPES))}")
    return TORCH_DTYPES[value.lower().removeprefix("torch.")]


def spec_from_config(cfg: dict, path: Path | str = "config.json") -> ModelSpec:
    """A ModelSpec from a parsed Hugging Face config.json (GQA/MHA or MLA)."""
    path = Path(path)
    if "num_hidden_layers" not in cfg and isinstance(cfg.get("text_config"), dict):
        # Multimodal checkpoints keep the language model's geometry in text_config.
        cfg = {**cfg["text_config"], **{k: cfg[k] for k in ("torch_dtype", "dtype") if k in cfg}}
    if "num_hidden_layers" not in cfg:
        raise ModelError(f"{path}: missing key 'num_hidden_layers'")
    layers = _int_key(cfg, "num_hidden_layers", path)
    raw_dtype = cfg.get("torch_dtype", cfg.get("dtype"))
    dtype = dtype_from_config(raw_dtype, path) if raw_dtype is not None else "bf16"
    name = cfg.get("_name_or_path") or path.parent.name or path.name
    source = f"{path}" + ("" if raw_dtype is not None else " (no torch_dtype: bf16 assumed)")
    if cfg.get("kv_lora_rank") is not None:
        # MLA (DeepSeek-V2/V3, Kimi K2): one latent vector per token per layer; the
        # num_key_value_heads these configs also carry does not size the cache.
        for key in ("kv_lora_rank", "qk_rope_head_dim"):
            if key not in cfg:
                raise ModelError(f"{path}: MLA config (has kv_lora_rank) is missing key {key!r}")
        return ModelSpec(name=name, attention="mla", layers=layers, dtype=dtype, source=source,
                         kv_lora_rank=_int_key(cfg, "kv_lora_rank", path),
                         qk_rope_head_dim=_int_key(cfg, "qk_rope_head_dim", path))
    if "num_attention_heads" not in cfg and "num_key_value_heads" not in cfg:
        raise ModelError(f"{path}: missing key 'num_key_value_heads' (and 'num_attention_heads')")
    # Transformers' own default: a config without num_key_value_heads is plain multi-head.
    kv_key = "num_key_value_heads" if "num_key_value_heads" in cfg else "num_attention_heads"
    kv_heads = _int_key(cfg, kv_key, path)
    if cfg.get("head_dim") is not None:
        # Explicit head_dim wins: Qwen3-Coder-480B has 6144 / 96 = 64 but head_dim 128.
        head_dim = _int_key(cfg, "head_dim", path)
    else:
        for key in ("hidden_size", "num_attention_heads"):
            if key not in cfg:
                raise ModelError(f"{path}: no 'head_dim' and missing key {key!r} to derive it")
        hidden, heads = _int_key(cfg, "hidden_size", path), _int_key(cfg, "num_attention_heads",
                                                                     path)
        if hidden % heads:
            raise ModelError(f"{path}: hidden_size {hidden} is not a multiple of "
                             f"num_attention_heads {heads}; give 'head_dim'")
        head_dim = hidden // heads
    return ModelSpec(name=name, attention="gqa", layers=layers, kv_heads=kv_heads,
                     head_dim=head_dim, dtype=dtype, source=source)


def read_config(path: Path | str) -> ModelSpec:
    """A ModelSpec from a local config.json file (or a folder holding one); never downloads."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelError(f"{path}: cannot read it: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ModelError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(cfg, dict):
        raise ModelError(f"{path}: expected a JSON object at the top level")
    return spec_from_config(cfg, path)


def resolve_model(model: str | Path | ModelSpec) -> ModelSpec:
    """A catalogue name (case-insensitive, "org/" prefix ignored), a config.json path, or a spec."""
    if isinstance(model, ModelSpec):
        return model
    text = str(model)
    if isinstance(model, Path) or text.endswith(".json") or Path(text).is_dir():
        return read_config(text)
    for key in (text.strip().lower(), text.strip().lower().rsplit("/", 1)[-1]):
        key = ALIASES.get(key, key)
        if key in CATALOGUE:
            return CATALOGUE[key]
    raise ModelError(f"unknown model {text!r}: use one of {', '.join(sorted(CATALOGUE))} "
                     "or the path of a local config.json")


def resolve_dtype(dtype: str, spec: ModelSpec) -> str:
    """The KV dtype: "auto" means the model's own; aliases like "bfloat16" are accepted."""
    name = dtype.strip().lower()
    if name == "auto":
        return spec.dtype
    name = TORCH_DTYPES.get(name, name)
    if name not in DTYPE_BYTES:
        raise ModelError(f"unknown KV dtype {dtype!r}: use fp8, bf16, fp16, fp32 or auto")
    return name


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
