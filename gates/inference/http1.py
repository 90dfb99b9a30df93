"""HTTP/1.1 as the load generator speaks it: the request head, and a response parsed as its bytes
arrive (RFC 9112), with the errors a request can end with.

Pure: gates.inference.connection feeds it what the socket delivered, stamped on arrival.
"""

from __future__ import annotations

from collections.abc import Callable

HEAD_MAX = 64 * 1024  # a response head (status line + headers) longer than this is refused
LINE_MAX = 1024  # a chunk-size line longer than this is refused


class HttpError(Exception):
    """A request that ended without a complete HTTP response."""


class CannotConnect(HttpError):
    """No TCP (or TLS) connection: the server is down or unreachable, or the URL is not one."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ServerDisconnectedError(HttpError):
    """The connection ended before the response was complete; ``answered`` if any byte came."""

    def __init__(self, received: int, cause: BaseException | None = None) -> None:
        when = (f"after {received} bytes of the response" if received
                else "before any byte of a response")
        how = f" ({type(cause).__name__}: {cause})" if cause else ""
        super().__init__(f"the server closed the connection {when}{how}")
        self.answered = received > 0


class BadResponse(HttpError):
    """Bytes that are not an HTTP/1.1 response this client can read."""


class ConnectTimeout(TimeoutError):
    """No connection within the connect timeout."""


class StallTimeout(TimeoutError):
    """No byte of the response for the stall timeout."""


def request_head(method: str, path: str, host: str, headers: dict[str, str],
                 length: int) -> bytes:
    """The request line and headers, with Host and Content-Length, ready to write."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", "User-Agent: kvgate",
             "Accept: text/event-stream, application/json",
             *(f"{name}: {value}" for name, value in headers.items()),
             f"Content-Length: {length}", "", ""]
    return "\r\n".join(lines).encode("latin-1")


def _tokens(value: str) -> set[str]:
    return {t.strip().lower() for t in value.split(",") if t.strip()}


class ResponseParser:
    """One response: status and headers, then the body handed to ``on_body`` as it arrives.

    ``on_body(data, arrived_ns)`` gets the body's bytes (chunk framing removed) of each feed in
    one call. Framing per RFC 9112 §6.3: chunked, Content-Length, or until the connection ends.
    """

    def __init__(self, on_body: Callable[[bytes, int], None]) -> None:
        self.on_body = on_body
        self.received = 0  # bytes of the response seen, head included
        self.status: int | None = None
        self.version = ""
        self.headers: dict[str, str] = {}  # lower-case names
        self.complete = False
        self.trailing = False  # bytes came after the response's end: the connection is spent
        self._buf = b""
        self._state = "head"
        self._left = 0  # bytes of the current chunk, or of a Content-Length body, still to come
        self._steps = {"head": self._head, "size": self._size, "data": self._data,
                       "crlf": self._crlf, "trailer": self._trailer, "length": self._length,
                       "until-close": self._until_close}

    @property
    def keep_alive(self) -> bool:
        """Whether the connection may carry another request after this complete response."""
        if not self.complete or self.trailing or self._state == "until-close":
            return False
        tokens = _tokens(self.headers.get("connection", ""))
        return "keep-alive" in tokens if self.version == "HTTP/1.0" else "close" not in tokens

    def feed(self, data: bytes, arrived_ns: int) -> None:
        """Take what the socket delivered; raises BadResponse on bytes that are not HTTP.

        Bytes after a complete response (a server that sent more than it framed) are not read
        as another response: they only mark the connection spent."""
        self.received += len(data)
        if self.complete:
            self.trailing = True
            return
        buf, pos, body = self._buf + data if self._buf else data, 0, []
        while pos < len(buf) and not self.complete:
            step = self._steps[self._state](buf, pos, body)
            if step is None:  # the rest of a line is still to come
                break
            pos = step
        self._buf = buf[pos:]
        self.trailing = self.complete and bool(self._buf)
        if body:
            self.on_body(b"".join(body), arrived_ns)

    def end(self) -> None:
        """The connection ended: fine for a body read until close, an error otherwise."""
        if self._state == "until-close":
            self.complete = True
        if not self.complete:
            raise ServerDisconnectedError(self.received)

    def _head(self, buf: bytes, pos: int, body: list) -> int | None:
        end = buf.find(b"\r\n\r\n", pos)
        if end < 0:
            if len(buf) - pos > HEAD_MAX:
                raise BadResponse(f"a response head over {HEAD_MAX} bytes")
            return None
        lines = buf[pos:end].decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        code = rest[:3]
        if version not in ("HTTP/1.1", "HTTP/1.0") or not code.isdigit() or len(rest) > 3 and \
                rest[3] != " ":
            raise BadResponse(f"not an HTTP/1.1 status line: {lines[0][:80]!r}")
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip():
                raise BadResponse(f"a malformed header line: {line[:80]!r}")
            key = name.lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        if 100 <= int(code) < 200:  # informational (100 Continue): the real response follows
            return end + 4
        self.version, self.status, self.headers = version, int(code), headers
        self._state = self._framing()
        return end + 4

    def _framing(self) -> str:
        coding = self.headers.get("content-encoding", "identity").lower()
        if coding not in ("identity", ""):
            raise BadResponse(f"Content-Encoding {coding}: this client asks for none")
        if self.status in (204, 304):
            self.complete = True
            return "length"
        if "transfer-encoding" in self.headers:
            if self.headers["transfer-encoding"].lower().rsplit(",", 1)[-1].strip() != "chunked":
                raise BadResponse(f"Transfer-Encoding {self.headers['transfer-encoding']}")
            return "size"
        if "content-length" in self.headers:
            value = self.headers["content-length"]
            if not value.isdigit():
                raise BadResponse(f"Content-Length {value!r}")
            self._left = int(value)
            self.complete = self._left == 0
            return "length"
        return "until-close"

    def _size(self, buf: bytes, pos: int, body: list) -> int | None:
        end = buf.find(b"\r\n", pos)
        if end < 0:
            if len(buf) - pos > LINE_MAX:
                raise BadResponse("a chunk-size line over 1 KiB")
            return None
        size = buf[pos:end].split(b";", 1)[0].strip()
        try:
            self._left = int(size, 16)
        except ValueError:
            raise BadResponse(f"a chunk size that is not hex: {size[:40]!r}") from None
        self._state = "data" if self._left else "trailer"
        return end + 2

    def _data(self, buf: bytes, pos: int, body: list) -> int | None:
        take = min(self._left, len(buf) - pos)
        body.append(buf[pos:pos + take])
        self._left -= take
        if not self._left:
            self._state = "crlf"
        return pos + take

    def _crlf(self, buf: bytes, pos: int, body: list) -> int | None:
        if len(buf) - pos < 2:
            return None
        if buf[pos:pos + 2] != b"\r\n":
            raise BadResponse("a chunk not followed by CRLF")
        self._state = "size"
        return pos + 2

    def _trailer(self, buf: bytes, pos: int, body: list) -> int | None:
        end = buf.find(b"\r\n", pos)
        if end < 0:
            if len(buf) - pos > HEAD_MAX:
                raise BadResponse(f"trailers over {HEAD_MAX} bytes")
            return None
        if end == pos:  # the empty line that ends the trailers
            self.complete = True
        return end + 2

    def _length(self, buf: bytes, pos: int, body: list) -> int | None:
        pos = self._data(buf, pos, body)
        self._state = "length"
        self.complete = not self._left
        return pos

    def _until_close(self, buf: bytes, pos: int, body: list) -> int | None:
        body.append(buf[pos:])
        return len(buf)
