"""Model specs: the attention geometry of a built-in model or of a local config.json. Pure."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .files import read_object

# Bytes per KV element. FP8 KV caches (vLLM --kv-cache-dtype fp8) store one byte per element.
DTYPE_BYTES = {"fp8": 1, "bf16": 2, "fp16": 2, "fp32": 4}
# config.json's torch_dtype (or "dtype", its newer name) describes the weights; vLLM's default
# KV dtype ("auto") follows it, so it is the right default for the KV cache too.
TORCH_DTYPES = {
    "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32",
    "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "float8_e4m3fnuz": "fp8", "fp8": "fp8",
}


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
    return spec_from_config(read_object(path, ModelError, "JSON"), path)


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
