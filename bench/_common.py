"""What the three benchmarks share: the simulator subprocess, CPU pinning, prompts, tables."""

from __future__ import annotations

import contextlib
import os
import platform
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

from gates.core.statistics import percentile
from gates.loadgen import PlannedRequest
from gates.loadgen.workloads import block_tokens

HERE = Path(__file__).resolve().parent
GEN_CPU, SIM_CPU = 0, 1  # the generator on one core, the simulator on the other
VOCAB = 32_000  # the tiny profile's vocabulary


def pin_generator() -> str:
    """Pin this process (the load generator) to GEN_CPU when the machine has two or more."""
    if not hasattr(os, "sched_setaffinity"):
        return "not pinned (no sched_setaffinity)"
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return f"not pinned (only CPU {cpus})"
    os.sched_setaffinity(0, {GEN_CPU})
    return f"generator on CPU {GEN_CPU}, simulator on CPU {SIM_CPU}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """A server subprocess on 127.0.0.1 that answers GET /health; ``url`` once it does."""

    what = "server"

    def __init__(self, cmd: list[str], port: int, start_timeout: float = 30):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + start_timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.what} exited: "
                                   f"{self.proc.stderr.read().decode()[-2000:]}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1):
                    break
            except OSError as exc:
                if time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError(f"{self.what} did not answer within {start_timeout} s: "
                                       f"{exc}") from exc
                time.sleep(0.1)

    def cpu_seconds(self) -> float:
        """User + system CPU time the server has used so far (nan once it is gone)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return float("nan")

    def close(self) -> None:
        """Stop the subprocess (the one we started, by its handle)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def server_cpu_args() -> list[str]:
    """``--cpu SIM_CPU`` when the machine can pin the server to a core of its own, else []."""
    if (os.cpu_count() or 1) >= 2 and hasattr(os, "sched_setaffinity"):
        return ["--cpu", str(SIM_CPU)]
    return []


class Sim(ServerProcess):
    """A simulator subprocess on 127.0.0.1 (see _simproc.py); ``url`` once it answers."""

    what = "simulator"

    def __init__(self, *, fast: bool = False, profile: str = "tiny", start_timeout: float = 30):
        port = _free_port()
        cmd = [sys.executable, str(HERE / "_simproc.py"), "--port", str(port),
               "--profile", profile]
        if fast:
            cmd.append("--fast")
        # Pinned by the child itself: the generator may already be pinned to the other CPU.
        super().__init__(cmd + server_cpu_args(), port, start_timeout)


def _busy_jiffies() -> int | None:
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    return sum(fields) - fields[3] - (fields[4] if len(fields) > 4 else 0)  # minus idle, iowait


class Background:
    """CPU that processes other than this benchmark and its simulator used meanwhile."""

    def __init__(self, sim: Sim) -> None:
        self.sim = sim
        self.start = (_busy_jiffies(), own_cpu_seconds(), sim.cpu_seconds(), time.monotonic())

    def report(self) -> str:
        """E.g. 'other processes used 12% of one core meanwhile'."""
        busy0, own0, sim0, t0 = self.start
        busy1 = _busy_jiffies()
        if busy0 is None or busy1 is None:
            return "background load unknown"
        elapsed = time.monotonic() - t0
        ours = own_cpu_seconds() - own0 + self.sim.cpu_seconds() - sim0
        other = max(0.0, (busy1 - busy0) / os.sysconf("SC_CLK_TCK") - ours)
        share = other / elapsed if elapsed > 0 else 0.0
        return (f"other processes on this machine used {share:.0%} of one core meanwhile "
                f"(average over {elapsed:.0f} s)"
                + (" -- NOISY: these numbers include that interference" if share > 0.2 else ""))


def own_cpu_seconds() -> float:
    """User + system CPU time of this process."""
    t = os.times()
    return t.user + t.system


def prompts(tag: str, count: int, tokens: int, max_tokens: int, phase: str = "probe",
            at: Sequence[float] | None = None) -> list[PlannedRequest]:
    """``count`` requests with unique token-id prompts (no prefix sharing), deterministic."""
    return [PlannedRequest(request_id=f"{tag}-{i:06d}", phase=phase, max_tokens=max_tokens,
                           prompt=block_tokens(f"bench:{tag}:{i}", tokens, VOCAB),
                           at=None if at is None else at[i]) for i in range(count)]


def ms(seconds: float | None, digits: int = 3) -> str:
    """Seconds as milliseconds, or a dash."""
    return "-" if seconds is None else f"{seconds * 1e3:.{digits}f}"


def pct(values: Sequence[float], p: float) -> float | None:
    """Linear-interpolated percentile (gates.loadgen.metrics), None when empty."""
    return percentile(values, p) if values else None


def ratio(a: float | None, b: float | None) -> str:
    """a / b as '1.23x', or a dash."""
    return "-" if a is None or b is None or b <= 0 else f"{a / b:.2f}x"


def machine() -> str:
    """When and where: UTC time, CPU count, CPU model, Python."""
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return (f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {os.cpu_count()} CPUs"
            f"{f' ({model})' if model else ''}; Python {platform.python_version()}; "
            f"{platform.system()} {platform.release()}")


def print_table(title: str, columns: Sequence[str], rows: Iterator[Sequence[str]] | list,
                plain: bool = False) -> None:
    """A rich table, or a plain aligned one with --plain or without rich."""
    rows = [list(map(str, r)) for r in rows]
    if not plain:
        try:
            from rich.console import Console
            from rich.table import Table
        except ImportError:
            plain = True
    if not plain:
        table = Table(title=title)
        for i, c in enumerate(columns):
            table.add_column(c, justify="left" if i == 0 else "right")
        for r in rows:
            table.add_row(*r)
        Console(width=200).print(table)
        return
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    print(title)
    print("  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True)))
    for r in rows:
        print("  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)))
    print()
