"""The G4 kernel log collector: NVMe timeouts, resets, reconnects, I/O and XFS errors in dmesg."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from ..storage import CommandRunner, ToolMissing, install_hint
from .health import MAX_DETAILS, BaseCollector, WindowContext
from .rules import KERNEL, HealthReading

KERNEL_PATTERNS = [  # (kind, pattern): the message forms of drivers/nvme, block/ and fs/xfs
    ("nvme_timeout", r"\bnvme (nvme\d+): (?:I/O|.*\bQID\b).*\btimeout\b"),
    ("nvme_timeout", r"\bnvme (nvme\d+): queue \d+: timeout\b"),
    ("nvme_reset", r"\bnvme (nvme\d+): (?:resetting controller|controller is down; will reset"
                   r"|Removing after probe failure|Device not ready)"),
    ("nvme_reconnect", r"(?i)\bnvme (nvme\d+): (?:reconnecting in|failed reconnect attempt"
                       r"|starting error recovery|failed to connect)"),
    ("io_error", r"\b(?:I/O error|critical medium error), dev (\w+), sector"),
    ("io_error", r"\bBuffer I/O error on dev (\w+)"),
    ("io_error", r"\b(nvme\d+n\d+): .* @ LBA \d+, \d+ blocks, .*\(sct 0x[0-9a-f]+ / sc "),
    ("xfs_error", r"\bXFS \(([^)]+)\): .*(?:(?i:error)|[Cc]orruption|shut(?:ting)? down"
                  r"|force_shutdown)"),
]
_COMPILED = [(kind, re.compile(p)) for kind, p in KERNEL_PATTERNS]
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:[+-]\d\d:?\d\d|Z)?)\s+(.*)$")


class KernelHit(BaseModel):
    """One kernel log line about a storage problem."""

    kind: str
    device: str
    line: str
    t: float | None = None  # epoch seconds, when the log line carried a timestamp


def _epoch(stamp: str) -> float | None:
    try:
        when = dt.datetime.fromisoformat(stamp.replace(",", ".").replace("Z", "+00:00"))
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=dt.UTC)).timestamp()


def scan_kernel_log(text: str, devices: Sequence[str] = ()) -> list[KernelHit]:
    """Storage errors in ``dmesg --time-format=iso`` or journal text; devices filters by name."""
    hits = []
    for raw in text.splitlines():
        match = _STAMP.match(raw)
        t, line = (_epoch(match.group(1)), match.group(2)) if match else (None, raw)
        for kind, pattern in _COMPILED:
            found = pattern.search(line)
            if found:
                device = found.group(1)
                # nvme0n1 belongs to nvme0: a filter on either name catches both forms.
                if not devices or any(device.startswith(d) or d.startswith(device)
                                      for d in devices):
                    hits.append(KernelHit(kind=kind, device=device, line=line.strip(), t=t))
                break
    return hits


def hits_reading(hits: list[KernelHit]) -> HealthReading:
    """A reading from a window's kernel hits: counts per kind and the first lines."""
    values = {"hits": float(len(hits))}
    for hit in hits:
        values[hit.kind] = values.get(hit.kind, 0.0) + 1
    return HealthReading(status="alert" if hits else "ok", values=values,
                         details=[h.line for h in hits[:MAX_DETAILS]])


RESTRICT = Path("/proc/sys/kernel/dmesg_restrict")


def _restricted(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return "unknown"


class KernelLog(BaseCollector):
    """Scans ``dmesg --time-format=iso`` for the window (since the last committed window).

    Every host has a kernel log: one kvgate cannot read is an ERROR naming the package or
    the permission, never NOT APPLICABLE.
    """

    name = KERNEL

    def __init__(self, runner: CommandRunner, devices: Sequence[str] = (),
                 argv: Sequence[str] = ("dmesg", "--time-format=iso"),
                 restrict: Path = RESTRICT):
        self.runner, self.devices, self.argv = runner, tuple(devices), list(argv)
        self.restrict = restrict

    def collect(self, ctx: WindowContext) -> HealthReading:
        """The window's storage errors; an error reading where the kernel log is refused."""
        try:
            done = self.runner.run(self.argv, timeout=30)
        except ToolMissing as exc:
            return HealthReading.failed(f"the kernel log cannot be read: {exc} "
                                        f"({install_hint('dmesg')})")
        if done.returncode != 0:
            why = (done.stderr.strip() or f"exit {done.returncode}").splitlines()[-1]
            return HealthReading.failed(
                f"the kernel log cannot be read: `{' '.join(self.argv)}` failed: {why} "
                f"(kernel.dmesg_restrict = {_restricted(self.restrict)}: reading it needs root "
                "or CAP_SYSLOG; in a container, the host's permission to read it)")
        hits = [h for h in scan_kernel_log(done.stdout, self.devices)
                if h.t is not None and ctx.since < h.t <= ctx.end]
        return hits_reading(hits)
