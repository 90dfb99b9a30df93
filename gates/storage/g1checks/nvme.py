"""G1 checks of the NVMe devices: namespaces, sector size, NVMe-oF paths and SMART per drive.

Pure: array-wide checks are CheckSpecs run by `_g1check.judge`; the SMART checks are DriveSpecs,
judged once per controller that `nvme smart-log` was read from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...core.configuration import G1Limits
from ...core.verdicts import Limit, Measurement
from ..collector import Found
from ..inventory import Inventory
from ..nvme import Controller, SmartLog
from .spec import (
    Case,
    CheckSpec,
    Reading,
    Unmeasured,
    exact,
    measure,
    none_of,
    topology,
    unavailable,
)


def _namespaces(c: Case) -> Reading:
    return Reading(len(c.got), ", ".join(n.device for n in c.got) or "none found")


def _sector_size(c: Case) -> Reading | Unmeasured:
    found = c.got
    if not found:
        return Unmeasured("nvme list found no namespaces")
    wrong = [n for n in found if n.sector_size != c.want]
    shown = wrong[0] if wrong else found[0]
    if shown.sector_size is None:
        return Unmeasured(f"{shown.device}: nvme list gave no SectorSize")
    return Reading(shown.sector_size, ", ".join(f"{n.device} {n.sector_size} B" for n in found))


def _fabric_paths(subsystems):
    return [(s, p) for s in subsystems for p in s.paths if p.transport != "pcie"]


def _transport(c: Case) -> Reading:
    paths, want = _fabric_paths(c.got), c.want
    if not paths:
        return Reading(1, "no NVMe over Fabrics path is connected (nvme list-subsys shows "
                       "none): connect the array first")
    wrong = [(s, p) for s, p in paths if p.transport != want]
    note = f"{len(paths)} path(s): " + ", ".join(f"{p.name} {p.transport} {p.address}"
                                                 for _, p in paths)
    if wrong:
        note += (f" — {len(wrong)} path(s) not over {want}: the array is reached over "
                 f"{', '.join(sorted({p.transport for _, p in wrong}))}, not as ordered")
    return Reading(len(wrong), note)


def _paths_live(c: Case) -> Reading:
    paths = _fabric_paths(c.got)
    if not paths:
        return Reading(1, "no NVMe over Fabrics path is connected")
    down = [p for _, p in paths if p.state != "live"]
    return Reading(len(down), f"{len(paths) - len(down)} of {len(paths)} path(s) live" + (
        "; not live: " + ", ".join(f"{p.name} ({p.state or 'no state'}, {p.address})"
                                   for p in down) if down else ""))


NAMESPACES = CheckSpec("NVMe namespace count", "namespaces", _namespaces,
                       exact("namespaces", "site.topology.namespaces"),
                       want=topology("namespaces"), unset="site.toml [topology] sets no namespaces")
SECTOR_SIZE = CheckSpec("NVMe logical sector size", "namespaces", _sector_size,
                        exact("B", "site.topology.sector_size"), want=topology("sector_size"),
                        unset="site.toml [topology] sets no sector_size")
TRANSPORT = CheckSpec("NVMe-oF transport", "subsystems", _transport,
                      none_of("paths", "site.topology.transport"), want=topology("transport"))
PATHS_LIVE = CheckSpec("NVMe-oF paths live", "subsystems", _paths_live,
                       none_of("paths", "site.topology.transport"))


# ---- SMART, per drive --------------------------------------------------------------------

@dataclass(frozen=True)
class DriveSpec:
    """A SMART check judged on every drive against one thresholds.toml [g1] limit."""

    name: str
    limit: Callable[[G1Limits], Limit]
    read: Callable[[SmartLog], Reading]


DriveJudge = Callable[[str, Found[SmartLog], Found[Controller] | None], Measurement]


def per_drive(inv: Inventory, name: str, judge: DriveJudge, limit: Limit | None = None
              ) -> list[Measurement]:
    """One Measurement per drive, labelled with its controller and serial number."""
    if inv.namespaces.skipped or not inv.namespaces.ok:
        return [unavailable(name, inv.namespaces, limit)]
    if not inv.smart:
        return [Measurement.error(name, "nvme list found no namespaces to read SMART from "
                                  "(site.toml [topology] devices)", limit,
                                  evidence=inv.namespaces.evidence)]
    out = []
    for ctrl, log in inv.smart.items():
        ident = inv.controllers.get(ctrl)
        serial = f", S/N {ident.value.serial}" if ident and ident.ok else ""
        label = f"{name} ({ctrl}{serial})"
        out.append(unavailable(label, log, limit) or judge(label, log, ident))
    return out


def judge_drives(spec: DriveSpec, inv: Inventory, limits: G1Limits) -> list[Measurement]:
    """The spec judged on every drive's SMART log."""
    limit = spec.limit(limits)

    def judge(label, log, _ident):
        return measure(label, spec.read(log.value), limit, log.evidence)
    return per_drive(inv, spec.name, judge, limit)


def _critical_warning(smart: SmartLog) -> Reading:
    return Reading(smart.critical_warning, "no warning" if not smart.critical_warning else (
        f"critical warning {smart.critical_warning:#04x}: " + "; ".join(smart.warnings())))


CRITICAL_WARNING = DriveSpec("SMART critical warning", lambda limits: Limit.at_most(0, ""),
                             _critical_warning)
MEDIA_ERRORS = DriveSpec(
    "SMART media errors",
    lambda limits: Limit.at_most(limits.smart_media_errors_max, "errors",
                                 key="g1.smart_media_errors_max"),
    lambda smart: Reading(smart.media_errors,
                          "unrecovered data-integrity errors since manufacture"))
PERCENT_USED = DriveSpec(
    "SMART percent used",
    lambda limits: Limit.at_most(limits.smart_percent_used_max, "%",
                                 key="g1.smart_percent_used_max"),
    lambda smart: Reading(smart.percent_used, "vendor estimate of rated endurance used"))


def temperature(inv: Inventory, limits: G1Limits) -> list[Measurement]:
    """Composite temperature below each drive's own warning threshold (WCTEMP); g1's
    temperature_max where the drive reports none (WCTEMP 0), ERROR where it could not be asked:
    the fallback is for a drive without a threshold, not for one whose threshold is unread."""
    def judge(label, log, ident):
        smart = log.value
        if ident is None or not ident.ok:
            why = ident.error if ident else "nvme id-ctrl was not run for it"
            return Measurement.error(label, f"{smart.temperature_k} K, but the drive's warning "
                                     f"threshold (WCTEMP, nvme id-ctrl) could not be read: {why}",
                                     evidence=log.evidence + (ident.evidence if ident else []))
        wctemp = ident.value.warning_temp_k
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
    return per_drive(inv, "NVMe temperature", judge)
