"""Is a soak's runner alive? Its pid, the pid's start time, its host and a heartbeat per window.

The runner marks itself in the soak's store when it starts or resumes and beats with every
committed window; it marks itself finished or stopped when it returns. A kill -9, a crash of
the interpreter or a reboot leaves the mark "running": `kvgate soak status` then asks the
process table (psutil: the pid must exist, not be a zombie, and have started when the runner
did, so a reused pid is not taken for the runner) and the heartbeat's age, and says the soak is
not running and how to resume it.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal

import psutil
from pydantic import BaseModel

# A heartbeat older than this many windows (plus a minute for a slow collector) is stale.
STALE_WINDOWS = 3
STALE_SLACK = 60.0


class RunnerMark(BaseModel):
    """Who runs a soak: pid, when that process started, host; its last sign of life."""

    pid: int
    created: float  # the process's start time (epoch seconds, psutil.Process.create_time)
    host: str
    heartbeat: float  # wall-clock time of the last sign of life (start, resume, window commit)
    state: Literal["running", "finished", "stopped"] = "running"
    reason: str = ""  # why a runner stopped early (the exception that ended it)


class Liveness(BaseModel):
    """What `kvgate soak status` says about the runner, and whether a resume may start."""

    kind: Literal["running", "finished", "ended", "gone", "stopped", "hung", "unknown"]
    text: str

    @property
    def busy(self) -> bool:
        """A runner that may still write windows: a resume must not start beside it."""
        return self.kind in ("running", "hung")


def this_runner(now: float | None = None) -> RunnerMark:
    """The mark of the calling process."""
    me = psutil.Process()
    return RunnerMark(pid=me.pid, created=me.create_time(), host=socket.gethostname(),
                      heartbeat=time.time() if now is None else now)


def is_me(mark: RunnerMark) -> bool:
    """Whether the mark is the calling process's own (a runner resumed in the same process)."""
    me = this_runner()
    return (mark.pid, mark.host) == (me.pid, me.host) and abs(mark.created - me.created) <= 1.0


def process_gone(pid: int, created: float) -> str:
    """Why pid is not the runner that started at `created` ("" when it still is)."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return f"runner pid {pid} is gone (exited; a zombie until its parent reaps it)"
        if abs(process.create_time() - created) > 1.0:
            return f"runner pid {pid} is gone (that pid is now another process)"
    except psutil.NoSuchProcess:
        return f"runner pid {pid} is gone"
    except psutil.Error:
        return ""  # not ours to inspect (another user's process): it exists
    return ""


def at(t: float) -> str:
    """A wall-clock time for people: UTC, to the second."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ago(seconds: float) -> str:
    return f"{seconds:.0f} s ago" if seconds < 120 else f"{seconds / 60:.0f} min ago"


def judge(mark: RunnerMark | None, window: float, finished: bool, resume: str,
          now: float | None = None, host: str | None = None,
          gone: Callable[[int, float], str] = process_gone) -> Liveness:
    """Whether the soak's runner is alive; resume is the command that continues the soak."""
    now = time.time() if now is None else now
    host = socket.gethostname() if host is None else host
    if finished:
        return Liveness(kind="finished", text="finished: every planned window is committed")
    again = f"resume with `{resume}`"
    if mark is None:
        return Liveness(kind="unknown", text="no runner is recorded for this soak (started by an "
                        f"older kvgate): if no kvgate process is running it, {again}")
    beat, age = at(mark.heartbeat), now - mark.heartbeat
    stale = age > STALE_WINDOWS * window + STALE_SLACK
    if mark.state == "stopped":
        why = f": {mark.reason}" if mark.reason else ""
        return Liveness(kind="stopped", text=f"not running (runner pid {mark.pid} stopped before "
                        f"the last window{why}; last heartbeat at {beat}): {again}")
    if mark.state == "finished":  # marked finished, yet windows are missing: never normally
        return Liveness(kind="stopped", text=f"not running (runner pid {mark.pid} returned at "
                        f"{beat} with windows still to run): {again}")
    if mark.host != host:
        if stale:
            return Liveness(kind="gone", text=f"not running (runner pid {mark.pid} on host "
                            f"{mark.host} sent no heartbeat since {beat}, {_ago(age)}): {again}")
        return Liveness(kind="running", text=f"running on host {mark.host} (pid {mark.pid}, "
                        f"last heartbeat at {beat}, {_ago(age)}; the pid cannot be checked "
                        "from here)")
    if why := gone(mark.pid, mark.created):
        return Liveness(kind="gone", text=f"not running ({why}, last heartbeat at {beat}): "
                        f"{again}")
    if stale:
        return Liveness(kind="hung", text=f"not responding (runner pid {mark.pid} is alive, but "
                        f"its last heartbeat at {beat} is {_ago(age)}, more than "
                        f"{STALE_WINDOWS} windows): stop it (kill {mark.pid}), then {again}")
    return Liveness(kind="running", text=f"running (runner pid {mark.pid}, last heartbeat at "
                    f"{beat}, {_ago(age)})")
