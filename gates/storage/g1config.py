"""G1 configuration checks: the collected inventory held against site.toml and thresholds.toml.

Pure. Each check returns Measurements; categorical checks count what does not conform (limit
x <= 0) and say in the note, in a site engineer's words, what was found and what was expected.
The checks are declared as specs in the g1checks package (RAID, filesystem, NVMe, network)
and run by `_g1check.judge`; this module is their public face, in report order.
"""

from __future__ import annotations

from ..core.configuration import G1Limits, Site
from ..core.verdicts import Deviation, Measurement
from .g1checks import UNHEALTHY_STATE as UNHEALTHY_STATE
from .g1checks import expected_geometry as expected_geometry
from .g1checks import fs, gds, judge, net, nvme, raid
from .inventory import Inventory
from .kvio import NAME as KV_IO

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
    return judge(nvme.NAMESPACES, inv, site)


def sector_size(inv: Inventory, site: Site) -> Measurement:
    """Every namespace's logical sector size against site.toml [topology] sector_size."""
    return judge(nvme.SECTOR_SIZE, inv, site)


def fabric_transport(inv: Inventory, site: Site) -> Measurement:
    """Every NVMe-oF path uses the transport the site ordered (rdma or tcp)."""
    return judge(nvme.TRANSPORT, inv, site)


def fabric_paths_live(inv: Inventory, site: Site) -> Measurement:
    """Every NVMe-oF path is live."""
    return judge(nvme.PATHS_LIVE, inv, site)


def smart_critical_warning(inv: Inventory, limits: G1Limits) -> list[Measurement]:
    """The SMART critical-warning byte is 0 on every drive."""
    return nvme.judge_drives(nvme.CRITICAL_WARNING, inv, limits)


def smart_media_errors(inv: Inventory, limits: G1Limits) -> list[Measurement]:
    """Media and data-integrity errors within the limit (0) on every drive."""
    return nvme.judge_drives(nvme.MEDIA_ERRORS, inv, limits)


def smart_percent_used(inv: Inventory, limits: G1Limits) -> list[Measurement]:
    """Endurance used (percent_used) within the limit: new drives should be near 0 %."""
    return nvme.judge_drives(nvme.PERCENT_USED, inv, limits)


def smart_temperature(inv: Inventory, limits: G1Limits) -> list[Measurement]:
    """Composite temperature below the drive's warning threshold (WCTEMP)."""
    return nvme.temperature(inv, limits)


# ---- NICs and RDMA -----------------------------------------------------------------------

def link_speed(inv: Inventory, site: Site) -> list[Measurement]:
    """Each storage NIC's negotiated speed at least site.toml [topology] link_speed."""
    return net.judge_nics(net.LINK_SPEED, inv, site)


def mtu(inv: Inventory, site: Site) -> list[Measurement]:
    """Each storage NIC's MTU at least site.toml [topology] mtu."""
    return net.judge_nics(net.MTU, inv, site)


def rdma_ports_active(inv: Inventory, site: Site) -> Measurement:
    """Every RDMA port of the storage NICs is ACTIVE."""
    return judge(net.RDMA_PORTS, inv, site)


def roce_v2(inv: Inventory, site: Site) -> Measurement:
    """The RDMA ports carry RoCE v2 GIDs (RoCE v1 is not routable and not what was ordered)."""
    return judge(net.ROCE_V2, inv, site)


# ---- GPUDirect Storage ------------------------------------------------------------------

def gds_platform(inv: Inventory, site: Site) -> Measurement:
    """`gdscheck -p`: nvidia-fs loaded, the site's driver line Supported, the platform verified."""
    return judge(gds.PLATFORM, inv, site)


def gds_configuration(inv: Inventory, site: Site) -> Measurement:
    """cufile.json: no forced compat mode, P2PDMA on where declared, RDMA client addresses."""
    return judge(gds.CONFIGURATION, inv, site)


def gds_path(inv: Inventory, site: Site) -> Measurement:
    """A short gdsio run on the target went GPU-direct: nvidia-fs's counters moved."""
    return judge(gds.PATH, inv, site)


def gds_limits(inv: Inventory, site: Site) -> Measurement:
    """The documented GDS limits the site runs into (P2PDMA on md RAID, overlayfs, ...)."""
    return judge(gds.LIMITS, inv, site)


def gds_deviations(inv: Inventory, site: Site) -> list[Deviation]:
    """cuFile's silent POSIX fallbacks, for the site to acknowledge (G1 deviations)."""
    return gds.deviations(inv, site)


# ---- the engine's own KV I/O -------------------------------------------------------------

def engine_kv_io(inv: Inventory) -> Measurement:
    """The engine's KV files written and read back on the target with its own flags and sizes."""
    found = inv.kv_io
    if found.skipped:
        return Measurement.not_applicable(KV_IO, found.skipped)
    return found.value if found.value is not None else Measurement.error(
        KV_IO, found.error or "not tried")


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
            roce_v2(inv, site), gds_platform(inv, site), gds_configuration(inv, site),
            gds_path(inv, site), gds_limits(inv, site)]
