"""The storage devices' own counters: the disk-counter seam, read bytes between snapshots, and
the effective restore rate. Pure, apart from ``PsutilDiskCounters`` (the seam's real side)."""

from __future__ import annotations

import math
from typing import Protocol

from pydantic import BaseModel


class AttributionError(ValueError):
    """An unknown engine, or device counters that cannot be compared."""


class DiskIO(BaseModel):
    """One block device's cumulative counters, as psutil reports them."""

    read_bytes: int = 0
    write_bytes: int = 0
    read_count: int = 0
    write_count: int = 0


class DiskCounters(Protocol):
    """The seam: a snapshot of every block device's counters, by name (``nvme0n1``)."""

    def read(self) -> dict[str, DiskIO]: ...


class PsutilDiskCounters:
    """The real seam: ``psutil.disk_io_counters(perdisk=True)``."""

    def read(self) -> dict[str, DiskIO]:
        """A snapshot of every block device's counters."""
        import psutil  # imported here so the pure part of this module needs no psutil

        try:
            found = psutil.disk_io_counters(perdisk=True) or {}
        except (OSError, RuntimeError) as exc:  # no /proc/diskstats, e.g. in some containers
            raise AttributionError(f"cannot read the disks' I/O counters: {exc}") from None
        return {name: DiskIO(read_bytes=c.read_bytes, write_bytes=c.write_bytes,
                             read_count=c.read_count, write_count=c.write_count)
                for name, c in found.items()}


class FakeDiskCounters:
    """The test double: returns scripted snapshots in turn, then repeats the last."""

    def __init__(self, snapshots: list[dict[str, DiskIO]]):
        if not snapshots:
            raise ValueError("FakeDiskCounters needs at least one snapshot")
        self._snapshots, self.calls = list(snapshots), 0

    def read(self) -> dict[str, DiskIO]:
        """The next scripted snapshot."""
        snapshot = self._snapshots[min(self.calls, len(self._snapshots) - 1)]
        self.calls += 1
        return snapshot


def device_read_bytes(before: dict[str, DiskIO], after: dict[str, DiskIO],
                      devices: list[str]) -> int:
    """Bytes read from the named devices (``nvme0n1`` or ``/dev/nvme0n1``) between snapshots."""
    # Name the devices that carry the KV tier, and not both an md array and its members, or
    # the same reads count twice.
    total = 0
    for device in devices:
        name = device.removeprefix("/dev/")
        if name not in before or name not in after:
            raise AttributionError(f"device {device!r} has no I/O counters; present: "
                                   f"{', '.join(sorted(after)) or 'none'}")
        read = after[name].read_bytes - before[name].read_bytes
        if read < 0:
            raise AttributionError(f"device {device!r}: read bytes went down ({read}); "
                                   f"was the device re-attached?")
        total += read
    return total


def restore_gbps(nbytes: float, seconds: float) -> float | None:
    """Effective KV restore rate in GB/s (10^9 bytes/s); None for an empty interval."""
    if not (math.isfinite(seconds) and seconds > 0) or not math.isfinite(nbytes):
        return None
    return nbytes / seconds / 1e9
