"""G1 checks of the target's filesystem: XFS stripe alignment, type, mount options, capacity.

Pure: each check is a CheckSpec run by `_g1check.judge`. XFS must align to the RAID stripe that
site.toml [topology] orders, or, where it is silent, to the md array that was found.
"""

from __future__ import annotations

from collections.abc import Callable

from ...core.configuration import G1Limits, Site
from ...core.verdicts import Limit
from ..inventory import Inventory
from ..raid import data_disks
from ..xfs import Alignment, XfsGeometry, alignment
from .spec import Case, CheckSpec, NotApplicable, Reading, Unmeasured, exact, none_of, topology


def expected_geometry(inv: Inventory, site: Site
                      ) -> tuple[int | None, int | None, NotApplicable | Unmeasured | None]:
    """The chunk (bytes) and data disks the filesystem must align to, or why they are unknown:
    not applicable where there is no stripe, unmeasured where the md array could not be read."""
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
    if chunk and disks:
        return chunk, disks, None
    if inv.raid.error:  # an array kvgate could not read is not an array that is not there
        return chunk, disks, Unmeasured(
            f"the stripe to align to is unknown: site.toml [topology] sets no chunk and "
            f"raid_level/members (or data_disks), and the md array could not be read: "
            f"{inv.raid.error}")
    return chunk, disks, NotApplicable(
        "no stripe to align to: site.toml [topology] sets no chunk and raid_level/members "
        "(or data_disks), and no md array was found")


def _geometry(inv: Inventory, site: Site, limits: G1Limits | None):
    return expected_geometry(inv, site)


def _unit_limit(want: tuple, limits: G1Limits | None) -> Limit | None:
    chunk, _, _ = want
    return exact("KiB", "site.topology.chunk", 1024)(chunk, limits) if chunk else None


def _width_limit(want: tuple, limits: G1Limits | None) -> Limit | None:
    _, disks, _ = want
    return exact("disks", "site.topology.data_disks")(disks, limits) if disks else None


def _on_stripe(read: Callable[[XfsGeometry, Alignment, int, int], Reading]
               ) -> Callable[[Case], Reading | NotApplicable | Unmeasured]:
    """A reader of the XFS geometry, once there is a stripe to align it to."""
    def checked(c: Case) -> Reading | NotApplicable | Unmeasured:
        chunk, disks, why = c.want
        if why:
            return why
        return read(c.got, alignment(c.got, chunk, disks), chunk, disks)
    return checked


def _stripe_unit(geometry: XfsGeometry, rule: Alignment, chunk: int, disks: int) -> Reading:
    note = (f"sunit {geometry.sunit} × bsize {geometry.block_size} = "
            f"{geometry.stripe_unit // 1024} KiB; RAID chunk {chunk // 1024} KiB")
    if not rule.unit_ok:
        note += f" — misaligned: {rule.explain()}"
    return Reading(geometry.stripe_unit / 1024, note)


def _stripe_width(geometry: XfsGeometry, rule: Alignment, chunk: int, disks: int) -> Reading:
    width = geometry.stripe_disks or 0.0
    note = (f"swidth {geometry.swidth} / sunit {geometry.sunit} = {width:g}; the array has "
            f"{disks} data disks")
    if not rule.width_ok:
        note += f" — misaligned: {rule.explain()}"
    return Reading(width, note)


def _any_filesystem(inv: Inventory) -> str:
    found = inv.mount.value.fstype if inv.mount.ok else "unknown"
    return ("site.toml [topology] filesystem is empty: any filesystem is accepted (the target "
            f"is on {found})")


def _fstype(c: Case) -> Reading:
    mount, want = c.got, c.want
    wrong = int(mount.fstype != want)
    return Reading(wrong, f"{c.inv.target} is on {mount.fstype} ({mount.source}, mounted at "
                   f"{mount.target})" + (f"; site.toml expects {want}" if wrong else ""))


def _mount_options(c: Case) -> Reading:
    mount = c.got
    missing = [o for o in c.want if not mount.option(o)]
    return Reading(len(missing), f"{mount.target} is mounted {','.join(mount.options)}" + (
        f"; missing: {', '.join(missing)} (remount with -o {','.join(missing)} and add it "
        "to /etc/fstab)" if missing else ""))


def _scale(ordered: float) -> tuple[float, str]:
    return (1e12, "TB") if ordered >= 1e12 else (1e9, "GB")


def _capacity_limit(ordered: float, limits: G1Limits) -> Limit:
    tol = limits.capacity_tolerance / 100
    scale, unit = _scale(ordered)
    return Limit(lo=ordered * (1 - tol) / scale, hi=ordered * (1 + tol) / scale, unit=unit,
                 key="g1.capacity_tolerance")


def _capacity(c: Case) -> Reading | Unmeasured:
    if not c.got or c.got[0].size is None:
        return Unmeasured("lsblk reported no size")
    device, (scale, unit) = c.got[0], _scale(c.want)
    return Reading(device.size / scale, f"{device.path}: {device.size:,} bytes; ordered "
                   f"{c.want / scale:g} {unit} ± {c.limits.capacity_tolerance:g} %")


STRIPE_UNIT = CheckSpec("XFS stripe unit = RAID chunk", "xfs", _on_stripe(_stripe_unit),
                        _unit_limit, want=_geometry)
STRIPE_WIDTH = CheckSpec("XFS stripe width = data disks", "xfs", _on_stripe(_stripe_width),
                         _width_limit, want=_geometry)
FILESYSTEM = CheckSpec("Filesystem type", "mount", _fstype,
                       none_of("mismatches", "site.topology.filesystem"),
                       want=topology("filesystem"), unset=_any_filesystem, site_first=True)
MOUNT_OPTIONS = CheckSpec("Required mount options", "mount", _mount_options,
                          none_of("missing", "site.topology.mount_options"),
                          want=topology("mount_options"),
                          unset="site.toml [topology] mount_options is empty", site_first=True)
CAPACITY = CheckSpec("Capacity vs ordered", "block", _capacity, _capacity_limit,
                     want=topology("capacity"),
                     unset="site.toml [topology] sets no ordered capacity", site_first=True)
