"""NICs and RDMA: sysfs net speed/mtu/operstate, ``rdma -j link show``, RoCE GID types. Pure."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from .blockdev import ParseError, as_int, json_document

ROCE_V2 = "RoCE v2"


class NicState(BaseModel):
    """One network interface: speed in Mb/s (None when the driver does not say), MTU, state."""

    name: str
    speed_mbps: int | None = None
    mtu: int | None = None
    operstate: str = ""

    @property
    def speed_gbps(self) -> float | None:
        """Link speed in Gb/s."""
        return self.speed_mbps / 1000 if self.speed_mbps is not None else None


def parse_sysfs_net(name: str, speed: str | None, mtu: str | None,
                    operstate: str | None) -> NicState:
    """The three sysfs files of /sys/class/net/IF; a file that could not be read is None.

    ``speed`` reads -1 (or fails with EINVAL) when the link is down or the driver (virtio,
    bonding members…) does not report it: that is "unknown", not 0 or -1 Mb/s.
    """
    command = f"cat /sys/class/net/{name}/{{speed,mtu,operstate}}"
    speed_value = as_int(speed.strip(), command, "speed") if speed is not None else None
    mtu_value = as_int(mtu.strip(), command, "mtu") if mtu is not None else None
    if speed_value is not None and speed_value < 0:
        speed_value = None
    if mtu_value is not None and mtu_value <= 0:
        raise ParseError(command, f"mtu {mtu_value} is not a size")
    return NicState(name=name, speed_mbps=speed_value, mtu=mtu_value,
                    operstate=(operstate or "").strip())


class RdmaLink(BaseModel):
    """One RDMA port from ``rdma -j link show``."""

    device: str
    port: int
    state: str = ""  # ACTIVE, DOWN, INIT…
    physical_state: str = ""  # LINK_UP, DISABLED…
    netdev: str = ""

    @property
    def name(self) -> str:
        """device/port, the way rdma prints it: mlx5_0/1."""
        return f"{self.device}/{self.port}"


def parse_rdma_links(text: str, command: str = "rdma -j link show") -> list[RdmaLink]:
    """Every RDMA port in ``rdma -j link show`` (iproute2's JSON list)."""
    doc: Any = json_document(text, command)
    if not isinstance(doc, list):
        raise ParseError(command, "the output is not a JSON list")
    links = []
    for entry in doc:
        if not isinstance(entry, dict):
            raise ParseError(command, "a link entry is not a JSON object")
        if "ifname" not in entry or "port" not in entry:
            raise ParseError(command, "a link entry has no 'ifname' or 'port'")
        port = as_int(entry["port"], command, "port")
        links.append(RdmaLink(device=str(entry["ifname"]), port=port or 0,
                              state=str(entry.get("state", "")),
                              physical_state=str(entry.get("physical_state", "")),
                              netdev=str(entry.get("netdev", ""))))
    return links


class GidEntry(BaseModel):
    """One populated GID table entry of an RDMA port."""

    index: int
    gid: str
    type: str  # "RoCE v2", "IB/RoCE v1"
    netdev: str = ""


ZERO_GIDS = {"0000:0000:0000:0000:0000:0000:0000:0000", "fe80:0000:0000:0000:0000:0000:0000:0000"}


def parse_gid_table(device: str, port: int, gids: dict[int, str], types: dict[int, str],
                    ndevs: dict[int, str]) -> list[GidEntry]:
    """Populated GIDs of /sys/class/infiniband/DEV/ports/N/{gids,gid_attrs/types,ndevs}.

    Each dict maps a GID index to the file's text; unreadable files (EINVAL for unused
    entries) are simply absent. An all-zero GID is an empty slot.
    """
    command = f"cat /sys/class/infiniband/{device}/ports/{port}/gid_attrs/types/*"
    entries = []
    for index, gid in sorted(gids.items()):
        gid = gid.strip()
        if not gid or gid in ZERO_GIDS or index not in types:
            continue
        kind = types[index].strip()
        if not kind:
            raise ParseError(command, f"GID {index} has an empty type")
        entries.append(GidEntry(index=index, gid=gid, type=kind,
                                netdev=ndevs.get(index, "").strip()))
    return entries
