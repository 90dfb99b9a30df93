"""A request's t0 is when its bytes go to the socket, and a resend keeps the first try's t0."""

import asyncio
import time

from test_loadgen_keepalive import RESPONSE, Req, read_request

from gates.loadgen import Endpoint, LoadSettings, Pool, send


class StampingServer:
    """Answers every request on a connection; stamps when each request's head has arrived and
    when each connection was accepted. With close_after, ends a connection when the request
    after that many arrives, answering nothing (the client must send it again)."""

    def __init__(self, close_after: int | None = None):
        self.close_after = close_after
        self.received_ns: list[int] = []
        self.accepted_ns: list[int] = []

    async def handle(self, reader, writer):
        self.accepted_ns.append(time.perf_counter_ns())
        served = 0
        while await read_request(reader) is not None:
            self.received_ns.append(time.perf_counter_ns())
            if self.close_after is not None and served == self.close_after:
                break
            served += 1
            writer.write(RESPONSE)
            await writer.drain()
        writer.close()


async def _sends(server: StampingServer, count: int):
    srv = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    endpoint = Endpoint(url=f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}", model="m")
    async with srv, Pool() as pool:
        origin = time.perf_counter_ns()
        out = []
        for i in range(count):
            called = time.perf_counter_ns()
            record = await send(pool, endpoint, Req(f"r{i}", [i]), LoadSettings(), origin)
            out.append((called, origin + round(record.t0 * 1e9), record))
        return out


def test_t0_lies_between_the_call_and_the_servers_receipt():
    server = StampingServer()
    sent = asyncio.run(_sends(server, 3))
    for (called, t0, record), received in zip(sent, server.received_ns, strict=True):
        assert record.ok
        assert called <= t0 <= received


def test_a_resend_keeps_the_first_tries_t0():
    server = StampingServer(close_after=1)  # the second request's connection closes on it
    sent = asyncio.run(_sends(server, 2))
    called, t0, record = sent[1]
    assert record.ok and record.reconnects == 1
    assert len(server.accepted_ns) == 2
    assert called <= t0 <= server.received_ns[1] < server.accepted_ns[1]  # before the new one


def test_the_clients_own_work_before_the_write_is_not_in_t0(monkeypatch):
    # A slow connect (name lookup, handshake) stands in for any work the client does before the
    # request's bytes leave: none of it is the server's time.
    real = asyncio.BaseEventLoop.create_connection

    async def slow(self, *args, **kwargs):
        await asyncio.sleep(0.05)
        return await real(self, *args, **kwargs)

    monkeypatch.setattr(asyncio.BaseEventLoop, "create_connection", slow)
    server = StampingServer()
    [(called, t0, record)] = asyncio.run(_sends(server, 1))
    assert record.ok
    assert t0 - called >= 50_000_000 and t0 <= server.received_ns[0]
