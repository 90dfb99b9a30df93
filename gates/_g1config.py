"""G1 configuration checks: the collected inventory held against site.toml and thresholds.toml.

Pure. Each check returns Measurements; categorical checks count what does not conform (limit
x <= 0) and say in the note, in a site engineer's words, what was found and what was expected.
The RAID and filesystem checks are declared as specs in the _g1checks_* modules and run by
`_g1check.judge`.
"""

from __future__ import annotations

from . import _g1checks_fs as fs
from . import _g1checks_raid as raid
from ._g1check import judge
from ._g1check import unavailable as _unavailable
from ._g1checks_fs import expected_geometry as expected_geometry  # re-exported
from ._g1checks_raid import UNHEALTHY_STATE as UNHEALTHY_STATE  # re-exported
from ._inventory import Inventory
from ._settings import G1Limits, Site
from ._verdict import Limit, Measurement


def _exact(expected: float, unit: str, key: str) -> Limit:
    return Limit(lo=expected, hi=expected, unit=unit, key=key)


def _none(unit: str = "", key: str | None = None) -> Limit:
    return Limit.at_most(0, unit, key=key)


# ---- RAID --------------------------------------------------------------------------------

def raid_level(inv: Inventory, site: Site) -> Measurement:
    """The md array's RAID level against site.toml [topology] raid_level."""
    return judge(raid.LEVEL, inv, site)


def raid_members(inv: Inventory, site: Site) -> Measurement:
    """Member slots of the array against site.toml [topology] members."""
    return judge(raid.MEMBERS, inv, site)


def raid_state(inv: Inventory, site: Site) -> Measurement:
    """The array is clean: not degraded, resyncing, recovering or failed."""
    return judge(raid.STATE, inv, site)


def raid_failed_members(inv: Inventory, site: Site) -> Measurement:
    """No member has failed or is missing from its slot."""
    return judge(raid.FAILED_MEMBERS, inv, site)


def raid_chunk(inv: Inventory, site: Site) -> Measurement:
    """The array's chunk size against site.toml [topology] chunk."""
    return judge(raid.CHUNK, inv, site)


# ---- filesystem --------------------------------------------------------------------------

def xfs_stripe_unit(inv: Inventory, site: Site) -> Measurement:
    """XFS stripe unit (sunit × bsize) equals the RAID chunk."""
    return judge(fs.STRIPE_UNIT, inv, site)


def xfs_stripe_width(inv: Inventory, site: Site) -> Measurement:
    """XFS swidth / sunit equals the number of data disks (RAID0 all, RAID5 −1, RAID6 −2)."""
    return judge(fs.STRIPE_WIDTH, inv, site)


def filesystem_type(inv: Inventory, site: Site) -> Measurement:
    """The target's filesystem type against site.toml [topology] filesystem."""
    return judge(fs.FILESYSTEM, inv, site)


def mount_options(inv: Inventory, site: Site) -> Measurement:
    """The target's mount carries every option in site.toml [topology] mount_options."""
    return judge(fs.MOUNT_OPTIONS, inv, site)


def capacity(inv: Inventory, site: Site, limits: G1Limits) -> Measurement:
    """The target block device's size within the tolerance of the ordered capacity."""
    return judge(fs.CAPACITY, inv, site, limits)


# ---- NVMe and NVMe over Fabrics ----------------------------------------------------------

def namespace_count(inv: Inventory, site: Site) -> Measurement:
    """Namespaces the host sees against site.toml [topology] namespaces."""
    name, want = "NVMe namespace count", site.topology.namespaces
    if want is None and not inv.namespaces.skipped:
        return Measurement.not_applicable(name, "site.toml [topology] sets no namespaces")
    limit = _exact(want, "namespaces", "site.topology.namespaces") if want is not None else None
    if gone := _unavailable(name, inv.namespaces, limit):
        return gone
    found = inv.namespaces.value
    return Measurement.measured(name, len(found), limit, evidence=inv.namespaces.evidence,
                                note=", ".join(n.device for n in found) or "none found")


def sector_size(inv: Inventory, site: Site) -> Measurement:
    """Every namespace's logical sector size against site.toml [topology] sector_size."""
    name, want = "NVMe logical sector size", site.topology.sector_size
    if want is None and not inv.namespaces.skipped:
        return Measurement.not_applicable(name, "site.toml [topology] sets no sector_size")
    limit = _exact(want, "B", "site.topology.sector_size") if want is not None else None
    if gone := _unavailable(name, inv.namespaces, limit):
        return gone
    found = inv.namespaces.value
    if not found:
        return Measurement.error(name, "nvme list found no namespaces", limit,
                                 evidence=inv.namespaces.evidence)
    wrong = [n for n in found if n.sector_size != want]
    shown = wrong[0] if wrong else found[0]
    note = ", ".join(f"{n.device} {n.sector_size} B" for n in found)
    if shown.sector_size is None:
        return Measurement.error(name, f"{shown.device}: nvme list gave no SectorSize", limit,
                                 evidence=inv.namespaces.evidence)
    return Measurement.measured(name, shown.sector_size, limit,
                                evidence=inv.namespaces.evidence, note=note)


def _fabric_paths(inv: Inventory):
    return [(s, p) for s in inv.subsystems.value for p in s.paths if p.transport != "pcie"]


def fabric_transport(inv: Inventory, site: Site) -> Measurement:
    """Every NVMe-oF path uses the transport the site ordered (rdma or tcp)."""
    name, want = "NVMe-oF transport", site.topology.transport
    limit = _none("paths", "site.topology.transport")
    if gone := _unavailable(name, inv.subsystems, limit):
        return gone
    paths = _fabric_paths(inv)
    if not paths:
        return Measurement.measured(name, 1, limit, evidence=inv.subsystems.evidence,
                                    note="no NVMe over Fabrics path is connected (nvme "
                                    "list-subsys shows none): connect the array first")
    wrong = [(s, p) for s, p in paths if p.transport != want]
    note = f"{len(paths)} path(s): " + ", ".join(f"{p.name} {p.transport} {p.address}"
                                                 for _, p in paths)
    if wrong:
        note += (f" — {len(wrong)} path(s) not over {want}: the array is reached over "
                 f"{', '.join(sorted({p.transport for _, p in wrong}))}, not as ordered")
    return Measurement.measured(name, len(wrong), limit, evidence=inv.subsystems.evidence,
                                note=note)


def fabric_paths_live(inv: Inventory, site: Site) -> Measurement:
    """Every NVMe-oF path is live."""
    name = "NVMe-oF paths live"
    limit = _none("paths", "site.topology.transport")
    if gone := _unavailable(name, inv.subsystems, limit):
        return gone
    paths = _fabric_paths(inv)
    if not paths:
        return Measurement.measured(name, 1, limit, evidence=inv.subsystems.evidence,
                                    note="no NVMe over Fabrics path is connected")
    down = [p for _, p in paths if p.state != "live"]
    note = f"{len(paths) - len(down)} of {len(paths)} path(s) live" + (
        "; not live: " + ", ".join(f"{p.name} ({p.state or 'no state'}, {p.address})"
                                   for p in down) if down else "")
    return Measurement.measured(name, len(down), limit, evidence=inv.subsystems.evidence,
                                note=note)


def _per_drive(inv: Inventory, name: str, judge, limit: Limit | None = None
               ) -> list[Measurement]:
    if inv.namespaces.skipped or not inv.namespaces.ok:
        return [_unavailable(name, inv.namespaces, limit)]
    if not inv.smart:
        return [Measurement.error(name, "nvme list found no namespaces to read SMART from "
                                  "(site.toml [topology] devices)", limit,
                                  evidence=inv.namespaces.evidence)]
    out = []
    for ctrl, log in inv.smart.items():
        ident = inv.controllers.get(ctrl)
        serial = f", S/N {ident.value.serial}" if ident and ident.ok else ""
        label = f"{name} ({ctrl}{serial})"
        out.append(_unavailable(label, log, limit) or judge(label, log, ident))
    return out


def smart_critical_warning(inv: Inventory, limits: G1Limits) -> list[Measurement]:
    """The SMART critical-warning byte is 0 on every drive."""
    def judge(label, log, _ident):
        smart = log.value
        note = "no warning" if not smart.critical_warning else (
            f"critical warning {smart.critical_warning:#04x}: " + "; ".join(smart.warnings()))
        return Measurement.measured(label, smart.critical_warning, limit,
                                    evidence=log.evidence, note=note)
    limit = _none("")
    return _per_drive(inv, "SMART critical warning", judge, limit)


def smart_media_errors(inv: Inventory, limits: G1Limits) -> list[Measurement]:
    """Media and data-integrity errors within the limit (0) on every drive."""
    limit = Limit.at_most(limits.smart_media_errors_max, "errors",
                          key="g1.smart_media_errors_max")

    def judge(label, log, _ident):
        return Measurement.measured(label, log.value.media_errors, limit, evidence=log.evidence,
                                    note="unrecovered data-integrity errors since manufacture")
    return _per_drive(inv, "SMART media errors", judge, limit)


def smart_percent_used(inv: Inventory, limits: G1Limits) -> list[Measurement]:
    """Endurance used (percent_used) within the limit: new drives should be near 0 %."""
    limit = Limit.at_most(limits.smart_percent_used_max, "%", key="g1.smart_percent_used_max")

    def judge(label, log, _ident):
        return Measurement.measured(label, log.value.percent_used, limit, evidence=log.evidence,
                                    note="vendor estimate of rated endurance used")
    return _per_drive(inv, "SMART percent used", judge, limit)


def smart_temperature(inv: Inventory, limits: G1Limits) -> list[Measurement]:
    """Composite temperature below the drive's warning threshold (WCTEMP)."""
    def judge(label, log, ident):
        smart = log.value
        wctemp = ident.value.warning_temp_k if ident and ident.ok else 0
        if wctemp:
            limit = Limit.at_most(round(wctemp - 273.15, 2), "°C", hi_inclusive=False)
            source = f"the drive's warning threshold WCTEMP {wctemp} K"
        else:
            limit = Limit.at_most(limits.temperature_max, "°C", hi_inclusive=False,
                                  key="g1.temperature_max")
            source = "g1.temperature_max (the drive reports no warning threshold)"
        return Measurement.measured(label, round(smart.temperature_c, 2), limit,
                                    evidence=log.evidence + (ident.evidence if ident else []),
                                    note=f"{smart.temperature_k} K; limit from {source}")
    return _per_drive(inv, "NVMe temperature", judge)


# ---- NICs and RDMA -----------------------------------------------------------------------

def _nics(inv: Inventory, site: Site, name: str, limit: Limit | None) -> Measurement | None:
    topo = site.topology
    if inv.nics.skipped and topo.transport in ("tcp", "rdma") and (
            topo.link_speed or topo.mtu):
        return Measurement.error(name, f"the site reaches the array over {topo.transport} but "
                                 "site.toml [topology] interfaces is empty: name the NICs",
                                 limit)
    return _unavailable(name, inv.nics, limit)


def link_speed(inv: Inventory, site: Site) -> list[Measurement]:
    """Each storage NIC's negotiated speed at least site.toml [topology] link_speed."""
    name, want = "Link speed", site.topology.link_speed
    limit = Limit.at_least(want * 8 / 1e9, "Gb/s", key="site.topology.link_speed") \
        if want else None
    if gone := _nics(inv, site, name, limit):
        return [gone]
    if limit is None:
        return [Measurement.not_applicable(name, "site.toml [topology] sets no link_speed")]
    out = []
    for nic in inv.nics.value:
        label = f"{name} ({nic.name})"
        if nic.operstate not in ("up", "unknown") or nic.speed_gbps is None:
            if nic.operstate == "up":
                out.append(Measurement.error(label, f"{nic.name} is up but its driver reports "
                                             "no speed (sysfs speed -1)", limit,
                                             evidence=inv.nics.evidence))
                continue
            out.append(Measurement.measured(label, 0.0, limit, evidence=inv.nics.evidence,
                                            note=f"{nic.name} link is {nic.operstate}"))
            continue
        note = f"{nic.name} negotiated {nic.speed_gbps:g} Gb/s" + (
            f"; ordered {limit.lo:g} Gb/s — check the cable, optics and switch port"
            if nic.speed_gbps < limit.lo else "")
        out.append(Measurement.measured(label, nic.speed_gbps, limit, evidence=inv.nics.evidence,
                                        note=note))
    return out


def mtu(inv: Inventory, site: Site) -> list[Measurement]:
    """Each storage NIC's MTU at least site.toml [topology] mtu."""
    name, want = "MTU", site.topology.mtu
    limit = Limit.at_least(want, "B", key="site.topology.mtu") if want else None
    if gone := _nics(inv, site, name, limit):
        return [gone]
    if limit is None:
        return [Measurement.not_applicable(name, "site.toml [topology] sets no mtu")]
    return [Measurement.measured(
        f"{name} ({nic.name})", nic.mtu or 0, limit, evidence=inv.nics.evidence,
        note=f"{nic.name} MTU {nic.mtu}" + ("" if (nic.mtu or 0) >= want else
                                             f"; raise it to {want} on the NIC and on every "
                                             "switch port in the path"))
        for nic in inv.nics.value]


def rdma_ports_active(inv: Inventory, site: Site) -> Measurement:
    """Every RDMA port of the storage NICs is ACTIVE."""
    name = "RDMA ports active"
    limit = _none("ports", "site.topology.rdma_device")
    if gone := _unavailable(name, inv.rdma, limit):
        return gone
    links = inv.rdma.value
    if not links:
        return Measurement.measured(name, 1, limit, evidence=inv.rdma.evidence,
                                    note="no RDMA port found for the site's interfaces "
                                    "(site.toml [topology] interfaces / rdma_device)")
    down = [link for link in links if link.state != "ACTIVE"]
    note = ", ".join(f"{link.name} {link.state}/{link.physical_state} on {link.netdev}"
                     for link in links)
    return Measurement.measured(name, len(down), limit, evidence=inv.rdma.evidence, note=note)


def roce_v2(inv: Inventory, site: Site) -> Measurement:
    """The RDMA ports carry RoCE v2 GIDs (RoCE v1 is not routable and not what was ordered)."""
    name = "RoCE v2 GIDs"
    limit = Limit.at_least(1, "GIDs", key="site.topology.transport")
    if gone := _unavailable(name, inv.gids, limit):
        return gone
    entries = inv.gids.value
    v2 = [g for g in entries if g.type == "RoCE v2"]
    kinds = sorted({g.type for g in entries})
    note = f"{len(v2)} RoCE v2 GID(s) of {len(entries)} populated" + (
        f" (types seen: {', '.join(kinds)})" if kinds else "")
    return Measurement.measured(name, len(v2), limit, evidence=inv.gids.evidence, note=note)


def all_checks(inv: Inventory, site: Site, limits: G1Limits) -> list[Measurement]:
    """Every configuration check, in report order (for `kvgate inventory` and tests)."""
    return [raid_level(inv, site), raid_members(inv, site), raid_state(inv, site),
            raid_failed_members(inv, site), raid_chunk(inv, site), xfs_stripe_unit(inv, site),
            xfs_stripe_width(inv, site), filesystem_type(inv, site), mount_options(inv, site),
            capacity(inv, site, limits), namespace_count(inv, site), sector_size(inv, site),
            fabric_transport(inv, site), fabric_paths_live(inv, site),
            *smart_critical_warning(inv, limits), *smart_media_errors(inv, limits),
            *smart_percent_used(inv, limits), *smart_temperature(inv, limits),
            *link_speed(inv, site), *mtu(inv, site), rdma_ports_active(inv, site),
            roce_v2(inv, site)]

