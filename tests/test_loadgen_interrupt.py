"""A Ctrl-C while a request is in flight ends the run in KeyboardInterrupt, nothing more sent.

Real parts in a child process of its own (so the signal never reaches pytest): the load
generator's `send` to a loopback server under plain asyncio.run, one request at a time as the
cold-recovery phases and the llama.cpp slot runner send them. The server sends the process a
SIGINT when the first request arrives and answers every later one. Before the fix `send` recorded
the cancellation as a CANCELLED outcome, asyncio.run returned normally and the next two requests
went out: a sweep Ctrl-C'd mid-size ran to its end and exited 0 (CI, 2026-12-07).
"""

import subprocess
import sys
from pathlib import Path

from _ctrlc import sigint_as_in_a_terminal

SCRIPT = """
import asyncio, os, signal, sys
sys.path.insert(0, {tests!r})
from test_loadgen_keepalive import RESPONSE, Req, read_request
from gates.loadgen import Endpoint, LoadSettings, Pool, send

seen = []

async def handle(reader, writer):
    while (prompt := await read_request(reader)) is not None:
        seen.append(prompt)
        if len(seen) == 1:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, the request in flight
            continue  # never answered
        writer.write(RESPONSE)
        await writer.drain()

async def requests():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{{server.sockets[0].getsockname()[1]}}"
    async with server, Pool() as pool:
        return [(await send(pool, Endpoint(url=url, model="m"), Req(f"r{{i}}", [i]),
                            LoadSettings(stall_timeout=30), 0)).outcome.value
                for i in range(3)]

try:
    print("returned", asyncio.run(requests()), "after", len(seen), "requests")
except KeyboardInterrupt:
    print("KeyboardInterrupt after", len(seen), "requests")
"""


def test_a_ctrl_c_during_a_request_ends_the_run_and_sends_nothing_more():
    tests = str(Path(__file__).parent)
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(tests=tests)],
                          capture_output=True, text=True, timeout=60,
                          preexec_fn=sigint_as_in_a_terminal)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "KeyboardInterrupt after 1 requests", done.stdout
