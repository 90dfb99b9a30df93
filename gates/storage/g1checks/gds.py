"""G1 checks of GPUDirect Storage: the platform, cuFile's configuration, the path itself, and the
known limits of the site. Pure.

Each counts what stands between the KV and a GPU-direct transfer (x <= 0). A site that declares no
GDS sees NOT APPLICABLE with the reason (and whether the host has a GPU). cuFile's silent POSIX
fallbacks (allow_compat_mode, per-filesystem write keys) are not failures but deviations the
site must acknowledge (`deviations`): the KV still moves, only not GPU-direct.
"""

from __future__ import annotations

from ...core.configuration import G1Limits, Site
from ...core.verdicts import Cause, Deviation
from ..gds import RDMA_DRIVERS
from ..inventory import Inventory
from .spec import Case, CheckSpec, Reading, ReadResult, Unmeasured, none_of

P2PDMA = "NVMe P2PDMA"


def _declared(inv: Inventory, site: Site, limits: G1Limits | None) -> str:
    return site.topology.gds or inv.gds.declared


def _not_declared(inv: Inventory) -> str:
    return inv.gds.platform.skipped or "the site declares no GPUDirect Storage"


def _note(problems: list[str], found: str) -> Reading:
    return Reading(len(problems), found + ("; " + "; ".join(problems) if problems else ""))


def _platform(c: Case) -> ReadResult:
    p, driver = c.got, c.site.topology.gds
    problems = []
    if driver and p.drivers.get(driver) != "Supported":
        problems.append(f'"{driver} : {p.drivers.get(driver, "not listed")}" (site.toml '
                        f'[topology] gds = "{driver}" needs Supported)')
    if not driver and "Supported" not in p.drivers.values():
        problems.append("no DRIVER CONFIGURATION line says Supported")
    if driver != P2PDMA and not p.nvidia_fs:
        # Without the driver nothing of the GDS path can be measured: an ERROR, not a FAIL.
        return Unmeasured(f"gdscheck -p (GDS {p.release or '?'}) printed no nvidia_fs version: "
                          "the nvidia-fs module is not loaded (install nvidia-fs-dkms from "
                          "NVIDIA's CUDA repository, then modprobe nvidia-fs)")
    if p.iommu == "enabled":
        problems.append("IOMMU enabled (GDS Installation Guide: iommu=off, or iommu=pt where "
                        "supported)")
    if not p.verified:
        problems.append('no "Platform verification succeeded"')
    supported = ", ".join(n for n, v in p.drivers.items() if v == "Supported") or "none"
    return _note(problems, f"GDS {p.release or '?'}, nvidia_fs {p.nvidia_fs or 'absent'}, "
                 f"libcufile {p.libcufile or '?'}; Supported: {supported}; IOMMU "
                 f"{p.iommu or 'not reported'}")


def _rdma_netdevs(inv: Inventory, site: Site) -> list[str]:
    if inv.rdma.ok and inv.rdma.value:
        return sorted({link.netdev for link in inv.rdma.value if link.netdev})
    return list(site.topology.interfaces)


def _addresses(c: Case) -> list[str] | Unmeasured:
    """What is wrong with rdma_dev_addr_list against the addresses of the site's RDMA ports."""
    listed, found = c.got.rdma_dev_addr_list, c.inv.gds.addresses
    if not listed:
        return [f"rdma_dev_addr_list is empty: {c.site.topology.gds} reaches its storage over "
                "userspace RDMA and cuFile needs the client addresses"]
    if not found.ok:
        return Unmeasured(f"cannot hold rdma_dev_addr_list against the RDMA ports: {found.error}")
    netdevs = _rdma_netdevs(c.inv, c.site)
    ours = {a for n in netdevs for a in found.value.get(n, [])}
    stray = [a for a in listed if a not in ours]
    return [f"rdma_dev_addr_list {', '.join(stray)} not on the RDMA ports "
            f"({', '.join(netdevs) or 'none found'}: {', '.join(sorted(ours)) or 'no address'})"
            ] if stray else []


def _configuration(c: Case) -> ReadResult:
    cf, driver = c.got, c.site.topology.gds
    problems = []
    if cf.force_compat_mode:
        problems.append("properties.force_compat_mode = true: every cuFile I/O goes through POSIX")
    forced = [f"arms.{n}" for n, a in c.site.arms.items()
              if a.env.get("CUFILE_FORCE_COMPAT_MODE", "").lower() == "true"]
    if forced:
        problems.append(f"{', '.join(forced)} set CUFILE_FORCE_COMPAT_MODE=true")
    if driver == P2PDMA and not cf.use_pci_p2pdma:
        problems.append("properties.use_pci_p2pdma is not true (GDS Support for NVMe using "
                        "PCI P2PDMA: required)")
    if driver in RDMA_DRIVERS:
        wrong = _addresses(c)
        if isinstance(wrong, Unmeasured):
            return wrong
        problems += wrong
    return _note(problems, f"{cf.path}: allow_compat_mode {str(cf.allow_compat_mode).lower()}, "
                 f"use_pci_p2pdma {str(cf.use_pci_p2pdma).lower()}, rdma_dev_addr_list "
                 f"[{', '.join(cf.rdma_dev_addr_list)}]")


def _path(c: Case) -> ReadResult:
    run = c.got
    problems = [f"gdsio {r.io_type} ran as {r.xfer_type}, not GPUD" for r in run.runs
                if r.xfer_type != "GPUD"]
    said = "; ".join(f"gdsio {r.io_type} {r.xfer_type} {r.ops} ops {r.throughput}"
                     for r in run.runs)
    idle = [r.io_type for r in run.runs if not r.ops]
    if not run.runs or idle:  # a run that moved nothing says nothing of the path
        return Unmeasured(f"{said or 'gdsio reported no run'}; gdsio did no I/O"
                          + (f" in its {', '.join(idle)} run" if idle else "")
                          + ": the GPU-direct path was not exercised")
    if c.site.topology.gds == P2PDMA:
        return Unmeasured(f"{said}; in P2PDMA mode nvidia-fs carries no I/O, so no counter "
                          "shows the transfer went GPU-direct rather than through POSIX")
    if run.before is None or run.after is None:
        return Unmeasured(f"{said}; /proc/driver/nvidia-fs/stats is absent: nvidia-fs is not "
                          "loaded, so nothing shows the transfer went GPU-direct")
    if run.before.reads_ok is None or run.after.reads_ok is None:
        return Unmeasured(f"{said}; nvidia-fs counts no reads or writes while its I/O stats are "
                          "off: echo 1 > /sys/module/nvidia_fs/parameters/rw_stats_enabled")
    moved = {"READ": run.after.reads_ok - run.before.reads_ok,
             "WRITE": (run.after.writes_ok or 0) - (run.before.writes_ok or 0)}
    for r in run.runs:
        if r.io_type in moved and r.ops and moved[r.io_type] <= 0:
            problems.append(f"nvidia-fs counted no {r.io_type.lower()}s during gdsio's {r.ops} "
                            f"{r.io_type} ops: cuFile went through POSIX (compat mode)")
    errors = (run.after.read_err - run.before.read_err) + (run.after.write_err
                                                           - run.before.write_err)
    if errors > 0:
        problems.append(f"nvidia-fs counted {errors} new read/write errors")
    return _note(problems, f"{said}; nvidia-fs reads ok +{moved['READ']}, writes ok "
                 f"+{moved['WRITE']}")


def limits_hit(inv: Inventory, site: Site) -> list[str]:
    """The documented GDS limits this site runs into."""
    hits, topo = [], site.topology
    mount = inv.mount.value if inv.mount.ok else None
    if topo.gds == P2PDMA:
        if topo.raid_level is not None or (inv.raid.ok and inv.raid.value):
            hits.append("P2PDMA on md RAID: 'RAID0 over NVMe and NVMEoF are not supported' "
                        "(GDS Support for NVMe using PCI P2PDMA, Intro)")
        if topo.transport in ("tcp", "rdma"):
            hits.append(f"P2PDMA over NVMe-oF ({topo.transport}): not supported (same guide)")
        if inv.gds.multipath == "Y":
            hits.append("P2PDMA with NVMe multipath (nvme_core multipath=Y): 'will not work "
                        "without a specialized patch' (GDS Troubleshooting 14.3)")
    if mount and mount.fstype == "overlay":
        hits.append(f"the target is on overlayfs ({mount.target}, a container layer): cuFile "
                    "cannot register files there (ai-dynamo/dynamo#6032, PR #10649); mount a "
                    "block-backed volume")
    return hits


def _limits(c: Case) -> Reading:
    hits = limits_hit(c.inv, c.site)
    return Reading(len(hits), "; ".join(hits) or "none of the documented limits applies "
                   "(P2PDMA on md RAID, NVMe-oF or multipath NVMe; a target on overlayfs)")


def deviations(inv: Inventory, site: Site) -> list[Deviation]:
    """cuFile's silent POSIX fallbacks and what kvgate could not verify, for the site to
    acknowledge; none where the site declares no GDS."""
    if not inv.gds.declared or not inv.gds.cufile.ok:
        return []
    cf, found = inv.gds.cufile.value, []
    if cf.allow_compat_mode and not cf.force_compat_mode:
        found.append(f"GDS compat mode allowed: where GPU-direct fails cuFile reads and writes "
                     f"through POSIX without an error ({cf.path} properties.allow_compat_mode "
                     "is true, its default); acknowledge it, or set it false")
    found += [f"GDS writes through POSIX on this filesystem: {cf.path} {key} is false"
              for key in cf.compat_writes]
    if site.topology.gds not in ("", P2PDMA) and inv.raid.ok and inv.raid.value:
        found.append(f"GDS on md RAID ({inv.raid.value.device}): nvidia-fs needs the md RAID "
                     "support of the GDS installation (GDS Installation Guide); kvgate did "
                     "not verify it")
    return [Deviation(cause=Cause.GDS_FALLBACK, text=text) for text in found]


PLATFORM = CheckSpec("GPUDirect Storage platform (gdscheck -p)", "gds.platform", _platform,
                     none_of("problems", "site.topology.gds"), want=_declared,
                     unset=_not_declared, site_first=True)
CONFIGURATION = CheckSpec("GPUDirect Storage configuration (cufile.json)", "gds.cufile",
                          _configuration, none_of("problems", "site.topology.gds"),
                          want=_declared, unset=_not_declared, site_first=True)
PATH = CheckSpec("GPUDirect Storage path (gdsio, nvidia-fs stats)", "gds.path", _path,
                 none_of("problems", "site.topology.gds"), want=_declared,
                 unset=_not_declared, site_first=True)
LIMITS = CheckSpec("GPUDirect Storage known limits", "mount", _limits,
                   none_of("limits", "site.topology.gds"), want=_declared,
                   unset=_not_declared, site_first=True)
