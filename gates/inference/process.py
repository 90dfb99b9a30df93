"""Launched arms (DESIGN §5): an engine as a child process on loopback, health-checked.

A launched arm runs as a child in its own process group, logs to a file kept as evidence, and
is stopped (SIGTERM, then SIGKILL) on every way out, Ctrl-C included.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

from pydantic import SecretStr

from ..core.configuration import Arm, ArmError, render
from ..core.quantities import format_duration
from ..loadgen import Endpoint
from .ports import LAUNCH_HOST, free_port, http_status, port_taken

TAIL_LINES = 40  # of an engine's log, in every error that names its start, stop or crash

HealthProbe = Callable[[str, float], int]  # (url, timeout) -> HTTP status; OSError if no answer


def _die_with_parent() -> None:
    # Linux: the engine gets SIGTERM if kvgate is killed (kill -9 included), so a crashed run
    # leaves no orphan serving stale KV; elsewhere this is a no-op.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _child_setup(cpus: tuple[int, ...]) -> Callable[[], None]:
    def setup() -> None:
        _die_with_parent()
        if cpus:  # inherited by every process the engine forks (vLLM's EngineCore, workers)
            os.sched_setaffinity(0, cpus)
    return setup


def _exited(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _signal_group(pgid: int, sig: int) -> bool:
    """Signal a process group; False when the group is gone."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ArmProcess:
    """A started arm: a child process group kvgate owns, or endpoints someone else runs."""

    def __init__(self, name: str, arm: Arm, log_path: Path | None = None, *, run_id: str = "",
                 probe: HealthProbe = http_status, poll: float = 0.1):
        if arm.kind == "launch" and log_path is None:
            raise ValueError(f"arm '{name}' is launched: it needs a log file")
        self.name, self.arm, self.log_path, self.run_id = name, arm, log_path, run_id
        self.port = arm.port
        self.exit_code: int | None = None
        self._probe, self._poll = probe, poll
        self._proc: subprocess.Popen | None = None
        self._log_offset = 0

    def __enter__(self) -> ArmProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        """The launched child's pid (also its process group id), None when not running."""
        return self._proc.pid if self._proc else None

    def base_urls(self) -> list[str]:
        """The arm's base URLs (a launched arm's port is known once it has started)."""
        if self.arm.kind == "endpoint":
            return [u.rstrip("/") for u in self.arm.urls]
        if not self.port:
            raise ArmError(self.name, "start", "not started yet: its port is not chosen")
        return [f"http://{LAUNCH_HOST}:{self.port}"]

    def metrics_urls(self) -> list[str]:
        """Where to scrape Prometheus metrics."""
        return self.arm.metrics_urls or [u + self.arm.metrics_path for u in self.base_urls()]

    def endpoints(self) -> list[Endpoint]:
        """One load-generator Endpoint per serving instance."""
        key = self._api_key("endpoints")
        return [Endpoint(url=u, model=self.arm.model, api=self.arm.api, api_key=key)
                for u in self.base_urls()]

    def command(self) -> tuple[list[str], dict[str, str]]:
        """The launch argv and the environment additions, placeholders filled in."""
        kv_dir = "" if self.arm.kv_dir is None else str(self.arm.kv_dir)
        values = {"kv_dir": kv_dir, "port": str(self.port), "model": self.arm.model,
                  "run_id": self.run_id, "python": sys.executable,
                  "gpu_cache": str(self.arm.gpu_cache or 0),
                  "cpu_tier": str(self.arm.cpu_tier or 0)}
        return ([render(c, values) for c in self.arm.command],
                {k: render(v, values) for k, v in self.arm.env.items()})

    def alive(self) -> bool:
        """A launched child still running; for endpoints, every health URL answering 200."""
        if self.arm.kind == "endpoint":
            return all(self._status(u)[0] == 200 for u in self._health_urls())
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> ArmProcess:
        """Launch the arm (or check an endpoint arm) and return once its health URL gives 200."""
        self._api_key("start")
        if self.arm.kind == "endpoint":
            self.check("start")
            return self
        if self.alive():
            return self
        if not self.port:
            self.port = free_port()
        elif port_taken(self.port):
            raise ArmError(self.name, "start", f"port {self.port} on {LAUNCH_HOST} is already in "
                           "use (another server, or an arm left from an earlier run?)")
        argv, extra = self.command()
        missing = sorted(set(self.arm.cpus) - os.sched_getaffinity(0))
        if missing:
            raise ArmError(self.name, "start", f"cpus = {self.arm.cpus}: core(s) "
                           f"{', '.join(map(str, missing))} are not available to kvgate here "
                           f"(it may use {sorted(os.sched_getaffinity(0))})")
        # Python engines (vLLM, SGLang) would otherwise hold their last words in a buffer.
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **extra}
        assert self.log_path is not None
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._log_offset = log.tell()
            when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            log.write(f"=== kvgate: arm {self.name} starting {when}: {' '.join(argv)}\n".encode())
            log.flush()
            try:
                self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                              stderr=subprocess.STDOUT, env=env,
                                              start_new_session=True,
                                              preexec_fn=_child_setup(tuple(self.arm.cpus)))
            except OSError as exc:
                raise ArmError(self.name, "start", f"cannot run {argv[0]!r}: "
                               f"{exc.strerror or exc}") from None
        self.exit_code = None
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()  # never leave a half-started engine behind, Ctrl-C included
            raise
        return self

    def _wait_healthy(self) -> None:
        url = self._health_urls()[0]
        timeout = self.arm.startup_timeout
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while True:
            self.check("start")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.stop()
                raise ArmError(self.name, "start", f"GET {url} did not answer 200 within "
                               f"{format_duration(timeout)} (last: {last}); stopped it",
                               None, self.log_tail(), self.log_path)
            status, last = self._status(url, min(remaining, 2.0))
            if status == 200 and self._proc is not None and self._proc.poll() is None:
                return
            time.sleep(min(self._poll, max(deadline - time.monotonic(), 0.0)))

    def check(self, phase: str) -> None:
        """Raise ArmError naming phase if a launched child has exited or an endpoint is down."""
        if self.arm.kind == "endpoint":
            for url in self._health_urls():
                status, detail = self._status(url)
                if status != 200:
                    host = urllib.parse.urlsplit(url).netloc
                    raise ArmError(self.name, phase, f"endpoint {host} is not healthy: GET {url} "
                                   f"gave {detail}")
            return
        if self._proc is None:
            raise ArmError(self.name, phase, "not running", self.exit_code, self.log_tail(),
                           self.log_path)
        code = self._proc.poll()
        if code is not None:
            self.stop()  # reaps it and clears any workers left in its group
            raise ArmError(self.name, phase, _exited(code), code, self.log_tail(), self.log_path)

    def stop(self) -> int | None:
        """SIGTERM the process group, SIGKILL it after stop_timeout; no-op if not running."""
        proc, self._proc = self._proc, None
        if proc is None:
            return self.exit_code
        deadline = time.monotonic() + self.arm.stop_timeout
        try:
            _signal_group(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=self.arm.stop_timeout)
            # Workers the engine forked into its group get what is left of the grace time.
            while _signal_group(proc.pid, 0) and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            _signal_group(proc.pid, signal.SIGKILL)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # stuck in the kernel (D state)
                raise ArmError(self.name, "stop", f"pid {proc.pid} survived SIGKILL") from None
        self.exit_code = proc.returncode
        return self.exit_code

    def restart(self) -> ArmProcess:
        """Stop and start again on the same port: empties every cache in the engine's memory."""
        if self.arm.kind == "endpoint":
            raise ArmError(self.name, "restart", "kvgate cannot restart an endpoint arm someone "
                           "else runs; evict by resetting the prefix cache instead")
        self.stop()
        return self.start()

    def log_tail(self, lines: int = TAIL_LINES) -> str:
        """The last lines this start wrote to the log."""
        if self.log_path is None:
            return ""
        try:
            with open(self.log_path, "rb") as log:
                size = log.seek(0, os.SEEK_END)
                log.seek(max(self._log_offset, size - 64 * 1024))
                text = log.read().decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _health_urls(self) -> list[str]:
        return [u + self.arm.health_path for u in self.base_urls()]

    def _status(self, url: str, timeout: float | None = None) -> tuple[int | None, str]:
        try:
            status = self._probe(url, timeout or min(self.arm.startup_timeout, 10.0))
        except OSError as exc:
            return None, str(getattr(exc, "reason", None) or exc)
        return status, f"HTTP {status}"

    def _api_key(self, phase: str) -> SecretStr | None:
        if not self.arm.api_key_env:
            return None
        key = os.environ.get(self.arm.api_key_env)
        if key is None:
            raise ArmError(self.name, phase, f"environment variable {self.arm.api_key_env} "
                           "(api_key_env) is not set")
        return SecretStr(key)
