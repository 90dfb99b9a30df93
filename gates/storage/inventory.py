"""The site inventory G1's configuration checks judge, and `collect`, which gathers it.

What does not apply to the site (from site.toml [topology]) is skipped with the reason; what
could not be collected carries the error. The commands run through the Collector.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from pydantic import BaseModel, Field

from ..core.configuration import Site, Topology
from ..core.verdicts import DutItem, Measurement
from .blockdev import LSBLK_COLUMNS, BlockDevice, Mount, ParseError, parse_findmnt, parse_lsblk
from .collector import VERSION_ARGV, Collector, Found
from .gds_probe import GdsFacts, collect_gds
from .kvio_run import engine_kv_io
from .net import GidEntry, NicState, RdmaLink, parse_rdma_links
from .nvme import (
    Controller,
    Namespace,
    SmartLog,
    Subsystem,
    parse_id_ctrl,
    parse_list_subsys,
    parse_nvme_list,
    parse_smart_log,
)
from .probes import collect_gids, collect_nics, collect_raid
from .raid import MdArray
from .xfs import XfsGeometry, parse_xfs_info


class Inventory(BaseModel):
    """Everything G1's configuration checks judge, as collected from the host."""

    target: str
    mount: Found[Mount] = Found()
    block: Found[list[BlockDevice]] = Found()
    xfs: Found[XfsGeometry] = Found()
    raid: Found[MdArray] = Found()
    namespaces: Found[list[Namespace]] = Found()
    controllers: dict[str, Found[Controller]] = Field(default_factory=dict)
    smart: dict[str, Found[SmartLog]] = Field(default_factory=dict)
    subsystems: Found[list[Subsystem]] = Found()
    nics: Found[list[NicState]] = Found()
    rdma: Found[list[RdmaLink]] = Found()
    gids: Found[list[GidEntry]] = Found()
    gds: GdsFacts = GdsFacts()
    kv_io: Found[Measurement] = Found(skipped="the engine's KV I/O was not tried")
    tool_versions: dict[str, str] = Field(default_factory=dict)

    def dut(self) -> list[DutItem]:
        """The identity of the device under test: models, serials and firmware."""
        items = []
        if self.raid.ok:
            r = self.raid.value
            items.append(DutItem(role="md array", name=r.device, detail=(
                f"{r.level}, {len(r.members)} members, chunk "
                f"{(r.chunk or 0) // 1024} KiB, state {r.state or 'unknown'}")))
        for dev in (self.block.value or []) if self.block.ok else []:
            items.append(DutItem(role="block device", name=dev.path, model=dev.model,
                                 serial=dev.serial, firmware=dev.revision,
                                 detail=_bytes(dev.size)))
        for name, ctrl in self.controllers.items():
            if ctrl.ok:
                c = ctrl.value
                items.append(DutItem(role="NVMe controller", name=name, model=c.model,
                                     serial=c.serial, firmware=c.firmware))
        for sub in (self.subsystems.value or []) if self.subsystems.ok else []:
            transports = sorted({p.transport for p in sub.paths})
            items.append(DutItem(role="NVMe subsystem", name=sub.name, model=sub.model,
                                 serial=sub.serial, detail=f"{sub.nqn} via "
                                 f"{', '.join(transports) or 'no path'}"))
        for nic in (self.nics.value or []) if self.nics.ok else []:
            speed = f"{nic.speed_gbps:g} Gb/s" if nic.speed_gbps is not None else "speed unknown"
            items.append(DutItem(role="NIC", name=nic.name,
                                 detail=f"{speed}, MTU {nic.mtu}, {nic.operstate}"))
        for link in (self.rdma.value or []) if self.rdma.ok else []:
            items.append(DutItem(role="RDMA port", name=link.name,
                                 detail=f"{link.state} on {link.netdev or 'no netdev'}"))
        return items


def _bytes(size: int | None) -> str:
    if size is None:
        return "size unknown"
    return f"{size / 1e12:,.2f} TB" if size >= 1e12 else f"{size / 1e9:,.1f} GB"


def applies(topology: Topology) -> dict[str, str]:
    """Why each group of checks does NOT apply to this site ("" = it applies)."""
    transport = topology.transport
    return {
        "raid": "" if topology.raid_level is not None else (
            "site.toml [topology] sets no raid_level: the host builds no md RAID (e.g. the "
            "array exports one namespace)"),
        "nvme": "" if transport != "local" else (
            'site.toml [topology] transport is "local": the target is not on NVMe devices '
            "kvgate was asked to check (set transport and devices for an NVMe array)"),
        "fabric": "" if transport in ("tcp", "rdma") else (
            f'site.toml [topology] transport is "{transport}": no NVMe over Fabrics'),
        "nics": "" if topology.interfaces else (
            "site.toml [topology] names no interfaces that carry storage traffic"),
        "rdma": "" if transport == "rdma" else (
            f'site.toml [topology] transport is "{transport}": no RDMA, so no RoCE'),
    }


def _md_device(topology: Topology, mount: Mount | None) -> str:
    if topology.md_device:
        return topology.md_device
    if mount and re.match(r"/dev/md", mount.source):
        return mount.source
    return ""


def _named(found: Found, devices: list[str]) -> Found:
    """The namespaces the site names. One `nvme list` did not list is an error naming it: the
    checks per drive would otherwise judge the drives found and pass over the one gone missing.
    A /dev/disk/by-id link names its device once resolved."""
    wanted = {os.path.realpath(d): d for d in devices}
    kept = [n for n in found.value if os.path.realpath(n.device) in wanted]
    listed = {os.path.realpath(n.device) for n in found.value}
    missing = [d for real, d in wanted.items() if real not in listed]
    if not missing:
        return found.model_copy(update={"value": kept})
    return found.model_copy(update={"value": kept, "error": (
        f"site.toml [topology] devices names {', '.join(missing)}, which `nvme list` does not "
        f"list (it lists {', '.join(n.device for n in found.value) or 'none'}): a drive gone "
        "from the bus, or a name that is not the namespace's")})


def collect(site: Site, c: Collector, kv_io: tuple[Site, int] | None = None) -> Inventory:
    """Collect what G1's configuration checks need for this site, and nothing that is N/A;
    with kv_io (the site as G2/G3 run it, KV bytes per token), try the engine's KV I/O too."""
    topo, why = site.topology, applies(site.topology)
    target = str(site.target.directory.resolve())
    inv = Inventory(target=target)
    # The target may not exist yet (create = true): its filesystem is its nearest parent's.
    probe = next((p for p in (Path(target), *Path(target).parents) if p.exists()), Path("/"))
    inv.mount = c.run(["findmnt", "-J", "--target", str(probe)], parse_findmnt_first)
    mount = inv.mount.value
    if mount:
        inv.block = c.run(["lsblk", "-J", "-b", "-o", LSBLK_COLUMNS, mount.source], parse_lsblk) \
            if mount.source.startswith("/dev/") else Found(
                skipped=f"the target's filesystem comes from {mount.source!r}, not a block device")
        inv.xfs = c.run(["xfs_info", mount.target], parse_xfs_info) if mount.fstype == "xfs" \
            else Found(skipped=f"the target is on {mount.fstype or 'an unknown filesystem'}, "
                       "not XFS")
    else:
        inv.block = inv.xfs = Found(error=f"could not tell which filesystem holds {target}: "
                                    f"{inv.mount.error}")
    if why["raid"]:
        inv.raid = Found(skipped=why["raid"])
    elif device := _md_device(topo, mount):
        inv.raid = collect_raid(c, device)
    else:
        inv.raid = Found(error=f"site.toml [topology] raid_level = {topo.raid_level} but the "
                         f"target is mounted from {mount.source if mount else 'an unknown device'}"
                         ", not an md device: set [topology] md_device")
    if why["nvme"]:
        inv.namespaces = Found(skipped=why["nvme"])
    else:
        inv.namespaces = c.run(["nvme", "list", "-o", "json"], parse_nvme_list)
        if inv.namespaces.ok and topo.devices:
            inv.namespaces = _named(inv.namespaces, topo.devices)
        for ctrl in sorted({n.controller for n in inv.namespaces.value or []}):
            inv.controllers[ctrl] = c.run(["nvme", "id-ctrl", ctrl, "-o", "json"], parse_id_ctrl)
            inv.smart[ctrl] = c.run(["nvme", "smart-log", ctrl, "-o", "json"], parse_smart_log)
    inv.subsystems = Found(skipped=why["fabric"]) if why["fabric"] else c.run(
        ["nvme", "list-subsys", "-o", "json"], parse_list_subsys)
    inv.nics = Found(skipped=why["nics"]) if why["nics"] else collect_nics(c, topo.interfaces)
    if why["rdma"]:
        inv.rdma = inv.gids = Found(skipped=why["rdma"])
    else:
        inv.rdma = c.run(["rdma", "-j", "link", "show"], parse_rdma_links)
        if inv.rdma.ok:
            inv.rdma.value = [link for link in inv.rdma.value if _ours(link, topo)]
            inv.gids = collect_gids(c, inv.rdma.value)
        else:
            inv.gids = Found(error=f"no RDMA ports to read GIDs from: {inv.rdma.error}")
    inv.gds = collect_gds(site, c, Path(target))
    if kv_io is not None:  # G1 only: it writes a few hundred files to the target
        inv.kv_io = Found(value=engine_kv_io(*kv_io))
    inv.tool_versions = {tool: v for tool in sorted(c.used & VERSION_ARGV.keys())
                         if (v := c.version(tool, VERSION_ARGV[tool]))}
    return inv


def _ours(link: RdmaLink, topology: Topology) -> bool:
    if topology.rdma_device:
        return link.device == topology.rdma_device
    return not topology.interfaces or link.netdev in topology.interfaces


def parse_findmnt_first(text: str, command: str) -> Mount:
    """The one filesystem ``findmnt -J --target PATH`` prints."""
    mounts = parse_findmnt(text, command)
    if not mounts:
        raise ParseError(command, "it listed no filesystem")
    return mounts[0]
