"""Storage-side counters during the probe: block devices, storage NICs and RDMA ports.

For NVMe-oF over RDMA no local block device may carry the reads a KV tier makes, so the
storage NICs' receive bytes (sysfs ``net/IF/statistics/rx_bytes``) and the RDMA ports'
``counters/port_rcv_data`` (in 4-byte words, per the InfiniBand spec and the kernel's
``Documentation/ABI/stable/sysfs-class-infiniband``) stand beside the block devices. Reading
sysfs is the seam: ``SysfsCounters`` reads a tree (the real ``/sys``, or one a test writes);
the arithmetic is pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field, NonNegativeInt

from .disks import AttributionError, DiskCounters, DiskIO, device_read_bytes

RDMA_WORD = 4  # port_rcv_data counts 32-bit words


class StorageSnapshot(BaseModel):
    """Cumulative storage-side counters at one moment."""

    disks: dict[str, DiskIO] = Field(default_factory=dict)
    nic_rx_bytes: dict[str, int] = Field(default_factory=dict)  # interface: bytes received
    rdma_rx_bytes: dict[str, int] = Field(default_factory=dict)  # "mlx5_0/1": bytes received


class StorageReads(BaseModel):
    """What the storage side delivered between two snapshots; None where nothing is watched."""

    device_bytes: NonNegativeInt | None = None
    nic_bytes: NonNegativeInt | None = None
    rdma_bytes: NonNegativeInt | None = None
    per_item: dict[str, int] = Field(default_factory=dict)  # device / NIC / port: bytes

    @property
    def any_watched(self) -> bool:
        """Whether any storage-side counter was read at all."""
        return any(v is not None for v in (self.device_bytes, self.nic_bytes, self.rdma_bytes))


def _read_int(path: Path) -> int:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError) as exc:
        raise AttributionError(f"cannot read {path}: {exc}") from None


class SysfsCounters:
    """The real seam: NIC and RDMA counters from sysfs, disks from a DiskCounters seam."""

    def __init__(self, interfaces: Sequence[str] = (), rdma_devices: Sequence[str] = (),
                 disks: DiskCounters | None = None, root: Path = Path("/sys")):
        self.interfaces, self.rdma_devices = list(interfaces), list(rdma_devices)
        self.disks, self.root = disks, root

    def _rdma_ports(self) -> dict[str, Path]:
        ports = {}
        for device in self.rdma_devices:
            folder = self.root / "class" / "infiniband" / device / "ports"
            if not folder.is_dir():
                raise AttributionError(f"RDMA device {device!r} has no ports under {folder}")
            for port in sorted(folder.iterdir()):
                ports[f"{device}/{port.name}"] = port / "counters" / "port_rcv_data"
        return ports

    def read(self) -> StorageSnapshot:
        """A snapshot of every watched counter."""
        nics = {name: _read_int(self.root / "class" / "net" / name / "statistics" / "rx_bytes")
                for name in self.interfaces}
        rdma = {port: _read_int(path) * RDMA_WORD for port, path in self._rdma_ports().items()}
        return StorageSnapshot(disks=self.disks.read() if self.disks else {},
                               nic_rx_bytes=nics, rdma_rx_bytes=rdma)


def double_counted(devices: Sequence[str], root: Path = Path("/sys")) -> str:
    """Why these devices would count reads twice ("" if not): an md array and its members."""
    names = {d.removeprefix("/dev/") for d in devices}
    for name in sorted(names):
        slaves = root / "block" / name / "slaves"
        members = {p.name for p in slaves.iterdir()} if slaves.is_dir() else set()
        both = sorted(members & names)
        if both:
            return (f"devices {name} and its members {', '.join(both)} are both named: every "
                    "read would count twice; name the md array or its members, not both")
    return ""


def _rise(before: dict[str, int], after: dict[str, int], what: str) -> dict[str, int]:
    # One read before and not after (an RDMA port re-enumerated by a link reset) carried an
    # unknown share of the probe: the sum over the others is not the storage side's.
    if gone := sorted(set(before) - set(after)):
        raise AttributionError(f"{what} {gone[0]!r} was read before the probe and is not in the "
                               "snapshot after the probe: its bytes in the probe are unknown")
    out = {}
    for name, value in after.items():
        if name not in before:
            raise AttributionError(f"{what} {name!r} appeared between the snapshots")
        if value < before[name]:
            raise AttributionError(f"{what} {name!r}: the counter went down "
                                   f"({before[name]} → {value}); was it reset?")
        out[name] = value - before[name]
    return out


def storage_reads(before: StorageSnapshot, after: StorageSnapshot,
                  devices: Sequence[str] = ()) -> StorageReads:
    """Bytes the watched devices, NICs and RDMA ports received between the two snapshots."""
    per_item: dict[str, int] = {}
    device_bytes = None
    if devices:
        device_bytes = device_read_bytes(before.disks, after.disks, list(devices))
        for d in devices:
            name = d.removeprefix("/dev/")
            per_item[name] = after.disks[name].read_bytes - before.disks[name].read_bytes
    nics = _rise(before.nic_rx_bytes, after.nic_rx_bytes, "interface")
    rdma = _rise(before.rdma_rx_bytes, after.rdma_rx_bytes, "RDMA port")
    per_item |= nics | rdma
    return StorageReads(device_bytes=device_bytes,
                        nic_bytes=sum(nics.values()) if after.nic_rx_bytes else None,
                        rdma_bytes=sum(rdma.values()) if after.rdma_rx_bytes else None,
                        per_item=per_item)
