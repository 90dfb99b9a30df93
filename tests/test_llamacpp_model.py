"""The tiny random-weight GGUF: a llama llama.cpp can load, greedy never picks a byte token."""

import pytest

from gates.engines.llamacpp.model import BYTE_TOKENS, CONTROL, ModelShape, write_tiny_gguf

gguf = pytest.importorskip("gguf", reason="pip install 'kvgate[llamacpp]'")


def test_the_model_reads_back_with_its_geometry(tmp_path):
    shape = ModelShape(layers=2, width=64, heads=4, ffn=128, vocab=1400, context=1024)
    path = tmp_path / "m.gguf"
    size = write_tiny_gguf(path, shape)
    assert size == path.stat().st_size and not list(tmp_path.glob("*.partial"))
    reader = gguf.GGUFReader(path)
    names = {t.name: t for t in reader.tensors}
    assert len(names) == 3 + 9 * 2
    head = names["output.weight"].data
    assert head.shape == (1400, 64)
    assert not head[:len(CONTROL) + BYTE_TOKENS].any() and head[len(CONTROL) + BYTE_TOKENS:].any()
    arch = reader.fields["general.architecture"]
    assert bytes(arch.parts[arch.data[0]]).decode() == "llama"
    assert len(reader.fields["tokenizer.ggml.tokens"].data) == 1400


def test_the_default_shape_holds_16_kib_of_kv_per_token():
    assert ModelShape().kv_bytes_per_token == 16384


def test_the_same_seed_writes_the_same_bytes(tmp_path):
    shape = ModelShape(layers=1, width=64, heads=4, ffn=64, vocab=1300, context=512)
    write_tiny_gguf(tmp_path / "a.gguf", shape)
    write_tiny_gguf(tmp_path / "b.gguf", shape)
    assert (tmp_path / "a.gguf").read_bytes() == (tmp_path / "b.gguf").read_bytes()
