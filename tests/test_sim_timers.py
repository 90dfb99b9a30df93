"""The simulator's event loop: timed waits end on time or on an event, never early."""

import asyncio
import selectors
import socket
import time

from gates.sim.timers import FineTimerSelector, fine_loop


def test_a_ready_descriptor_is_returned_at_once_whatever_the_timeout():
    a, b = socket.socketpair()
    with a, b, FineTimerSelector() as sel:
        sel.register(a, selectors.EVENT_READ, "a")
        b.send(b"x")
        for timeout in (None, 0, 0.0004, 5.0):
            started = time.monotonic()
            assert [key.data for key, _ in sel.select(timeout)] == ["a"]
            assert time.monotonic() - started < 2.0  # not the 5 s timeout


def test_a_timed_wait_with_nothing_ready_is_never_shorter_than_asked():
    a, b = socket.socketpair()
    with a, b, FineTimerSelector() as sel:
        sel.register(a, selectors.EVENT_READ)
        for timeout in (0.0003, 0.002):
            started = time.perf_counter()
            assert sel.select(timeout) == []
            assert time.perf_counter() - started >= timeout


def test_the_fine_loop_runs_sleeps_and_socket_io():
    async def main():
        reader, writer = await asyncio.open_connection(*server_addr)
        writer.write(b"ping")
        await asyncio.sleep(0.0005)
        data = await reader.read(4)
        writer.close()
        return data

    async def echo(reader, writer):
        writer.write(await reader.read(4))
        await writer.drain()
        writer.close()

    loop = fine_loop()
    try:
        server = loop.run_until_complete(asyncio.start_server(echo, "127.0.0.1", 0))
        server_addr = server.sockets[0].getsockname()[:2]
        assert loop.run_until_complete(main()) == b"ping"
        server.close()
        loop.run_until_complete(server.wait_closed())
    finally:
        loop.close()
