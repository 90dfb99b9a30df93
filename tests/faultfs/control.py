"""The control socket: one JSON request per line, one JSON answer per line.

Requests: ``{"set": [fault, ...]}`` replaces the rules (each a dict of Fault's fields),
``{"clear": true}`` removes them, ``{"stats": true}`` returns what the filesystem saw and did.
An answer is ``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}``; a rule is in force
once its ``set`` is answered.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
from pathlib import Path

from .faults import Fault, FaultTable


def answer(table: FaultTable, request: dict) -> dict:
    """The answer to one request; a malformed one is answered, never raised."""
    try:
        if "set" in request:
            table.set([Fault(**spec) for spec in request["set"]])
            return {"ok": True}
        if request.get("clear"):
            table.set([])
            return {"ok": True}
        if request.get("stats"):
            return {"ok": True, **table.stats()}
        return {"ok": False, "error": f"unknown request {sorted(request)}"}
    except (TypeError, ValueError) as exc:
        return {"ok": False, "error": str(exc)}


def serve(path: Path, table: FaultTable) -> socketserver.BaseServer:
    """Answer requests on the Unix socket ``path`` in a daemon thread."""

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            for line in self.rfile:
                try:
                    reply = answer(table, json.loads(line))
                except ValueError as exc:
                    reply = {"ok": False, "error": f"not JSON: {exc}"}
                self.wfile.write(json.dumps(reply).encode() + b"\n")

    server = socketserver.ThreadingUnixStreamServer(str(path), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True, name="faultfs-control").start()
    return server


def request(path: Path, message: dict, timeout: float = 10.0) -> dict:
    """Send one request to the socket at ``path``; raises RuntimeError if it is refused."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        sock.sendall(json.dumps(message).encode() + b"\n")
        reply = json.loads(sock.makefile("rb").readline())
    if not reply.get("ok"):
        raise RuntimeError(f"faultfs refused {message}: {reply.get('error')}")
    return reply
