"""The load generator's connections: kept alive, and sent again on a fresh one when the server
had closed the kept-alive connection a request went out on (DESIGN §5).

llama-server (cpp-httplib) closes kept-alive connections after a count or an idle timeout
without saying so in advance; a request written into such a connection as it closes is lost
before the server's handler ever saw it. Every completion is a POST, which HTTP clients do not
retry on their own (RFC 9112 §9.3.1), so this is done here, by Chromium's rule
(HttpNetworkTransaction::ShouldResendRequest, which applies it to POSTs too): a request that
failed on a *reused* connection before any byte of a response arrived is sent once more, on a
new connection. A request on a fresh connection that fails, and any failure after a response
byte, stay errors: resending those could run a request twice.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from .connection import Connection, Exchange
from .http1 import CannotConnect, ServerDisconnectedError, authority, request_head

# A server closing an idle kept-alive connection has closed it by the time the request arrives,
# so the failure shows within a round trip; one that shows later may have been running the
# request (a worker that died in a long prefill), and that is an error, never a resend.
RESEND_WINDOW = 1.0  # seconds from the attempt's start
KEEPALIVE_IDLE = 60.0  # seconds a connection may sit idle in the pool before it is closed


class Attempt:
    """One request's tries: whether the current one went out on a reused connection, and when
    its bytes were first handed to the socket."""

    def __init__(self) -> None:
        self.reused = False
        self.reconnects = 0
        self.written_ns: int | None = None  # perf_counter_ns as the first try's bytes went out


class Target:
    """Where a URL's requests go: its connection key, the Host header and the path."""

    def __init__(self, url: str) -> None:
        scheme, self.host, self.port, self.path = authority(url)
        if scheme not in ("http", "https") or not self.host:
            raise CannotConnect(f"{url} is not an http:// or https:// URL")
        self.tls = ssl.create_default_context() if scheme == "https" else None
        self.authority = urlsplit(url).netloc.rpartition("@")[2]


class Pool:
    """A phase's connections: a keep-alive pool, and fresh connections for a resend or for a
    server that never keeps a connection alive."""

    def __init__(self) -> None:
        self.idle: dict[tuple[str, int], list[Connection]] = {}
        self.open: set[Connection] = set()
        self.targets: dict[str, Target] = {}
        self.reuses = 0  # requests answered on a reused connection
        self.reconnects = 0
        self.closing = ""  # why every request now gets a connection of its own

    async def __aenter__(self) -> Pool:
        return self

    async def __aexit__(self, *exc) -> None:
        for connection in self.open:
            connection.abort()
        self.open.clear()
        self.idle.clear()
        await asyncio.sleep(0)  # let the transports' connection_lost run before the loop ends

    async def post(self, url: str, body: bytes, headers: dict[str, str],
                   on_body: Callable[[bytes, int], None], *, attempt: Attempt,
                   stall_timeout: float) -> Exchange:
        """POST and read the whole response into ``on_body``; once more, on a fresh
        connection, if the server had closed the reused one before answering."""
        target = self.targets.get(url) or self.targets.setdefault(url, Target(url))
        while True:
            fresh = bool(self.closing or attempt.reconnects)
            data = request_head("POST", target.path, target.authority,
                                headers | {"Connection": "close"} if fresh else headers,
                                len(body)) + body
            started = time.perf_counter()
            connection = None if fresh else self._idle(target)
            attempt.reused = connection is not None
            try:
                if connection is None:
                    connection = await Connection.open(target.host, target.port, target.tls,
                                                       stall_timeout)
                    self.open.add(connection)
                if attempt.written_ns is None:
                    attempt.written_ns = time.perf_counter_ns()  # t0: the bytes go out now
                exchange = await connection.start(data, on_body, stall_timeout).finished
            except ServerDisconnectedError as exc:
                late = time.perf_counter() - started > RESEND_WINDOW
                if attempt.reconnects or not attempt.reused or late or exc.answered:
                    raise
                attempt.reconnects += 1
                self.reconnects += 1
                self._server_closes("closed a kept-alive connection unannounced")
                continue
            except BaseException:
                if connection is not None:
                    connection.abort()  # cancelled or timed out mid-exchange: state unknown
                raise
            finally:
                if connection is not None and connection.spent:
                    self.open.discard(connection)
            self._settled(target, connection, attempt.reused, fresh)
            return exchange

    def _idle(self, target: Target) -> Connection | None:
        idle, now = self.idle.get((target.host, target.port), []), time.monotonic()
        while idle:
            connection = idle.pop()
            if not connection.spent and now - connection.idle_since < KEEPALIVE_IDLE:
                return connection
            connection.close()
            self.open.discard(connection)
        return None

    def _settled(self, target: Target, connection: Connection, reused: bool,
                 fresh: bool) -> None:
        closes = "close" in connection.exchange.parser.headers.get("connection", "").lower()
        if reused:
            self.reuses += 1
        elif closes:
            self._server_closes("answered Connection: close")
        if not fresh and connection.release():
            self.idle.setdefault((target.host, target.port), []).append(connection)
        else:
            connection.close()
            self.open.discard(connection)

    def _server_closes(self, how: str) -> None:
        # Closing after some requests (cpp-httplib's keep-alive max count) still lets reuse pay
        # off; a server that closes before any reuse worked keeps nothing alive: stop trying.
        if not self.reuses and not self.closing:
            self.closing = (f"the server {how} before any kept-alive connection was reused: "
                            "a new connection per request for the rest of the phase")

    def notes(self) -> list[str]:
        """What the self-check says about the connections: reconnects, the switch to one each."""
        out = [self.closing] if self.closing else []
        if self.reconnects:
            out.insert(0, f"{self.reconnects} reconnect{'s' if self.reconnects != 1 else ''}: "
                          "the server had closed the kept-alive connection, and the request was "
                          "sent again on a new one before any response byte arrived")
        return out
