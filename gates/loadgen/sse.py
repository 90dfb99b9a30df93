"""Server-sent events: bytes to SSE events, incrementally and strict about UTF-8. Pure: no I/O.

The load generator stamps an event when ``SSEDecoder.feed`` returns it and only then asks
what it means (gates.loadgen.chunks; DESIGN §5: stamped when its bytes arrive, before JSON
parsing).
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

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
            self.dropped = f"an event not ended by a blank line: {excerpt(lost)}"
        elif pending:
            self.dropped = f"a line not ended: {excerpt(pending)}"
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



def excerpt(text: str, n: int = 80) -> str:
    """The start of a text for an error message, marked when cut."""
    return repr(text[:n]) + ("..." if len(text) > n else "")
