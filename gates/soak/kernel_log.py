"""The G4 kernel log collector: NVMe timeouts, resets, reconnects, I/O and XFS errors in dmesg."""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Collection, Sequence
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


# The kernel's NVMe names (drivers/nvme/host/core.c, nvme_set_disk_name / dev_set_name of
# Linux 6.x): controller nvme<C>, namespace nvme<C>n<N>, multipath path nvme<S>c<C>n<N>, and
# block/partitions/core.c's partition suffix "p<P>" after a name that ends in a digit.
_NVME = re.compile(r"^nvme(?P<ctrl>\d+)(?:c\d+)?(?:n(?P<ns>\d+)(?:p(?P<part>\d+))?)?$")


def kernel_name(device: str) -> str:
    """The kernel's name of a device written as the site file documents it: /dev/nvme1n1 ->
    nvme1n1 (the log never says "/dev/")."""
    return device.rstrip("/").rsplit("/", 1)[-1]


def _partition_of(part: str, disk: str) -> bool:
    # block/partitions/core.c: "sda" + "1", but "md0" + "p1" (a name ending in a digit).
    suffix = part[len(disk):]
    pattern = r"p\d+" if disk[-1:].isdigit() else r"\d+"
    return part.startswith(disk) and bool(suffix) and re.fullmatch(pattern, suffix) is not None


def same_device(logged: str, wanted: str) -> bool:
    """Whether a device the kernel logged is (part of) one the site names: a controller's
    lines belong to its namespaces and theirs to its partitions, but nvme1 is not nvme10."""
    logged, wanted = kernel_name(logged), kernel_name(wanted)
    a, b = _NVME.match(logged), _NVME.match(wanted)
    if a and b:
        return a["ctrl"] == b["ctrl"] and all(
            a[k] is None or b[k] is None or a[k] == b[k] for k in ("ns", "part"))
    return logged == wanted or _partition_of(logged, wanted) or _partition_of(wanted, logged)


# Native NVMe multipath (drivers/nvme/host, Linux 6.x): the subsystem takes its first
# controller's instance (core.c nvme_init_subsystem: subsys->instance = ctrl->instance) and links
# every controller into its sysfs directory under the controller's name (sysfs_create_link(
# &subsys->dev.kobj, &ctrl->device->kobj, dev_name(ctrl->device))); the shared namespace's disk
# nvme<S>n<N> is a child of that directory (multipath.c nvme_mpath_set_live: device_add_disk(
# &head->subsys->dev, ...)). So the timeouts and resets of a second path's controller, logged as
# "nvme nvme1: ...", belong to nvme0n1 though its number says otherwise; without multipath a
# namespace's disk is a child of its one controller (nvme<C>/nvme<C>n<N>).
SYS_CLASS_BLOCK = Path("/sys/class/block")
_CONTROLLER = re.compile(r"^nvme\d+$")
_SUBSYSTEM = re.compile(r"^nvme-subsys\d+$")


def controllers_of(device: str, sysfs: Path = SYS_CLASS_BLOCK) -> tuple[str, ...]:
    """The NVMe controllers a disk (or a partition of one) is reached through, read from sysfs:
    every controller of its subsystem under multipath, else its own; () for a disk that is not
    NVMe or that sysfs does not show (its lines are then matched by name alone)."""
    try:
        node = (sysfs / kernel_name(device)).resolve(strict=True)
        for parent in node.parents:
            if _CONTROLLER.match(parent.name):
                return (parent.name,)
            if _SUBSYSTEM.match(parent.name):
                return tuple(sorted(p.name for p in parent.iterdir() if _CONTROLLER.match(p.name)))
    except OSError:
        pass
    return ()


def scan_kernel_log(text: str, devices: Sequence[str] = (),
                    controllers: Collection[str] = ()) -> list[KernelHit]:
    """Storage errors in ``dmesg --time-format=iso`` or journal text; devices filters by name
    (as the kernel says it or as a /dev path), and a line a controller of theirs logged
    (``controllers``: "nvme1", as controllers_of reads them) is theirs too."""
    hits = []
    for raw in text.splitlines():
        match = _STAMP.match(raw)
        t, line = (_epoch(match.group(1)), match.group(2)) if match else (None, raw)
        for kind, pattern in _COMPILED:
            found = pattern.search(line)
            if found:
                device = found.group(1)
                if not devices or device in controllers or any(
                        same_device(device, d) for d in devices):
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
    the permission, never NOT APPLICABLE. After a window whose read failed, the next read
    starts where the last good one ended, so that window's lines are still counted (the
    failed window itself still counts against the rule's coverage). A storage error line
    without a time it can read makes the window unread: dropped, it hid an error.
    """

    name = KERNEL

    def __init__(self, runner: CommandRunner, devices: Sequence[str] = (),
                 argv: Sequence[str] = ("dmesg", "--time-format=iso"),
                 restrict: Path = RESTRICT, sysfs: Path = SYS_CLASS_BLOCK):
        # A /dev/disk/by-id link names the kernel's device only once resolved.
        self.devices = tuple(kernel_name(os.path.realpath(d) if d.startswith("/") else d)
                             for d in devices)
        self.controllers = frozenset(c for d in self.devices for c in controllers_of(d, sysfs))
        self.runner, self.argv, self.restrict = runner, list(argv), restrict
        self.read_until: float | None = None  # the end of the last window read

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
        since = ctx.since if self.read_until is None else min(ctx.since, self.read_until)
        found = scan_kernel_log(done.stdout, self.devices, self.controllers)
        untimed = [h for h in found if h.t is None]
        if untimed:  # before the soak or in it, in which window: unknown, so not read
            return HealthReading.failed(
                f"{len(untimed)} storage error line(s) in the kernel log carry no time kvgate "
                f"can read, so whether they fall in this window is unknown: "
                f"{untimed[0].line!r} (`{' '.join(self.argv)}` must print ISO times)")
        hits = [h for h in found if since < h.t <= ctx.end]
        self.read_until = ctx.end
        return hits_reading(hits)
