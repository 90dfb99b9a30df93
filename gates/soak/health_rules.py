"""G4 rules over the health readings: fio verify, SMART, kernel log, NVMe-oF paths. Pure: no I/O.

Every window the plan expected is expected of each signal the site has (a site without it
says NOT APPLICABLE in every window); one never committed (``absent``, from
gates.soak.readings.not_committed) was read by no collector. A window whose reading failed,
or that has none, was not read: it counts against the rule through its Coverage (gates.core),
never as a gap in the evidence, and one good window no longer makes the rule "measured". G4
asks for full coverage (HEALTH_COVERAGE_MIN): a window a signal was not read in can hide
exactly what G4 exists to catch (an hour of new media errors, a verify pass that never ran, a
path that went down), and no share of the other windows makes up for it. So a rule short of
full coverage is ERROR, naming the windows and why; a FAIL in the windows read stands, since
every rule here counts something that more windows can only add to.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..core.configuration import G4Limits
from ..core.verdicts import G4, Coverage, Limit, Measurement, Outcome
from .rules import KERNEL, PATHS, SMART, VERIFY, HealthReading, WindowRecord

# Not in thresholds.toml: that file is the performer's to edit, and a soak whose unread
# windows could be declared away would PASS on what it never looked at.
HEALTH_COVERAGE_MIN = 1.0
READ = ("ok", "alert")
# What each rule counts, as the collectors write it (fio_verify._window, nvme_health,
# kernel_log.hits_reading): a reading without its count was not read, never read as none
# found. fio writes job_errors only for a pass the storage refused, so it is not required.
COUNTS = {VERIFY: ("verify_errors",),
          SMART: ("media_errors", "media_errors_delta", "critical_warning"),
          KERNEL: ("hits",), PATHS: ("live", "total")}
MAX_EVIDENCE = 20


Absent = Mapping[int, str] | None  # windows the plan expected, never committed: why


def coverage(windows: list[WindowRecord], collector: str, absent: Absent = None) -> Coverage:
    """Which windows a collector's signal was read in; the others with why they were not."""
    read, failed = [], dict(absent or {})
    for w in windows:
        reading = w.health.get(collector)
        if reading is None:
            continue  # Coverage names it: "no reading"
        if reading.status in READ and (lacking := _lacking(collector, reading)):
            failed[w.index] = f"its reading has no {' or '.join(lacking)}"
        elif reading.status in READ:
            read.append(w.index)
        elif reading.status == "error":
            failed[w.index] = reading.reason or "could not be read"
        else:  # the signal was there in other windows: its absence here is no fact of the site
            failed[w.index] = f"not applicable in this window alone: {reading.reason}"
    return Coverage(sorted({w.index for w in windows} | set(failed)), read, failed,
                    what="windows")


def _lacking(collector: str, reading: HealthReading) -> list[str]:
    """The counts a rule judges that this reading does not carry: it was not read."""
    return [key for key in COUNTS[collector] if key not in reading.values]


def _usable(collector: str, reading: HealthReading) -> bool:
    return reading.status in READ and not _lacking(collector, reading)


def _read(windows: list[WindowRecord], collector: str) -> list[tuple[WindowRecord, HealthReading]]:
    return [(w, w.health[collector]) for w in windows
            if collector in w.health and _usable(collector, w.health[collector])]


def _unmeasured(name: str, windows: list[WindowRecord], collector: str,
                what: str, absent: Absent = None) -> Measurement | None:
    """N/A (every window says the site has no such signal, with its reason) or ERROR when no
    window was read at all: a window with no reading next to ones saying N/A was not read."""
    readings = {w.index: w.health[collector] for w in windows if collector in w.health}
    if any(_usable(collector, r) for r in readings.values()):
        return None
    if not readings:
        return Measurement.error(name, f"no window has a {what} reading")
    cov = coverage(windows, collector, absent)
    whys = [cov.failed[i] for i, r in readings.items() if r.status != "not applicable"]
    if not whys and len(readings) == len(windows):
        return Measurement.not_applicable(name, next(iter(readings.values())).reason)
    why = whys[0] if whys else "some windows have no reading, the others say not applicable"
    return Measurement.error(name, f"{what} could not be read in any window: {why}",
                             evidence=[cov.describe()])


def _covered(windows: list[WindowRecord], collector: str, measured: Measurement,
             absent: Absent = None) -> Measurement:
    return coverage(windows, collector, absent).judge(measured, HEALTH_COVERAGE_MIN)


def verify_errors(windows: list[WindowRecord], limits: G4Limits,
                  absent: Absent = None) -> Measurement:
    """fio verify=crc32c failures over the whole soak <= verify_errors_max; any fio job error
    (EIO, ENOSPC, EROFS, a short write) in a pass is a failure of the pass, whatever the max."""
    name = G4["g4.verify_errors"].title
    if (early := _unmeasured(name, windows, VERIFY, "fio verify", absent)) is not None:
        return early
    read = _read(windows, VERIFY)
    mismatches = sum(r.values["verify_errors"] for _, r in read)
    refused = [(w, r) for w, r in read if r.values.get("job_errors", 0)]
    offsets = [f"window #{w.index}: {d}" for w, r in read for d in r.details]
    measured = Measurement.measured(
        name, mismatches + len(refused),
        Limit.at_most(limits.verify_errors_max, "errors", key="g4.verify_errors_max"),
        evidence=offsets[:MAX_EVIDENCE], note=f"{len(read)} write-then-verify passes")
    if refused:
        w, r = refused[0]
        measured = measured.model_copy(update={"outcome": Outcome.FAIL, "note": (
            f"window #{w.index}: {r.reason}; the storage refused {len(refused)} of "
            f"{len(read)} write-then-verify passes (windows "
            f"{[x.index for x, _ in refused][:MAX_EVIDENCE]}): each counts as an error, and a "
            f"job error fails the rule whatever g4.verify_errors_max allows")})
    return _covered(windows, VERIFY, measured, absent)


def media_errors(windows: list[WindowRecord], absent: Absent = None) -> list[Measurement]:
    """No new SMART media errors and no critical warning raised during the soak."""
    names = (G4["g4.media_errors"].title, G4["g4.critical_warnings"].title)
    if (early := _unmeasured(names[0], windows, SMART, "SMART", absent)) is not None:
        return [early, early.model_copy(update={"name": names[1]})]
    read = _read(windows, SMART)
    first, last = read[0][1].values, read[-1][1].values
    # The first reading's delta is against the snapshot taken before window 0 (or resume).
    # The counters are cumulative, yet a window not read still counts against the rule: a
    # critical warning is a state of that window, and after the last good reading nothing is.
    base = first["media_errors"] - first["media_errors_delta"]
    new = last["media_errors"] - base
    logs = last.get("error_log_entries", 0) - (first.get("error_log_entries", 0)
                                               - first.get("error_log_entries_delta", 0))
    warned = [w.index for w, r in read if r.values["critical_warning"]]
    temps = [r.values["temperature_max_c"] for _, r in read if "temperature_max_c" in r.values]
    evidence = [f"error-log entries +{logs:.0f} (not judged: nvme-cli's own queries add some)",
                *([f"temperature {min(temps):.0f}-{max(temps):.0f} °C"] if temps else [])]
    zero = "DESIGN §6: none allowed, not configurable"
    return [_covered(windows, SMART, m, absent) for m in (
        Measurement.measured(names[0], new, Limit.at_most(0, "errors"), evidence=evidence,
                             note=zero),
        Measurement.measured(names[1], len(warned), Limit.at_most(0, "windows"), note=zero,
                             evidence=[f"critical warning in windows {warned[:MAX_EVIDENCE]}"]
                             if warned else []))]


def kernel_errors(windows: list[WindowRecord], absent: Absent = None) -> Measurement:
    """No NVMe timeouts, resets, reconnects, I/O errors or XFS errors in the kernel log."""
    name = G4["g4.kernel_errors"].title
    if (early := _unmeasured(name, windows, KERNEL, "kernel log", absent)) is not None:
        return early
    read = _read(windows, KERNEL)
    hits = sum(r.values["hits"] for _, r in read)
    lines = [f"window #{w.index}: {d}" for w, r in read for d in r.details]
    return _covered(windows, KERNEL, absent=absent, measured=Measurement.measured(
        name, hits, Limit.at_most(0, "lines"), evidence=lines[:MAX_EVIDENCE],
        note="NVMe timeouts/resets/reconnects, I/O errors, XFS errors; DESIGN §6: none allowed"))


def paths_live(windows: list[WindowRecord], absent: Absent = None) -> Measurement:
    """Every NVMe-oF path live at the end of every window."""
    name = G4["g4.paths_live"].title
    if (early := _unmeasured(name, windows, PATHS, "NVMe-oF path", absent)) is not None:
        return early
    down = [w.index for w, r in _read(windows, PATHS)
            if r.values["live"] < r.values["total"] or not r.values["total"]]
    return _covered(windows, PATHS, absent=absent, measured=Measurement.measured(
        name, len(down), Limit.at_most(0, "windows"),
        evidence=[f"a path was down in windows {down[:MAX_EVIDENCE]}"] if down else []))
