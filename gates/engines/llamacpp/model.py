"""The tiny llama.cpp model: a random-weight llama GGUF written locally, no download.

Random weights make gibberish, but greedy decoding of the same KV gives the same tokens, which
is all the G3 correctness check needs. Token ids are the workload's own (``vocab``): every
normal token has a printable piece, and the byte-fallback and control tokens get zero output
rows so greedy decoding never picks them (a lone UTF-8 byte would hold back the text stream).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

CONTROL = ("<unk>", "<s>", "</s>")
BYTE_TOKENS = 256
EXTRA = "pip install 'kvgate[llamacpp]' (the gguf and numpy packages from PyPI)"


class ModelShape(BaseModel):
    """The tiny llama's geometry; the defaults give 16 KiB of f16 KV per token."""

    layers: int = Field(default=8, ge=1)
    width: int = Field(default=512, ge=64)
    heads: int = Field(default=8, ge=1)
    ffn: int = Field(default=1408, ge=64)
    vocab: int = Field(default=4296, gt=len(CONTROL) + BYTE_TOKENS + 1000)
    context: int = Field(default=32768, ge=512)
    seed: int = 0

    @property
    def kv_bytes_per_token(self) -> int:
        """Bytes of f16 K and V one token occupies, all layers (llama-server's default cache)."""
        return self.layers * 2 * self.width * 2


def pieces(vocab: int) -> tuple[list[str], list[int]]:
    """Token pieces and llama.cpp token types: control, byte fallback, then normal words."""
    import gguf

    types = gguf.TokenType
    words = [f"\u2581w{i}" for i in range(vocab - len(CONTROL) - BYTE_TOKENS)]
    tokens = [*CONTROL, *(f"<0x{b:02X}>" for b in range(BYTE_TOKENS)), *words]
    kinds = [types.UNKNOWN, types.CONTROL, types.CONTROL] + [types.BYTE] * BYTE_TOKENS \
        + [types.NORMAL] * len(words)
    return tokens, [int(k) for k in kinds]


def _tensors(shape: ModelShape) -> dict:
    import numpy as np

    rng = np.random.default_rng(shape.seed)

    def dense(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols), dtype=np.float32) / np.sqrt(cols)) \
            .astype(np.float32)

    w, ones = shape.width, np.ones(shape.width, dtype=np.float32)
    out = {"token_embd.weight": dense(shape.vocab, w), "output_norm.weight": ones}
    head = dense(shape.vocab, w) * 4.0  # wide logit margins: FP noise cannot flip an argmax
    head[:len(CONTROL) + BYTE_TOKENS] = 0.0
    out["output.weight"] = head
    for i in range(shape.layers):
        b = f"blk.{i}."
        out |= {b + "attn_norm.weight": ones, b + "ffn_norm.weight": ones,
                b + "attn_q.weight": dense(w, w), b + "attn_k.weight": dense(w, w),
                b + "attn_v.weight": dense(w, w), b + "attn_output.weight": dense(w, w),
                b + "ffn_gate.weight": dense(shape.ffn, w),
                b + "ffn_up.weight": dense(shape.ffn, w),
                b + "ffn_down.weight": dense(w, shape.ffn)}
    return out


def write_tiny_gguf(path: Path, shape: ModelShape | None = None) -> int:
    """Write the random-weight llama GGUF to path (atomically); returns its size in bytes."""
    try:
        import gguf
    except ImportError:
        raise RuntimeError(f"writing the tiny model needs the gguf package: {EXTRA}") from None
    shape = shape or ModelShape()
    tokens, kinds = pieces(shape.vocab)
    partial = path.with_name(path.name + ".partial")
    writer = gguf.GGUFWriter(str(partial), "llama")
    writer.add_name("kvgate tiny random llama")
    writer.add_context_length(shape.context)
    writer.add_embedding_length(shape.width)
    writer.add_block_count(shape.layers)
    writer.add_feed_forward_length(shape.ffn)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.heads)
    writer.add_rope_dimension_count(shape.width // shape.heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * len(tokens))
    writer.add_token_types(kinds)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(False)  # prompts are token ids: send exactly what the plan says
    for name, array in _tensors(shape).items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    partial.replace(path)
    return path.stat().st_size
