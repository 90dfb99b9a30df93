"""One kept-alive HTTP/1.1 connection of the load generator, and the exchange it carries.

The response is parsed in the event loop's own read callback (asyncio.Protocol.data_received):
each chunk is stamped as the loop hands it over and fed to the request's stream at once, with no
task to wake per chunk. With aiohttp's StreamReader in between, that wake-up queued behind every
other stream's at c = 256 and put 2.7-3.7 ms into the first event's p99 delivery, against 0.2 ms
for a raw socket doing the same parsing (bench/timing_fidelity.py --peer-parses, 2026-12-01).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable

from .http1 import (
    CannotConnect,
    ConnectTimeout,
    ResponseParser,
    ServerDisconnectedError,
    StallTimeout,
)

ERROR_TEXT_MAX = 64 * 1024  # of a non-200 response's body, kept for the error message


class Exchange:
    """One request and its response on a connection: parsed as it arrives, done on a future."""

    def __init__(self, connection: Connection, on_body: Callable[[bytes, int], None],
                 stall_timeout: float) -> None:
        self.connection = connection
        self.on_body = on_body
        self.parser = ResponseParser(self._body)
        self.error_text = b""  # a non-200 response's body, for the record's error
        self.finished = connection.loop.create_future()
        self.stall_timeout = stall_timeout
        self.last_ns = time.perf_counter_ns()
        self._stall = connection.loop.call_later(stall_timeout, self._check_stall)

    def _body(self, data: bytes, arrived_ns: int) -> None:
        if self.parser.status == 200:
            self.on_body(data, arrived_ns)
        elif len(self.error_text) < ERROR_TEXT_MAX:
            self.error_text += data[:ERROR_TEXT_MAX - len(self.error_text)]

    def received(self, data: bytes) -> None:
        """Bytes of the response, stamped here, on arrival, before any parsing."""
        self.last_ns = now = time.perf_counter_ns()
        try:
            self.parser.feed(data, now)
        except Exception as exc:  # noqa: BLE001 - bad bytes or the stream's own refusal
            self.fail(exc)
            return
        if self.parser.complete:
            self._settle()

    def lost(self, exc: BaseException | None) -> None:
        """The connection ended: the response is complete only if read until close."""
        try:
            self.parser.end()
        except ServerDisconnectedError:
            self.fail(ServerDisconnectedError(self.parser.received, exc))
            return
        self._settle()

    def fail(self, exc: BaseException) -> None:
        """End the exchange with an error; the connection cannot carry another request."""
        self.connection.abort()
        self._settle(exc)

    def _settle(self, exc: BaseException | None = None) -> None:
        self._stall.cancel()
        if not self.finished.done():
            if exc is None:
                self.finished.set_result(self)
            else:
                self.finished.set_exception(exc)

    def _check_stall(self) -> None:
        # One timer per exchange, re-armed only when it fires: moving it on every chunk would
        # cost a heap operation per event.
        idle = (time.perf_counter_ns() - self.last_ns) / 1e9
        if idle >= self.stall_timeout:
            self.fail(StallTimeout(f"no data for {self.stall_timeout:g} s"))
        else:
            self._stall = self.connection.loop.call_later(self.stall_timeout - idle,
                                                          self._check_stall)


class Connection(asyncio.Protocol):
    """A TCP (or TLS) connection that carries one exchange at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.exchange: Exchange | None = None
        self.closed = False
        self.idle_since = time.monotonic()

    @classmethod
    async def open(cls, host: str, port: int, tls: ssl.SSLContext | None,
                   timeout: float) -> Connection:
        """Connect within ``timeout`` seconds; CannotConnect or ConnectTimeout otherwise."""
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                _, connection = await loop.create_connection(
                    lambda: cls(loop), host, port, ssl=tls,
                    server_hostname=host if tls else None)
        except TimeoutError:
            raise ConnectTimeout(f"{host}:{port}: no connection in {timeout:g} s") from None
        except OSError as exc:
            raise CannotConnect(exc.strerror or str(exc)) from exc
        return connection

    @property
    def spent(self) -> bool:
        """Closed, or closing: no further request can go out on it."""
        return self.closed or self.transport is None or self.transport.is_closing()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # asyncio sets TCP_NODELAY on TCP sockets itself

    def data_received(self, data: bytes) -> None:
        if self.exchange is None:  # bytes nobody asked for: the connection is not clean
            self.abort()
            return
        self.exchange.received(data)

    def eof_received(self) -> bool:
        return False  # the server is done: close, and connection_lost settles the exchange

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.exchange is not None:
            self.exchange.lost(exc)

    def start(self, data: bytes, on_body: Callable[[bytes, int], None],
              stall_timeout: float) -> Exchange:
        """Write a request and return its exchange; ServerDisconnectedError if already closed."""
        if self.spent:
            raise ServerDisconnectedError(0)
        self.exchange = Exchange(self, on_body, stall_timeout)
        self.transport.write(data)
        return self.exchange

    def release(self) -> bool:
        """After a complete exchange: whether the connection can carry another request."""
        reusable = not self.spent and self.exchange is not None and \
            self.exchange.parser.keep_alive
        self.exchange, self.idle_since = None, time.monotonic()
        return reusable

    def close(self) -> None:
        """Close politely (FIN) if it is still open."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def abort(self) -> None:
        """Close at once, dropping anything unsent: its state is unknown."""
        if self.transport is not None:
            self.transport.abort()
