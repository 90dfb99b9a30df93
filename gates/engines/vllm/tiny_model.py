"""Write a tiny random-weight Llama and a WordLevel tokenizer: run by the vLLM venv's python.

Standalone on purpose (it imports transformers and tokenizers, which only the engine's venv
has, and nothing of kvgate): `python tiny_model.py OUT_DIR --vocab 8192 ...`. No download.
"""

import argparse
import json
import sys
from pathlib import Path


def write_model(out: Path, vocab: int, hidden: int, layers: int, heads: int, kv_heads: int,
                context: int, seed: int) -> dict:
    """A LlamaForCausalLM with random weights (bf16 safetensors) and its tokenizer files."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=hidden * 2,
                         num_hidden_layers=layers, num_attention_heads=heads,
                         num_key_value_heads=kv_heads, max_position_embeddings=context,
                         bos_token_id=1, eos_token_id=2, pad_token_id=0, torch_dtype="bfloat16")
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    # Token t<i> is id i: prompts are token ids, the tokenizer only names them in the output.
    words = {"<unk>": 0, "<s>": 1, "</s>": 2} | {f"t{i}": i for i in range(3, vocab)}
    tok = Tokenizer(models.WordLevel(vocab=words, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>", pad_token="<unk>")
    fast.model_max_length = context
    fast.save_pretrained(out)
    return {"vocab": vocab, "hidden": hidden, "layers": layers, "heads": heads,
            "kv_heads": kv_heads, "context": context, "seed": seed,
            "bytes": sum(p.stat().st_size for p in out.iterdir() if p.is_file())}


def main(argv: list[str]) -> int:
    """Parse the shape, write the model, print its shape as JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    for name, default in (("vocab", 8192), ("hidden", 512), ("layers", 4), ("heads", 8),
                          ("kv-heads", 8), ("context", 4096), ("seed", 0)):
        parser.add_argument(f"--{name}", type=int, default=default)
    a = parser.parse_args(argv)
    shape = write_model(a.out, a.vocab, a.hidden, a.layers, a.heads, a.kv_heads, a.context,
                        a.seed)
    print(json.dumps(shape))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
