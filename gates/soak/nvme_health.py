"""The G4 NVMe collectors: SMART snapshots with per-window deltas, and NVMe-oF path states."""

from __future__ import annotations

from collections.abc import Sequence

from ..storage import (
    CommandRunner,
    ParseError,
    ToolMissing,
    as_int,
    install_hint,
    json_document,
    parse_list_subsys,
    parse_smart_log,
)
from .health import BaseCollector, WindowContext
from .rules import PATHS, SMART, HealthReading


def missing_nvme_cli(exc: ToolMissing, what: str) -> str:
    """The ERROR reason when nvme-cli is absent: what could not be read, and what to install."""
    return f"nvme-cli is not installed ({exc}), so {what} cannot be read: {install_hint('nvme')}"


def smart_totals(texts: dict[str, str]) -> dict[str, float]:
    """Device -> ``nvme smart-log -o json`` text, summed (errors), OR-ed (warning), maxed."""
    out = {"media_errors": 0.0, "error_log_entries": 0.0, "critical_warning": 0.0,
           "temperature_max_c": -273.0, "percent_used_max": 0.0}
    for device, text in texts.items():
        command = f"nvme smart-log {device} -o json"
        log = parse_smart_log(text, command)
        entries = as_int(json_document(text, command).get("num_err_log_entries"), command,
                         "num_err_log_entries") or 0
        out["media_errors"] += log.media_errors
        out["error_log_entries"] += entries
        out["critical_warning"] = float(int(out["critical_warning"]) | log.critical_warning)
        out["temperature_max_c"] = max(out["temperature_max_c"], log.temperature_c)
        out["percent_used_max"] = max(out["percent_used_max"], log.percent_used)
    return out


class Smart(BaseCollector):
    """SMART snapshots of the target's NVMe devices, with deltas against the last snapshot."""

    name = SMART

    def __init__(self, runner: CommandRunner, devices: Sequence[str]):
        self.runner, self.devices = runner, list(devices)
        self.previous: dict[str, float] | None = None
        self.unprimed = "no snapshot was taken before it"  # why there is no baseline

    def _snapshot(self) -> dict[str, float]:
        texts = {}
        for device in self.devices:
            done = self.runner.run(["nvme", "smart-log", device, "-o", "json"], timeout=30)
            if done.returncode != 0:
                raise ParseError(f"nvme smart-log {device}", done.stderr.strip() or
                                 f"exit {done.returncode}")
            texts[device] = done.stdout
        return smart_totals(texts)

    def prime(self, now: float) -> None:
        """The baseline snapshot the first window's deltas are taken against."""
        try:
            self.previous = self._snapshot() if self.devices else None
        except (ToolMissing, ParseError) as exc:
            self.previous = None  # collect() reports the reason
            self.unprimed = f"the snapshot before it could not be read: {exc}"

    def collect(self, ctx: WindowContext) -> HealthReading:
        """Totals now and their change since the previous snapshot."""
        if not self.devices:  # a fact of the site: nothing named to read
            return HealthReading.not_applicable("no NVMe devices named for the target "
                                                "(site.toml [topology] devices)")
        try:
            now = self._snapshot()
        except ToolMissing as exc:  # the devices are there; the tool is not: could not measure
            return HealthReading.failed(missing_nvme_cli(exc, f"the SMART logs of "
                                                         f"{', '.join(self.devices)}"))
        except ParseError as exc:
            return HealthReading.failed(str(exc))
        before, self.previous = self.previous, now
        if before is None:  # nothing to take the delta against: this window's errors unknown
            return HealthReading.failed(
                f"no SMART baseline for window #{ctx.index} ({self.unprimed}): its new media "
                "errors are unknown; later windows are taken against this snapshot")
        values = dict(now)
        for key in ("media_errors", "error_log_entries"):
            values[f"{key}_delta"] = now[key] - before[key]
        alert = values["media_errors_delta"] > 0 or now["critical_warning"] > 0
        return HealthReading(status="alert" if alert else "ok", values=values)


FABRICS = ("tcp", "rdma", "fc")


class NvmePaths(BaseCollector):
    """NVMe-oF paths (tcp, rdma, fc) from ``nvme list-subsys``: how many are live.

    Whether there are paths to watch is the site's topology ([topology] transport), never
    what one host happens to show: a fabric site with no path connected has every path down.
    """

    name = PATHS

    def __init__(self, runner: CommandRunner, transport: str):
        self.runner, self.transport = runner, transport

    def collect(self, ctx: WindowContext) -> HealthReading:
        """Live and total fabrics paths; N/A where the topology has no NVMe over Fabrics."""
        if self.transport not in ("tcp", "rdma"):
            return HealthReading.not_applicable(
                f"no NVMe over Fabrics in the topology (site.toml [topology] transport = "
                f"{self.transport!r})")
        argv = ["nvme", "list-subsys", "-o", "json"]
        try:
            done = self.runner.run(argv, timeout=30)
            # nvme-cli 2.x on a host without /sys/class/nvme-subsystem: no path at all.
            none = done.returncode != 0 and "No such file or directory" in done.stderr
            paths = [] if none else [p for s in parse_list_subsys(done.stdout)
                                     for p in s.paths if p.transport in FABRICS]
        except ToolMissing as exc:
            return HealthReading.failed(missing_nvme_cli(exc, "the NVMe-oF paths"))
        except ParseError as exc:
            return HealthReading.failed(str(exc))
        down = [f"{p.name} ({p.transport} {p.address}): {p.state}" for p in paths
                if p.state != "live"]
        if not paths:
            down = [f"no NVMe-oF path is connected, though [topology] transport = "
                    f"{self.transport!r}"]
        return HealthReading(status="alert" if down else "ok", details=down,
                             values={"live": float(len(paths) - len(down) if paths else 0),
                                     "total": float(len(paths))})
