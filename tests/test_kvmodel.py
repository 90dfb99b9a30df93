"""gates.model.kv: KV bytes per token, config.json reading, chunk files, workload sizing."""

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gates.core.quantities import UnitError
from gates.model import (
    CATALOGUE,
    ModelError,
    chunking,
    fmt_bytes,
    fmt_tokens,
    kv_geometry,
    parse_tokens,
    size_workload,
)
from gates.model.spec import ModelSpec, read_config, resolve_model, spec_from_config

MODELS = Path(__file__).parent / "data" / "models"


# ---- bytes per token: hand-computed --------------------------------------------------------

@pytest.mark.parametrize(("model", "dtype", "expected"), [
    ("qwen3-coder-480b", "fp8", 126_976),  # 2 × 62 × 8 × 128 × 1
    ("qwen3-coder-480b", "bf16", 253_952),  # 2 × 62 × 8 × 128 × 2
    ("qwen3-coder-480b", "fp16", 253_952),
    ("qwen2.5-32b", "bf16", 262_144),  # 2 × 64 × 8 × 128 × 2
    ("llama-3.1-70b", "bf16", 327_680),  # 2 × 80 × 8 × 128 × 2
    ("llama-3.1-70b", "fp8", 163_840),
    ("deepseek-v3", "bf16", 70_272),  # 61 × (512 + 64) × 2
    ("deepseek-r1", "fp8", 35_136),  # 61 × (512 + 64) × 1
])
def test_bytes_per_token_matches_hand_computation(model, dtype, expected):
    assert kv_geometry(model, dtype).bytes_per_token == expected


def test_128k_context_of_qwen3_coder_at_bf16_is_33_3_gb():
    g = kv_geometry("qwen3-coder-480b", "bf16")
    assert parse_tokens("128k") == 131_072
    assert 131_072 * g.bytes_per_token == 33_285_996_544
    assert fmt_bytes(131_072 * g.bytes_per_token) == "33.3 GB"


def test_auto_dtype_is_the_models_own():
    # The catalogue's Qwen3-Coder-480B is the seed's FP8 deployment; the others are BF16.
    assert kv_geometry("qwen3-coder-480b").dtype == "fp8"
    assert kv_geometry("qwen2.5-32b").dtype == "bf16"
    assert kv_geometry("qwen2.5-32b", "bfloat16").dtype == "bf16"
    with pytest.raises(ModelError, match="unknown KV dtype 'int3'"):
        kv_geometry("qwen2.5-32b", "int3")


# ---- tensor parallelism ----------------------------------------------------------------

def test_gqa_splits_heads_over_ranks_without_replication():
    g = kv_geometry("qwen3-coder-480b", "fp8", tp=8)
    assert (g.heads_per_rank, g.per_rank_bytes_per_token) == (1, 15_872)  # 126,976 / 8
    assert g.stored_bytes_per_token == 126_976
    assert g.replication == 1.0
    g4 = kv_geometry("qwen3-coder-480b", "fp8", tp=4)
    assert (g4.heads_per_rank, g4.per_rank_bytes_per_token) == (2, 31_744)


def test_gqa_replicates_heads_when_tp_exceeds_kv_heads():
    # 8 KV heads over 16 ranks: one head per rank, each held by two ranks.
    g = kv_geometry("llama-3.1-70b", "bf16", tp=16)
    assert g.heads_per_rank == 1
    assert g.per_rank_bytes_per_token == 2 * 80 * 128 * 2
    assert g.stored_bytes_per_token == 2 * 327_680
    assert g.replication == 2.0
    assert "replicated on 2 ranks" in g.note


def test_tp_that_neither_divides_nor_is_divided_by_kv_heads_is_refused():
    with pytest.raises(ModelError, match="8 KV heads cannot be split over TP 3"):
        kv_geometry("qwen2.5-32b", "bf16", tp=3)
    with pytest.raises(ModelError, match=">= 1"):
        kv_geometry("qwen2.5-32b", "bf16", tp=0)


def test_mla_is_replicated_on_every_rank():
    g = kv_geometry("deepseek-v3", "bf16", tp=8)
    assert g.per_rank_bytes_per_token == 70_272
    assert g.stored_bytes_per_token == 8 * 70_272
    assert g.replication == 8.0
    assert "every rank" in g.note


# ---- chunk files -------------------------------------------------------------------------

def test_lmcache_chunk_files_for_qwen3_coder_tp8():
    g = kv_geometry("qwen3-coder-480b", "fp8", tp=8)
    c = chunking(g, 131_072)
    assert c.chunk_file_bytes == 256 * 15_872 == 4_063_232
    assert (c.chunks_per_context, c.files_per_context, c.last_chunk_tokens) == (512, 4096, 256)
    assert c.context_stored_bytes == 131_072 * 126_976


def test_a_partial_last_chunk_is_counted():
    c = chunking(kv_geometry("qwen2.5-32b", "bf16"), 1000, chunk_tokens=256)
    assert (c.chunks_per_context, c.last_chunk_tokens) == (4, 1000 - 3 * 256)
    assert chunking(kv_geometry("qwen2.5-32b"), 0).chunks_per_context == 0


# ---- workload sizing -------------------------------------------------------------------

def test_workload_sizing_by_hand():
    g = kv_geometry("qwen3-coder-480b", "fp8", tp=8)
    s = size_workload(g, sessions=64, context_tokens=32_768, reuse=4, new_contexts_per_s=2,
                      fill=0.8)
    per_context = 32_768 * 126_976  # 4,160,749,568 B
    assert s.context_bytes == per_context
    assert s.working_set_bytes == 64 * 4 * per_context
    assert s.capacity_bytes == pytest.approx(64 * 4 * per_context / 0.8, abs=1)
    assert s.write_bps == 2 * per_context
    assert s.turnover_s == pytest.approx(64 * 4 / 2)
    assert size_workload(g, 1, 1024).turnover_s is None  # nothing new is written


@pytest.mark.parametrize("kwargs", [{"reuse": 0}, {"fill": 0}, {"fill": 1.5},
                                    {"new_contexts_per_s": -1}])
def test_workload_sizing_refuses_nonsense(kwargs):
    with pytest.raises(ModelError):
        size_workload(kv_geometry("qwen2.5-32b"), 8, 1024, **kwargs)


# ---- config.json ---------------------------------------------------------------------------

@pytest.mark.parametrize(("file", "name"), [
    ("qwen3-coder-480b-a35b-instruct-fp8.json", "qwen3-coder-480b"),
    ("qwen2.5-32b.json", "qwen2.5-32b"),
    ("llama-3.1-70b.json", "llama-3.1-70b"),
    ("deepseek-v3.json", "deepseek-v3"),
])
def test_config_files_give_the_catalogue_geometry(file, name):
    spec = read_config(MODELS / file)
    for dtype in ("fp8", "bf16"):
        assert (kv_geometry(spec, dtype, 8).stored_bytes_per_token
                == kv_geometry(name, dtype, 8).stored_bytes_per_token)
    assert spec.dtype == "bf16"  # torch_dtype "bfloat16" in every one of them


def test_explicit_head_dim_wins_over_hidden_size_over_heads():
    # Qwen3-Coder-480B: hidden_size 6144 / 96 heads = 64, but head_dim is 128.
    spec = read_config(MODELS / "qwen3-coder-480b-a35b-instruct-fp8.json")
    assert (spec.attention, spec.head_dim, spec.kv_heads, spec.layers) == ("gqa", 128, 8, 62)


def test_mla_config_ignores_num_key_value_heads():
    spec = read_config(MODELS / "deepseek-v3.json")
    assert (spec.attention, spec.kv_lora_rank, spec.qk_rope_head_dim) == ("mla", 512, 64)


def test_config_json_in_a_folder_and_through_resolve_model(tmp_path):
    (tmp_path / "config.json").write_text((MODELS / "qwen2.5-32b.json").read_text())
    assert read_config(tmp_path).layers == 64
    assert resolve_model(str(MODELS / "qwen2.5-32b.json")).layers == 64


def test_config_variants():
    mha = spec_from_config({"num_hidden_layers": 2, "num_attention_heads": 4,
                            "hidden_size": 256, "torch_dtype": "float16"})
    assert (mha.kv_heads, mha.head_dim, mha.dtype) == (4, 64, "fp16")  # no GQA: kv = heads
    nested = spec_from_config({"torch_dtype": "bfloat16", "text_config": {
        "num_hidden_layers": 3, "num_key_value_heads": 2, "head_dim": 64}})
    assert (nested.layers, nested.kv_heads, nested.dtype) == (3, 2, "bf16")
    new_key = spec_from_config({"num_hidden_layers": 1, "num_key_value_heads": 1,
                                "head_dim": 8, "dtype": "float32"})
    assert new_key.dtype == "fp32"
    assert "bf16 assumed" in spec_from_config({"num_hidden_layers": 1, "num_key_value_heads": 1,
                                               "head_dim": 8}).source


@pytest.mark.parametrize(("cfg", "message"), [
    ({"num_key_value_heads": 8, "head_dim": 128}, "missing key 'num_hidden_layers'"),
    ({"num_hidden_layers": 4, "head_dim": 128}, "missing key 'num_key_value_heads'"),
    ({"num_hidden_layers": 4, "num_key_value_heads": 8}, "missing key 'hidden_size'"),
    ({"num_hidden_layers": "62", "num_key_value_heads": 8, "head_dim": 8},
     "key 'num_hidden_layers' must be a positive integer"),
    ({"num_hidden_layers": 4, "num_key_value_heads": 0, "head_dim": 8},
     "key 'num_key_value_heads' must be a positive integer"),
    ({"num_hidden_layers": 4, "kv_lora_rank": 512}, "missing key 'qk_rope_head_dim'"),
    ({"num_hidden_layers": 4, "num_key_value_heads": 2, "head_dim": 8, "torch_dtype": "int4"},
     "key 'torch_dtype' has 'int4'"),
    ({"num_hidden_layers": 4, "num_attention_heads": 3, "hidden_size": 100},
     "not a multiple of num_attention_heads"),
])
def test_config_errors_name_the_file_and_key(tmp_path, cfg, message):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(ModelError, match=message) as info:
        read_config(path)
    assert str(path) in str(info.value)


def test_unreadable_config_files(tmp_path):
    with pytest.raises(ModelError, match="no such file"):
        read_config(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ModelError, match="bad.json: not valid JSON"):
        read_config(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(ModelError, match="JSON object"):
        read_config(bad)


# ---- names and token counts ----------------------------------------------------------------

@pytest.mark.parametrize("name", ["qwen3-coder-480b", "Qwen/Qwen3-Coder-480B-A35B-Instruct",
                                  "Qwen3-Coder-480B-A35B-Instruct-FP8", "QWEN3-CODER-480B-A35B"])
def test_catalogue_names_are_forgiving(name):
    assert resolve_model(name) is CATALOGUE["qwen3-coder-480b-a35b"]


def test_deepseek_names_and_unknown_models():
    assert resolve_model("DeepSeek-V3/R1") is resolve_model("deepseek-ai/DeepSeek-R1")
    with pytest.raises(ModelError, match="unknown model 'gpt-5'.*qwen2.5-32b"):
        resolve_model("gpt-5")


def test_spec_requires_its_attention_fields():
    with pytest.raises(ValueError, match="GQA needs head_dim"):
        ModelSpec(name="x", attention="gqa", layers=1, kv_heads=1)
    with pytest.raises(ValueError, match="MLA needs kv_lora_rank"):
        ModelSpec(name="x", attention="mla", layers=1, qk_rope_head_dim=64)


@pytest.mark.parametrize(("text", "tokens"), [("32k", 32_768), ("128K", 131_072),
                                              ("1M", 1_048_576), ("4096", 4096), (8192, 8192)])
def test_token_counts(text, tokens):
    assert parse_tokens(text) == tokens


@pytest.mark.parametrize("text", ["32KB", "32 GiB", "lots", "-5"])
def test_token_counts_refuse_byte_units_and_garbage(text):
    with pytest.raises(UnitError):
        parse_tokens(text)


def test_formatting():
    assert (fmt_tokens(32_768), fmt_tokens(131_072), fmt_tokens(1000)) == ("32K", "128K", "1,000")
    assert fmt_tokens(1_048_576) == "1M"
    assert (fmt_bytes(4_160_749_568), fmt_bytes(512)) == ("4.16 GB", "512 B")


# ---- properties ------------------------------------------------------------------------

@given(st.sampled_from(sorted(CATALOGUE)), st.sampled_from([1, 2, 4, 8, 16, 32]),
       st.sampled_from(["fp8", "bf16"]))
def test_units_are_consistent_across_ranks_and_dtypes(name, tp, dtype):
    g = kv_geometry(name, dtype, tp)
    assert g.stored_bytes_per_token == g.per_rank_bytes_per_token * tp
    assert g.stored_bytes_per_token == pytest.approx(g.bytes_per_token * g.replication)
    assert g.stored_bytes_per_token >= g.bytes_per_token  # replication never loses data
    # BF16 is exactly twice FP8, at any TP.
    other = kv_geometry(name, "bf16" if dtype == "fp8" else "fp8", tp)
    ratio = 2 if dtype == "bf16" else 0.5
    assert g.stored_bytes_per_token == other.stored_bytes_per_token * ratio


@given(st.integers(0, 2_000_000), st.integers(1, 4096))
def test_chunks_cover_the_context_exactly(tokens, chunk):
    c = chunking(kv_geometry("qwen2.5-32b", "bf16", 4), tokens, chunk)
    assert (c.chunks_per_context - 1) * chunk < tokens <= c.chunks_per_context * chunk or (
        tokens == 0 and c.chunks_per_context == 0)
    assert 0 <= c.last_chunk_tokens <= chunk


@given(st.integers(1, 1000), st.integers(1, 1_000_000), st.integers(1, 16),
       st.integers(1, 1000), st.integers(1, 16))
def test_working_set_is_monotonic_in_sessions_context_and_reuse(sessions, ctx, reuse, more,
                                                                 more_reuse):
    g = kv_geometry("llama-3.1-70b", "bf16", 8)
    base = size_workload(g, sessions, ctx, reuse).working_set_bytes
    assert size_workload(g, sessions + more, ctx, reuse).working_set_bytes > base
    assert size_workload(g, sessions, ctx + more, reuse).working_set_bytes > base
    assert size_workload(g, sessions, ctx, reuse + more_reuse).working_set_bytes > base
    assert size_workload(g, sessions, ctx, reuse).capacity_bytes >= base
