"""Loopback ports and health answers for launched arms: which port is free, who answers."""

from __future__ import annotations

import http.client
import socket
import urllib.error
import urllib.request

LAUNCH_HOST = "127.0.0.1"  # launched arms serve on loopback only
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # like aiohttp: no proxy


def http_status(url: str, timeout: float) -> int:
    """GET url and return the HTTP status; OSError when nothing answers."""
    try:
        with _OPENER.open(url, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        exc.close()
        return exc.code
    except http.client.HTTPException as exc:  # a garbled answer is no answer
        raise OSError(f"bad HTTP answer: {exc!r}") from None


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as sock:
        sock.bind((LAUNCH_HOST, 0))
        return sock.getsockname()[1]


def port_taken(port: int) -> bool:
    """Whether something listens on the loopback port (TIME_WAIT leftovers do not count)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((LAUNCH_HOST, port))
        except OSError:
            return True
    return False
