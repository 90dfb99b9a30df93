"""`kvgate sim serve` in its own process, as a user runs it: started on a free loopback port,
waited on until GET /health answers, stopped after. Shared by the CLI tests that talk to it."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gates.inference.ports import free_port


@contextmanager
def sim_serve(kv_dir: Path | None = None, output: int | None = subprocess.DEVNULL
              ) -> Iterator[tuple[str, subprocess.Popen]]:
    """The simulator's URL and process; ``output`` is where its stdout and stderr go."""
    port = free_port()
    argv = [sys.executable, "-m", "gates.cli", "sim", "serve", "--profile", "tiny",
            *(["--kv-dir", str(kv_dir)] if kv_dir is not None else []), "--port", str(port)]
    proc = subprocess.Popen(argv, stdout=output, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(url + "/health", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        yield url, proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)
