"""OpenAI-compatible streaming responses: bytes to SSE events to typed chunks. Pure: no I/O.

The load generator stamps an event when ``SSEDecoder.feed`` returns it and only then calls
``classify`` (DESIGN §5: stamped when its bytes arrive, before JSON parsing).
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass
from typing import Any, Literal

MAX_LINE = 16 * 2**20  # characters; a 100K-token response arrives as many small events
_EOL = re.compile(r"\r\n|\r|\n")  # the three line endings the SSE spec allows
_CLOSED = "the decoder is closed"


class SSEProtocolError(ValueError):
    """A stream or chunk that breaks the SSE or OpenAI streaming format; the message says how."""


# Frozen dataclasses rather than pydantic models: these are built once per event, on the
# generator's hot path, and only ever come from code that already checked every field.
@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event; ``event`` is None for the default type ("message")."""

    data: str
    event: str | None = None
    id: str | None = None  # the last event ID seen so far, as the spec carries it


class SSEDecoder:
    """Incremental SSE decoder (WHATWG HTML "event stream interpretation"), strict about UTF-8.

    ``close()`` follows the spec: an event not ended by a blank line is dropped, and
    ``dropped`` says what was lost (the load generator puts it in the error text).
    ``close(flush=True)`` dispatches it instead.
    """

    def __init__(self, max_line: int = MAX_LINE) -> None:
        if max_line < 1:
            raise ValueError(f"max_line must be at least 1, not {max_line}")
        self.max_line = max_line  # no line, and no event's data, may be longer
        self.dropped = ""
        self._utf8 = codecs.getincrementaldecoder("utf-8")("strict")
        self._fed = 0  # bytes fed so far, for error positions
        self._parts: list[str] = []  # the line in progress, not yet ended
        self._part_len = 0
        self._skip_lf = False  # the last feed ended with CR: a leading LF belongs to it
        self._started = False
        self._data: list[str] = []
        self._data_len = 0
        self._event = ""
        self._last_id: str | None = None
        self._done = ""  # why no more input is accepted: closed, or the error raised

    def feed(self, data: bytes) -> list[SSEEvent]:
        """The events completed by these bytes, in order."""
        return self._lines(self._decode(data, final=False))

    def close(self, flush: bool = False) -> list[SSEEvent]:
        """End of stream: drop an unterminated event (the spec), or dispatch it if flush."""
        if self._done == _CLOSED:
            return []
        events = self._lines(self._decode(b"", final=True))
        pending = "".join(self._parts)
        self._done = _CLOSED
        if flush:
            if pending:
                self._field(pending)
            return [*events, *self._dispatch()]
        if self._data:
            lost = "\n".join(self._data)
            self.dropped = f"an event not ended by a blank line: {_excerpt(lost)}"
        elif pending:
            self.dropped = f"a line not ended: {_excerpt(pending)}"
        return events

    def _decode(self, data: bytes, final: bool) -> str:
        if self._done:
            raise SSEProtocolError(f"no more input accepted: {self._done}")
        buffered = len(self._utf8.getstate()[0])
        try:
            text = self._utf8.decode(data, final)
        except UnicodeDecodeError as exc:
            at = self._fed - buffered + exc.start
            self._done = f"invalid UTF-8 at byte {at}: {exc.reason}"
            raise SSEProtocolError(self._done) from None
        self._fed += len(data)
        return text

    def _fail(self, reason: str) -> SSEProtocolError:
        self._done = reason
        return SSEProtocolError(reason)

    def _lines(self, text: str) -> list[SSEEvent]:
        if not text:
            return []
        if not self._started:
            self._started = True
            text = text.removeprefix("\ufeff")  # the spec strips one leading BOM
        if self._skip_lf:
            self._skip_lf = False
            text = text.removeprefix("\n")
            if not text:
                return []
        if "\n" not in text and "\r" not in text:
            # No line ends here: keep the pieces, join once (a long line in small feeds).
            self._parts.append(text)
            self._part_len += len(text)
            if self._part_len > self.max_line:
                raise self._fail(f"a line longer than {self.max_line} characters")
            return []
        if self._parts:
            text = "".join(self._parts) + text
            self._parts, self._part_len = [], 0
        lines = _EOL.split(text)
        rest = lines.pop()
        self._skip_lf = text.endswith("\r")
        if len(rest) > self.max_line:
            raise self._fail(f"a line longer than {self.max_line} characters")
        if rest:
            self._parts, self._part_len = [rest], len(rest)
        events: list[SSEEvent] = []
        for line in lines:
            if len(line) > self.max_line:
                raise self._fail(f"a line longer than {self.max_line} characters")
            if line:
                self._field(line)
            else:
                events.extend(self._dispatch())
        return events

    def _field(self, line: str) -> None:
        if line[0] == ":":
            return  # a comment, e.g. a keep-alive ping
        name, colon, value = line.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._data_len += len(value) + 1
            if self._data_len > self.max_line:
                raise self._fail(f"an event's data longer than {self.max_line} characters")
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._last_id = value
        # "retry" only matters when reconnecting, which a measurement never does; the spec
        # ignores unknown fields.

    def _dispatch(self) -> list[SSEEvent]:
        data, event = self._data, self._event
        self._data, self._data_len, self._event = [], 0, ""
        if not data:
            return []  # the spec: no data lines, no event
        return [SSEEvent("\n".join(data), event or None, self._last_id)]


ChunkKind = Literal["content", "role", "usage", "done", "error", "other"]


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
        raise SSEProtocolError(f"event data is not JSON ({exc}): {_excerpt(data)}") from None
    if not isinstance(obj, dict):
        raise SSEProtocolError(f"event data is JSON {_kind(obj)}, not an object: "
                               f"{_excerpt(data)}")
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
    text = "".join(texts)
    if text or content:
        kind: ChunkKind = "content"
    elif role:
        kind = "role"
    else:
        kind = "usage" if usage is not None else "other"
    return StreamChunk(kind, text, usage, token_ids, finish)


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             type(None): "null"}
    return names.get(type(value), "a number")


def _excerpt(text: str, n: int = 80) -> str:
    return repr(text[:n]) + ("..." if len(text) > n else "")


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
