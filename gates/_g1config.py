"""G1 configuration checks: the collected inventory held against site.toml and thresholds.toml.

Pure. Each check returns Measurements; categorical checks count what does not conform (limit
x <= 0) and say in the note, in a site engineer's words, what was found and what was expected.
"""

from __future__ import annotations

from ._inventory import Found, Inventory
from ._raid import MdArray, data_disks
from ._settings import G1Limits, Site
from ._verdict import Limit, Measurement
from ._xfs import alignment

UNHEALTHY_STATE = ("degraded", "resyncing", "recovering", "reshaping", "FAILED", "inactive",
                   "Not Started")


def _exact(expected: float, unit: str, key: str) -> Limit:
    return Limit(lo=expected, hi=expected, unit=unit, key=key)


def _none(unit: str = "", key: str | None = None) -> Limit:
    return Limit.at_most(0, unit, key=key)


def _unavailable(name: str, found: Found, limit: Limit | None = None) -> Measurement | None:
    """N/A or ERROR for a fact that was skipped or could not be collected; None if it is there."""
    if found.skipped:
        return Measurement.not_applicable(name, found.skipped)
    if found.error or found.value is None:
        return Measurement.error(name, found.error or "not collected", limit,
                                 evidence=found.evidence)
    return None


# ---- RAID --------------------------------------------------------------------------------

def raid_level(inv: Inventory, site: Site) -> Measurement:
    """The md array's RAID level against site.toml [topology] raid_level."""
    name, want = "RAID level", site.topology.raid_level
    limit = _exact(want, "", "site.topology.raid_level") if want is not None else None
    if gone := _unavailable(name, inv.raid, limit):
        return gone
    array = inv.raid.value
    if array.level_number is None:
        return Measurement.error(name, f"mdadm reports level {array.level!r}, not a RAID level",
                                 limit, evidence=inv.raid.evidence)
    note = (f"{array.device}: mdadm reports {array.level}; site.toml expects RAID{want}"
            + ("" if array.level_number == want else
               " — the array was built with the wrong level"))
    return Measurement.measured(name, array.level_number, limit, evidence=inv.raid.evidence,
                                note=note)


def raid_members(inv: Inventory, site: Site) -> Measurement:
    """Member slots of the array against site.toml [topology] members."""
    name, want = "RAID member count", site.topology.members
    if want is None and not inv.raid.skipped:
        return Measurement.not_applicable(name, "site.toml [topology] sets no members")
    limit = _exact(want, "drives", "site.topology.members") if want is not None else None
    if gone := _unavailable(name, inv.raid, limit):
        return gone
    array = inv.raid.value
    count = array.raid_devices if array.raid_devices is not None else len(array.members)
    devices = ", ".join(m.device for m in array.members if m.device)
    return Measurement.measured(name, count, limit, evidence=inv.raid.evidence,
                                note=f"{array.device} has {count} member slots ({devices}); "
                                f"ordered {want}")


def raid_state(inv: Inventory, site: Site) -> Measurement:
    """The array is clean: not degraded, resyncing, recovering or failed."""
    name = "RAID state"
    limit = _none("problems", "site.topology.raid_level")
    if gone := _unavailable(name, inv.raid, limit):
        return gone
    array = inv.raid.value
    problems = [w for w in UNHEALTHY_STATE if w.lower() in array.state.lower()]
    if array.degraded and "degraded" not in problems:
        problems.append("degraded")
    note = f"mdadm State: {array.state or 'not reported'}"
    if problems:
        note += (f" — the array is {', '.join(problems)}: it is not running as ordered "
                 "(redundancy and speed are reduced); repair it and re-run G1")
    return Measurement.measured(name, len(problems), limit, evidence=inv.raid.evidence,
                                note=note)


def _missing(array: MdArray) -> int:
    # mdadm lists a failed drive twice: its empty slot ("removed") and the device ("faulty").
    short = (array.raid_devices - array.active
             if array.raid_devices is not None and array.active is not None else 0)
    faulty = sum("faulty" in m.state for m in array.members)
    removed = sum("removed" in m.state or "missing" in m.state for m in array.members)
    return max(short, array.failed_count or 0, faulty, removed)


def raid_failed_members(inv: Inventory, site: Site) -> Measurement:
    """No member has failed or is missing from its slot."""
    name = "RAID failed or missing members"
    limit = _none("drives", "site.topology.members")
    if gone := _unavailable(name, inv.raid, limit):
        return gone
    array = inv.raid.value
    failed = [m for m in array.failed_members if m.device] or array.failed_members
    count = _missing(array)
    named = ", ".join(f"{m.device or f'slot {m.slot}'} ({m.state})" for m in failed)
    note = "all members active" if not count else (
        f"{count} member(s) failed or missing" + (f": {named}" if named else "")
        + f"; {array.device} is degraded — replace the drive before acceptance")
    return Measurement.measured(name, count, limit, evidence=inv.raid.evidence, note=note)


def raid_chunk(inv: Inventory, site: Site) -> Measurement:
    """The array's chunk size against site.toml [topology] chunk."""
    name, want = "RAID chunk size", site.topology.chunk
    if want is None and not inv.raid.skipped:
        return Measurement.not_applicable(name, "site.toml [topology] sets no chunk")
    limit = _exact(want / 1024, "KiB", "site.topology.chunk") if want is not None else None
    if gone := _unavailable(name, inv.raid, limit):
        return gone
    chunk = inv.raid.value.chunk
    if chunk is None:
        return Measurement.error(name, "neither mdadm nor sysfs reported a chunk size", limit,
                                 evidence=inv.raid.evidence)
    return Measurement.measured(name, chunk / 1024, limit, evidence=inv.raid.evidence,
                                note=f"{inv.raid.value.device}: chunk {chunk // 1024} KiB")


# ---- filesystem --------------------------------------------------------------------------

def expected_geometry(inv: Inventory, site: Site) -> tuple[int | None, int | None, str]:
    """The chunk (bytes) and data disks the filesystem must align to, or why they are unknown."""
    topo = site.topology
    array = inv.raid.value if inv.raid.ok else None
    chunk = topo.chunk or (array.chunk if array else None)
    level = topo.raid_level if topo.raid_level is not None else (
        array.level_number if array else None)
    members = topo.members or (array.raid_devices if array else None)
    disks = topo.data_disks
    if disks is None and level is not None and members:
        try:
            disks = data_disks(level, members)
        except ValueError:
            disks = None
    why = "" if chunk and disks else (
        "no stripe to align to: site.toml [topology] sets no chunk and raid_level/members "
        "(or data_disks), and no md array was found")
    return chunk, disks, why


def xfs_stripe_unit(inv: Inventory, site: Site) -> Measurement:
    """XFS stripe unit (sunit × bsize) equals the RAID chunk."""
    name = "XFS stripe unit = RAID chunk"
    chunk, disks, why = expected_geometry(inv, site)
    limit = _exact(chunk / 1024, "KiB", "site.topology.chunk") if chunk else None
    if gone := _unavailable(name, inv.xfs, limit):
        return gone
    if why:
        return Measurement.not_applicable(name, why)
    geometry = inv.xfs.value
    rule = alignment(geometry, chunk, disks)
    note = (f"sunit {geometry.sunit} × bsize {geometry.block_size} = "
            f"{geometry.stripe_unit // 1024} KiB; RAID chunk {chunk // 1024} KiB")
    if not rule.unit_ok:
        note += f" — misaligned: {rule.explain()}"
    return Measurement.measured(name, geometry.stripe_unit / 1024, limit,
                                evidence=inv.xfs.evidence, note=note)


def xfs_stripe_width(inv: Inventory, site: Site) -> Measurement:
    """XFS swidth / sunit equals the number of data disks (RAID0 all, RAID5 −1, RAID6 −2)."""
    name = "XFS stripe width = data disks"
    chunk, disks, why = expected_geometry(inv, site)
    limit = _exact(disks, "disks", "site.topology.data_disks") if disks else None
    if gone := _unavailable(name, inv.xfs, limit):
        return gone
    if why:
        return Measurement.not_applicable(name, why)
    geometry = inv.xfs.value
    rule = alignment(geometry, chunk, disks)
    width = geometry.stripe_disks or 0.0
    note = (f"swidth {geometry.swidth} / sunit {geometry.sunit} = {width:g}; the array has "
            f"{disks} data disks")
    if not rule.width_ok:
        note += f" — misaligned: {rule.explain()}"
    return Measurement.measured(name, width, limit, evidence=inv.xfs.evidence, note=note)


def filesystem_type(inv: Inventory, site: Site) -> Measurement:
    """The target's filesystem type against site.toml [topology] filesystem."""
    name, want = "Filesystem type", site.topology.filesystem
    limit = _none("mismatches", "site.topology.filesystem")
    if not want:
        found = inv.mount.value.fstype if inv.mount.ok else "unknown"
        return Measurement.not_applicable(name, "site.toml [topology] filesystem is empty: any "
                                          f"filesystem is accepted (the target is on {found})")
    if gone := _unavailable(name, inv.mount, limit):
        return gone
    mount = inv.mount.value
    wrong = int(mount.fstype != want)
    note = f"{inv.target} is on {mount.fstype} ({mount.source}, mounted at {mount.target})" + (
        f"; site.toml expects {want}" if wrong else "")
    return Measurement.measured(name, wrong, limit, evidence=inv.mount.evidence, note=note)


def mount_options(inv: Inventory, site: Site) -> Measurement:
    """The target's mount carries every option in site.toml [topology] mount_options."""
    name, required = "Required mount options", site.topology.mount_options
    limit = _none("missing", "site.topology.mount_options")
    if not required:
        return Measurement.not_applicable(name, "site.toml [topology] mount_options is empty")
    if gone := _unavailable(name, inv.mount, limit):
        return gone
    mount = inv.mount.value
    missing = [o for o in required if not mount.option(o)]
    note = f"{mount.target} is mounted {','.join(mount.options)}" + (
        f"; missing: {', '.join(missing)} (remount with -o {','.join(missing)} and add it "
        "to /etc/fstab)" if missing else "")
    return Measurement.measured(name, len(missing), limit, evidence=inv.mount.evidence,
                                note=note)


def capacity(inv: Inventory, site: Site, limits: G1Limits) -> Measurement:
    """The target block device's size within the tolerance of the ordered capacity."""
    name, ordered = "Capacity vs ordered", site.topology.capacity
    if ordered is None:
        return Measurement.not_applicable(name, "site.toml [topology] sets no ordered capacity")
    tol = limits.capacity_tolerance / 100
    scale, unit = (1e12, "TB") if ordered >= 1e12 else (1e9, "GB")
    limit = Limit(lo=ordered * (1 - tol) / scale, hi=ordered * (1 + tol) / scale, unit=unit,
                  key="g1.capacity_tolerance")
    if gone := _unavailable(name, inv.block, limit):
        return gone
    if not inv.block.value or inv.block.value[0].size is None:
        return Measurement.error(name, "lsblk reported no size", limit,
                                 evidence=inv.block.evidence)
    device = inv.block.value[0]
    return Measurement.measured(name, device.size / scale, limit, evidence=inv.block.evidence,
                                note=f"{device.path}: {device.size:,} bytes; ordered "
                                f"{ordered / scale:g} {unit} ± {limits.capacity_tolerance:g} %")


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

