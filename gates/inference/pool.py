"""The load generator's connections: kept alive, and sent again on a fresh one when the server
had closed the kept-alive connection a request went out on (DESIGN §5).

llama-server (cpp-httplib) closes kept-alive connections after a count or an idle timeout
without saying so in advance; a request written into such a connection as it closes is lost
before the server's handler ever saw it. aiohttp retries only idempotent methods (RFC 9112
§9.3.1) and every completion is a POST, so this is done here, by Chromium's rule
(HttpNetworkTransaction::ShouldResendRequest, which applies it to POSTs too): a request that
failed on a *reused* connection before any byte of a response arrived is sent once more, on a
new connection. A request on a fresh connection that fails, and any failure after a response
byte, stay errors: resending those could run a request twice.
"""

from __future__ import annotations

import time

import aiohttp
from aiohttp.http import RawResponseMessage

# ConnectionResetError: aiohttp >= 3.10's ClientConnectionResetError ("Cannot write to closing
# transport") is one, and 3.9 raises the plain one.
LOST = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError, ConnectionResetError)
# A server closing an idle kept-alive connection has closed it by the time the request arrives,
# so the failure shows within a round trip; one that shows later may have been running the
# request (a worker that died in a long prefill), and that is an error, never a resend.
RESEND_WINDOW = 1.0  # seconds from the attempt's start


def unanswered(exc: BaseException) -> bool:
    """Whether a POST failed by losing its connection before any byte of a response arrived."""
    if isinstance(exc, aiohttp.ClientConnectorError) or not isinstance(exc, LOST):
        return False  # a connect failure is the server being down, not a closed pool entry
    # A closed connection after part of a status line comes with what aiohttp had parsed of it
    # (even an empty one). A reset right after a partial status line is the one case aiohttp
    # folds into a bare ClientOSError; servers write the status line and headers in one go.
    return not isinstance(getattr(exc, "message", None), RawResponseMessage)


class Attempt:
    """One request's tries: whether the current one went out on a reused connection, and when
    its bytes were first handed to the socket."""

    def __init__(self) -> None:
        self.reused = False
        self.reconnects = 0
        self.written_ns: int | None = None  # perf_counter_ns as the first try's body went out


async def _reused(_session, context, _params) -> None:
    if isinstance(context.trace_request_ctx, Attempt):
        context.trace_request_ctx.reused = True


async def _writing(_session, context, _params) -> None:
    # aiohttp signals each body chunk just before writing it (with the headers, for the first):
    # the request's t0, after the client's own work of building it (DESIGN §5: just before the
    # POST). A resend keeps the first try's time.
    attempt = context.trace_request_ctx
    if isinstance(attempt, Attempt) and attempt.written_ns is None:
        attempt.written_ns = time.perf_counter_ns()


class Pool:
    """A phase's HTTP sessions: a keep-alive pool, and fresh connections for a resend or for a
    server that never keeps a connection alive."""

    def __init__(self, read_bufsize: int) -> None:
        trace = aiohttp.TraceConfig()
        trace.on_connection_reuseconn.append(_reused)
        trace.on_request_chunk_sent.append(_writing)
        self.kept = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=60),
            read_bufsize=read_bufsize, trace_configs=[trace])
        self.fresh = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, force_close=True), read_bufsize=read_bufsize,
            trace_configs=[trace])
        self.reuses = 0  # requests answered on a reused connection
        self.reconnects = 0
        self.closing = ""  # why every request now gets a connection of its own

    async def __aenter__(self) -> Pool:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.kept.close()
        await self.fresh.close()

    async def post(self, url: str, *, attempt: Attempt | None = None,
                   **kwargs) -> aiohttp.ClientResponse:
        """POST; once more, on a fresh connection, if the server had closed the reused one."""
        attempt = attempt or Attempt()
        while True:
            attempt.reused, started = False, time.perf_counter()
            session = self.fresh if self.closing or attempt.reconnects else self.kept
            try:
                response = await session.post(url, trace_request_ctx=attempt, **kwargs)
            except LOST as exc:
                late = time.perf_counter() - started > RESEND_WINDOW
                if attempt.reconnects or not attempt.reused or late or not unanswered(exc):
                    raise
                attempt.reconnects += 1
                self.reconnects += 1
                self._server_closes("closed a kept-alive connection unannounced")
                continue
            if attempt.reused:
                self.reuses += 1
            elif response.headers.get("Connection", "").lower() == "close":
                self._server_closes("answered Connection: close")
            return response

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
