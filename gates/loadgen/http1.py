"""HTTP/1.1 as the load generator speaks it: the request head, and a response parsed as its bytes
arrive (RFC 9112), with the errors a request can end with.

Pure: gates.loadgen.connection feeds it what the socket delivered, stamped on arrival.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

import httptools

HEAD_MAX = 64 * 1024  # bytes before a response's headers are complete; more is refused


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


def authority(url: str) -> tuple[str, str, int, str]:
    """A URL's scheme, host, port (the scheme's default when absent) and path with query."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, parts.hostname or "", port, \
        (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def request_head(method: str, path: str, host: str, headers: dict[str, str],
                 length: int) -> bytes:
    """The request line and headers, with Host and Content-Length, ready to write."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", "User-Agent: kvgate",
             "Accept: text/event-stream, application/json",
             *(f"{name}: {value}" for name, value in headers.items()),
             f"Content-Length: {length}", "", ""]
    return "\r\n".join(lines).encode("latin-1")


class ResponseParser:
    """One response: status and headers, then the body handed to ``on_body`` as it arrives.

    The bytes are parsed by llhttp (Node.js's HTTP parser, via httptools). ``on_body(data,
    arrived_ns)`` gets the body's bytes (chunk framing removed) of each feed in one call.
    Framing per RFC 9112 §6.3: chunked, Content-Length, or until the connection ends.
    """

    def __init__(self, on_body: Callable[[bytes, int], None]) -> None:
        self.sink = on_body
        self.received = 0  # bytes of the response seen, head included
        self.status: int | None = None
        self.headers: dict[str, str] = {}  # lower-case names
        self.complete = False
        self.trailing = False  # bytes came after the response's end: the connection is spent
        self._keep_alive = False
        self._until_close = False  # no Content-Length, no chunking: the body ends with the socket
        self._heads: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._llhttp = httptools.HttpResponseParser(self)

    @property
    def keep_alive(self) -> bool:
        """Whether the connection may carry another request after this complete response."""
        return self.complete and self._keep_alive and not self.trailing

    def feed(self, data: bytes, arrived_ns: int) -> None:
        """Take what the socket delivered; raises BadResponse on bytes that are not HTTP.

        Bytes after a complete response (a server that sent more than it framed) are not read
        as another response: they only mark the connection spent."""
        self.received += len(data)
        if self.complete:
            self.trailing = True
            return
        try:
            self._llhttp.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            raise exc.__context__ from None  # this parser's own refusal (_headers_complete)
        except httptools.HttpParserError as exc:
            if not self.complete:
                raise BadResponse(f"not an HTTP/1.1 response: {exc}") from None
            self.trailing = True  # llhttp read the extra bytes as the start of another one
        if self.status is None and self.received > HEAD_MAX:  # llhttp sets no limit itself
            raise BadResponse(f"no complete response head in {self.received} bytes")
        if self._body:
            body, self._body = b"".join(self._body), []
            self.sink(body, arrived_ns)

    def end(self) -> None:
        """The connection ended: fine for a body read until close, an error otherwise."""
        if self._until_close:
            self.complete = True  # llhttp ends such a body only on llhttp_finish, not exposed
        if not self.complete:
            raise ServerDisconnectedError(self.received)

    # llhttp's callbacks (httptools calls them by these names)
    def on_header(self, name: bytes, value: bytes) -> None:
        """llhttp: one header line of the head being read."""
        self._heads.append((name, value))

    def on_headers_complete(self) -> None:
        """llhttp: the head is complete; a 1xx is skipped, a final status taken with its headers."""
        status, heads, self._heads = self._llhttp.get_status_code(), self._heads, []
        if 100 <= status < 200:  # informational (100 Continue): the real response follows
            return
        for name, value in heads:
            key, text = name.decode("latin-1").lower(), value.decode("latin-1").strip()
            self.headers[key] = f"{self.headers[key]}, {text}" if key in self.headers else text
        coding = self.headers.get("content-encoding", "identity").lower()
        if coding not in ("identity", ""):
            raise BadResponse(f"Content-Encoding {coding}: this client asks for none")
        framing = self.headers.get("transfer-encoding", "chunked")
        if framing.lower().rsplit(",", 1)[-1].strip() != "chunked":
            raise BadResponse(f"Transfer-Encoding {framing}: this client reads chunked only")
        self.status, self._keep_alive = status, self._llhttp.should_keep_alive()
        # Any Transfer-Encoding left here ends in chunked (refused above otherwise).
        self._until_close = not ({"transfer-encoding", "content-length"} & self.headers.keys()
                                 or status in (204, 304))

    def on_body(self, body: bytes) -> None:
        """llhttp: body bytes, framing removed; handed on once per feed."""
        self._body.append(body)

    def on_message_complete(self) -> None:
        """llhttp: the response is complete (not counted for a 1xx)."""
        if self.status is not None:  # not the end of a 1xx
            self.complete = True
