"""OpenAI-compatible streaming chunks: what one SSE event's data means. Pure: no I/O.

The load generator calls ``classify`` only after it has stamped the event (DESIGN §5: stamped
when its bytes arrive, before JSON parsing).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from .logprobs import TopK, parse_logprobs
from .sse import SSEProtocolError, excerpt

ChunkKind = Literal["content", "role", "usage", "done", "error", "other"]


# Frozen dataclasses, as SSEEvent: built once per event on the generator's hot path.
@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts from a chunk's ``usage``; None where the server left a count out."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens


@dataclass(frozen=True, slots=True)
class StreamChunk:
    """What one event's data means for the measurement (DESIGN §5: only content is timed)."""

    kind: ChunkKind
    text: str = ""  # completion text, reasoning and chat content of every choice
    usage: Usage | None = None  # kept whatever the kind: vLLM may send usage on every chunk
    token_ids: list[int] | None = None  # choices[0].token_ids (vLLM's return_token_ids)
    finish_reason: str | None = None
    error: str | None = None
    logprobs: list[float] | None = None  # each token's own logprob (choices[0].logprobs)
    top_logprobs: list[TopK] | None = None  # each token's top-k by id, one per logprob

    @property
    def is_content(self) -> bool:
        """Whether this chunk is a content event: the ones TTFT, E2E and gaps are timed on."""
        return self.kind == "content"


DONE = StreamChunk("done")


def classify(data: str) -> StreamChunk:
    """The meaning of one event's data: [DONE], an error, or an OpenAI (chat) completion chunk."""
    if data.strip() == "[DONE]":
        return DONE
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError) as exc:  # RecursionError: absurdly deep nesting
        raise SSEProtocolError(f"event data is not JSON ({exc}): {excerpt(data)}") from None
    if not isinstance(obj, dict):
        raise SSEProtocolError(f"event data is JSON {_kind(obj)}, not an object: "
                               f"{excerpt(data)}")
    if obj.get("error") is not None:  # OpenAI, SGLang and current vLLM: {"error": {...}}
        return StreamChunk("error", error=_error_text(obj["error"]))
    if obj.get("object") == "error":  # older vLLM sent the error object bare
        return StreamChunk("error", error=_error_text(obj))
    usage = _usage(obj.get("usage"))
    choices = obj.get("choices")
    if choices is None:
        choices = []
    elif not isinstance(choices, list):
        raise SSEProtocolError(f"choices is {_kind(choices)}, not a list")
    texts: list[str] = []
    content = role = False
    finish: str | None = None
    token_ids: list[int] | None = None
    logprobs = None
    for i, choice in enumerate(choices):
        where = f"choices[{i}]"
        if not isinstance(choice, dict):
            raise SSEProtocolError(f"{where} is {_kind(choice)}, not an object")
        pieces = [_str(choice, "text", where)]
        delta = choice.get("delta")
        if delta is not None:
            if not isinstance(delta, dict):
                raise SSEProtocolError(f"{where}.delta is {_kind(delta)}, not an object")
            # "reasoning" is current vLLM's name for what older vLLM sent as reasoning_content.
            pieces += [_str(delta, k, f"{where}.delta")
                       for k in ("reasoning_content", "reasoning", "content")]
            calls = delta.get("tool_calls")
            if calls is not None and not isinstance(calls, list):
                raise SSEProtocolError(f"{where}.delta.tool_calls is {_kind(calls)}, "
                                       "not a list")
            content = content or bool(calls)
            role = bool(_str(delta, "role", f"{where}.delta")) or role
        texts += [p for p in pieces if p]
        reason = _str(choice, "finish_reason", where)
        finish = finish or reason or None
        if i == 0:
            token_ids = _token_ids(choice.get("token_ids"), where)
            logprobs = parse_logprobs(choice.get("logprobs"), where)
    text = "".join(texts)
    if text or content:
        kind: ChunkKind = "content"
    elif role:
        kind = "role"
    else:
        kind = "usage" if usage is not None else "other"
    return StreamChunk(kind, text, usage, token_ids, finish,
                       logprobs=logprobs.chosen if logprobs else None,
                       top_logprobs=logprobs.top if logprobs else None)


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             type(None): "null"}
    return names.get(type(value), "a number")


def _shown(value: Any, n: int = 60) -> str:
    try:
        text = json.dumps(value)
    except (ValueError, RecursionError):  # whatever json.loads accepted, be safe regardless
        return _kind(value)
    return text[:n] + ("..." if len(text) > n else "")


def _str(obj: dict, key: str, where: str) -> str:
    value = obj.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SSEProtocolError(f"{where}.{key} is {_kind(value)}, not a string")
    return value


def _count(obj: dict, key: str, where: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if type(value) is not int or value < 0:  # bool is an int subclass, and not a count
        raise SSEProtocolError(f"{where}.{key} is {_shown(value)}, not a token count")
    return value


def _usage(usage: Any) -> Usage | None:
    if usage is None:
        return None
    if not isinstance(usage, dict):
        raise SSEProtocolError(f"usage is {_kind(usage)}, not an object")
    details = usage.get("prompt_tokens_details")
    if details is not None and not isinstance(details, dict):
        raise SSEProtocolError(f"usage.prompt_tokens_details is {_kind(details)}, "
                               "not an object")
    cached = _count(details, "cached_tokens", "usage.prompt_tokens_details") if details else None
    return Usage(_count(usage, "prompt_tokens", "usage"),
                 _count(usage, "completion_tokens", "usage"), cached)


def _token_ids(ids: Any, where: str) -> list[int] | None:
    if ids is None:
        return None
    if not isinstance(ids, list) or not all(type(i) is int and i >= 0 for i in ids):
        raise SSEProtocolError(f"{where}.token_ids is not a list of token ids: {_shown(ids)}")
    return ids


def _error_text(error: Any) -> str:
    if isinstance(error, str):
        return error or "(empty error message)"
    if not isinstance(error, dict):
        return _shown(error, 500)
    message = error.get("message")
    if not isinstance(message, str) or not message:
        message = _shown(error, 500)
    details = [str(error[k]) for k in ("type", "code")
               if type(error.get(k)) in (str, int) and error[k] != ""]
    return f"{message} ({', '.join(details)})" if details else message
