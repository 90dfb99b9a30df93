"""The command-runner seam: every external tool (fio, mdadm, nvme…) runs through one of these."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

Tick = Callable[[float], None]


@dataclass(frozen=True)
class Completed:
    """What a finished command left behind."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str = ""
    stderr: str = ""
    duration: float = 0.0
    timed_out: bool = False


class ToolMissing(Exception):
    """The command's executable is not installed; the message says what to install."""


class CommandRunner(Protocol):
    """Runs argv with a timeout; calls on_tick(elapsed seconds) while it waits."""

    def run(self, argv: Sequence[str], *, timeout: float, cwd: Path | None = None,
            on_tick: Tick | None = None) -> Completed: ...


# Where to get each tool we call, named in the error when it is missing.
INSTALL_HINTS = {
    "fio": "install fio (Debian/Ubuntu: apt-get install fio; RHEL: dnf install fio)",
}


def _libc_prctl() -> Callable[..., int] | None:
    # Looked up once in kvgate itself: the forked child must not load libraries.
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return None


_PRCTL = _libc_prctl()
PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    # In the child, before exec: SIGTERM when kvgate dies, kill -9 included (fio then stops its
    # workers; SIGKILL would orphan them). Linux sends it when the *thread* that forked the child
    # ends, so run() waits for its child in the thread that started it.
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # kvgate died before prctl: no signal will come
            os.kill(os.getpid(), signal.SIGTERM)


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the child's whole process group (fio forks workers into it)."""
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(proc.pid, signal.SIGKILL)


class SubprocessRunner:
    """The real runner: a child process in its own session, killed whole on timeout, and
    ended with kvgate, however kvgate ends (on Linux)."""

    def __init__(self, tick_interval: float = 0.25):
        self.tick_interval = tick_interval

    def run(self, argv: Sequence[str], *, timeout: float, cwd: Path | None = None,
            on_tick: Tick | None = None) -> Completed:
        """Run argv to completion or until timeout seconds have passed."""
        start = time.monotonic()
        try:
            # errors="replace": a stray non-UTF-8 byte in a tool's output is not a crash.
            proc = subprocess.Popen(list(argv), cwd=cwd, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, errors="replace",
                                    start_new_session=True,
                                    preexec_fn=functools.partial(_die_with_parent, os.getpid()))
        except FileNotFoundError as exc:
            if cwd is not None and not Path(cwd).is_dir():
                raise  # the working directory is missing, not the tool
            hint = INSTALL_HINTS.get(Path(argv[0]).name, f"install {argv[0]}")
            raise ToolMissing(f"'{argv[0]}' not found on PATH: {hint}") from exc
        timed_out = False
        try:
            while True:
                try:
                    out, err = proc.communicate(timeout=self.tick_interval)
                    break
                except subprocess.TimeoutExpired:
                    elapsed = time.monotonic() - start
                    if on_tick:
                        on_tick(elapsed)
                    if elapsed > timeout:
                        timed_out = True
                        _kill_group(proc)
                        out, err = proc.communicate()
                        break
        except BaseException:
            # Ctrl-C or a failing on_tick: the child is in its own session, so it would
            # otherwise keep running (and writing to the target) after we are gone.
            _kill_group(proc)
            proc.wait()
            raise
        return Completed(tuple(argv), proc.returncode, out, err,
                         time.monotonic() - start, timed_out)


class ScriptedRunner:
    """Test double: answers each command from a handler, as httpx's MockTransport does."""

    def __init__(self, handler: Callable[[tuple[str, ...]], Completed]):
        self.handler = handler
        self.calls: list[tuple[str, ...]] = []
        self.options: list[dict] = []  # timeout and cwd of each call, in the same order

    def run(self, argv: Sequence[str], *, timeout: float, cwd: Path | None = None,
            on_tick: Tick | None = None) -> Completed:
        """Record the call and return the handler's answer."""
        self.calls.append(tuple(argv))
        self.options.append({"timeout": timeout, "cwd": cwd})
        return self.handler(tuple(argv))
