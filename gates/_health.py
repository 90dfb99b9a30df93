"""G4 health collectors: kernel log, SMART deltas, NVMe-oF paths, fio verify, process, space.

Each collector returns one HealthReading per window; where it cannot apply it says NOT
APPLICABLE with the reason. Parsers are pure; tools run through the command-runner seam.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import psutil
from pydantic import BaseModel

from ._blockdev import ParseError, as_int, json_document
from ._fio import FioParseError, parse_fio_json
from ._jobs import job_value
from ._nvme import parse_list_subsys, parse_smart_log
from ._runner import CommandRunner, ToolMissing
from ._soak import FREE_SPACE, KERNEL, PATHS, PROCESS, SMART, VERIFY, HealthReading

MAX_DETAILS = 20  # lines kept per reading: a storm of identical errors must not flood the store


class WindowContext(BaseModel):
    """The window a reading is for; ``since`` is the last committed window's end (gaps too)."""

    index: int
    start: float
    end: float
    since: float


class Collector(Protocol):
    """A health signal. concurrent ones run in a worker thread during the window (fio)."""

    name: str
    concurrent: bool

    def prime(self, now: float) -> None: ...

    def collect(self, ctx: WindowContext) -> HealthReading: ...


class _Base:
    concurrent = False

    def prime(self, now: float) -> None:
        """Take a baseline before the first window of a session (most collectors need none)."""


# ---- kernel log ---------------------------------------------------------------------------

KERNEL_PATTERNS = [  # (kind, pattern): the message forms of drivers/nvme, block/ and fs/xfs
    ("nvme_timeout", r"\bnvme (nvme\d+): (?:I/O|.*\bQID\b).*\btimeout\b"),
    ("nvme_timeout", r"\bnvme (nvme\d+): queue \d+: timeout\b"),
    ("nvme_reset", r"\bnvme (nvme\d+): (?:resetting controller|controller is down; will reset"
                   r"|Removing after probe failure|Device not ready)"),
    ("nvme_reconnect", r"(?i)\bnvme (nvme\d+): (?:reconnecting in|failed reconnect attempt"
                       r"|starting error recovery|failed to connect)"),
    ("io_error", r"\b(?:I/O error|critical medium error), dev (\w+), sector"),
    ("io_error", r"\bBuffer I/O error on dev (\w+)"),
    ("io_error", r"\b(nvme\d+n\d+): .* @ LBA \d+, \d+ blocks, .*\(sct 0x[0-9a-f]+ / sc "),
    ("xfs_error", r"\bXFS \(([^)]+)\): .*(?:(?i:error)|[Cc]orruption|shut(?:ting)? down"
                  r"|force_shutdown)"),
]
_COMPILED = [(kind, re.compile(p)) for kind, p in KERNEL_PATTERNS]
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:[+-]\d\d:?\d\d|Z)?)\s+(.*)$")


class KernelHit(BaseModel):
    """One kernel log line about a storage problem."""

    kind: str
    device: str
    line: str
    t: float | None = None  # epoch seconds, when the log line carried a timestamp


def _epoch(stamp: str) -> float | None:
    try:
        when = dt.datetime.fromisoformat(stamp.replace(",", ".").replace("Z", "+00:00"))
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=dt.UTC)).timestamp()


def scan_kernel_log(text: str, devices: Sequence[str] = ()) -> list[KernelHit]:
    """Storage errors in ``dmesg --time-format=iso`` or journal text; devices filters by name."""
    hits = []
    for raw in text.splitlines():
        match = _STAMP.match(raw)
        t, line = (_epoch(match.group(1)), match.group(2)) if match else (None, raw)
        for kind, pattern in _COMPILED:
            found = pattern.search(line)
            if found:
                device = found.group(1)
                # nvme0n1 belongs to nvme0: a filter on either name catches both forms.
                if not devices or any(device.startswith(d) or d.startswith(device)
                                      for d in devices):
                    hits.append(KernelHit(kind=kind, device=device, line=line.strip(), t=t))
                break
    return hits


def hits_reading(hits: list[KernelHit]) -> HealthReading:
    """A reading from a window's kernel hits: counts per kind and the first lines."""
    values = {"hits": float(len(hits))}
    for hit in hits:
        values[hit.kind] = values.get(hit.kind, 0.0) + 1
    return HealthReading(status="alert" if hits else "ok", values=values,
                         details=[h.line for h in hits[:MAX_DETAILS]])


class KernelLog(_Base):
    """Scans ``dmesg --time-format=iso`` for the window (since the last committed window)."""

    name = KERNEL

    def __init__(self, runner: CommandRunner, devices: Sequence[str] = (),
                 argv: Sequence[str] = ("dmesg", "--time-format=iso")):
        self.runner, self.devices, self.argv = runner, tuple(devices), list(argv)

    def collect(self, ctx: WindowContext) -> HealthReading:
        """The window's storage errors; N/A where the kernel log cannot be read."""
        try:
            done = self.runner.run(self.argv, timeout=30)
        except ToolMissing as exc:
            return HealthReading.not_applicable(f"no kernel log reader: {exc}")
        if done.returncode != 0:
            why = (done.stderr.strip() or f"exit {done.returncode}").splitlines()[-1]
            return HealthReading.not_applicable(
                f"`{' '.join(self.argv)}` failed: {why} (in a container, or "
                "kernel.dmesg_restrict=1 without root)")
        hits = [h for h in scan_kernel_log(done.stdout, self.devices)
                if h.t is not None and ctx.since < h.t <= ctx.end]
        return hits_reading(hits)


# ---- NVMe SMART and paths -----------------------------------------------------------------

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


class Smart(_Base):
    """SMART snapshots of the target's NVMe devices, with deltas against the last snapshot."""

    name = SMART

    def __init__(self, runner: CommandRunner, devices: Sequence[str]):
        self.runner, self.devices = runner, list(devices)
        self.previous: dict[str, float] | None = None

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
        except (ToolMissing, ParseError):
            self.previous = None  # collect() reports the reason

    def collect(self, ctx: WindowContext) -> HealthReading:
        """Totals now and their change since the previous snapshot."""
        if not self.devices:
            return HealthReading.not_applicable("no NVMe devices named for the target "
                                                "(site.toml [topology] devices)")
        try:
            now = self._snapshot()
        except ToolMissing as exc:
            return HealthReading.not_applicable(f"nvme-cli is not installed: {exc}")
        except ParseError as exc:
            return HealthReading.failed(str(exc))
        before = self.previous or now
        self.previous = now
        values = dict(now)
        for key in ("media_errors", "error_log_entries"):
            values[f"{key}_delta"] = now[key] - before[key]
        alert = values["media_errors_delta"] > 0 or now["critical_warning"] > 0
        return HealthReading(status="alert" if alert else "ok", values=values)


FABRICS = ("tcp", "rdma", "fc")


class NvmePaths(_Base):
    """NVMe-oF paths (tcp, rdma, fc) from ``nvme list-subsys``: how many are live."""

    name = PATHS

    def __init__(self, runner: CommandRunner):
        self.runner = runner

    def collect(self, ctx: WindowContext) -> HealthReading:
        """Live and total fabrics paths; N/A on a host with none."""
        argv = ["nvme", "list-subsys", "-o", "json"]
        try:
            done = self.runner.run(argv, timeout=30)
            if done.returncode != 0 and "No such file or directory" in done.stderr:
                # nvme-cli 2.x on a host without /sys/class/nvme-subsystem: nothing to watch.
                return HealthReading.not_applicable(f"no NVMe subsystems on this host "
                                                    f"({done.stderr.strip()})")
            paths = [p for s in parse_list_subsys(done.stdout) for p in s.paths
                     if p.transport in FABRICS]
        except ToolMissing as exc:
            return HealthReading.not_applicable(f"nvme-cli is not installed: {exc}")
        except ParseError as exc:
            return HealthReading.failed(str(exc))
        if not paths:
            return HealthReading.not_applicable("no NVMe-oF paths (tcp, rdma, fc) on this host")
        down = [f"{p.name} ({p.transport} {p.address}): {p.state}" for p in paths
                if p.state != "live"]
        return HealthReading(status="alert" if down else "ok", details=down,
                             values={"live": float(len(paths) - len(down)),
                                     "total": float(len(paths))})


# ---- fio write-then-verify ----------------------------------------------------------------

_VERIFY = re.compile(r"^(?P<what>.*?(?:verify|bad ).*?) at file (?P<file>.+?) offset "
                     r"(?P<offset>\d+), length (?P<length>\d+)")


class VerifyFailure(BaseModel):
    """One block fio could not verify: where, and what fio said."""

    file: str
    offset: int
    length: int
    what: str

    def describe(self) -> str:
        """One line for the report."""
        return f"{self.what.strip()} at {self.file} offset {self.offset} length {self.length}"


def parse_verify_failures(stderr: str) -> list[VerifyFailure]:
    """Verify failures fio printed (``crc32c: verify failed at file F offset N, length L``)."""
    return [VerifyFailure(file=m["file"], offset=int(m["offset"]), length=int(m["length"]),
                          what=m["what"]) for m in map(_VERIFY.match, stderr.splitlines()) if m]


def verify_job(directory: Path, size: int, block: int, rate: str, ioengine: str, direct: bool,
               verify_only: bool) -> str:
    """A write-then-verify (or verify-only) job file over one file in the scratch directory."""
    options = {"rw": "write", "filename": "kvgate-soak-verify.dat", "size": str(size),
               "bs": str(block), "verify": "crc32c", "continue_on_error": "verify",
               "rate": rate}
    options.update({"verify_only": "1"} if verify_only else
                   {"do_verify": "1", "verify_backlog": "16"})
    lines = ["# written by kvgate: G4 soak integrity pass", "[global]",
             f"directory={job_value('directory', str(directory))}",
             f"ioengine={job_value('ioengine', ioengine)}", f"direct={int(direct)}", "",
             "[soak-verify]", *(f"{k}={job_value(k, v)}" for k, v in options.items()), ""]
    return "\n".join(lines)


class FioVerify(_Base):
    """A bounded, rate-limited write-with-verify pass, then a verify-only re-read of it.

    O_DIRECT by default: a re-read served from the page cache would prove nothing about the
    storage. ``scratch`` should be a subdirectory of the target kvgate owns.
    """

    name = VERIFY
    concurrent = True

    def __init__(self, runner: CommandRunner, scratch: Path, size: int = 32 * 1024**2,
                 block: int = 128 * 1024, rate: str = "32m", ioengine: str = "libaio",
                 direct: bool = True, binary: str = "fio", timeout: float = 600.0,
                 between: Callable[[Path], None] | None = None):
        self.runner, self.scratch = runner, Path(scratch)
        self.size, self.block, self.rate, self.ioengine = size, block, rate, ioengine
        self.direct, self.binary, self.timeout, self.between = direct, binary, timeout, between

    def _pass(self, verify_only: bool) -> tuple[int, list[VerifyFailure], str]:
        step = "verify" if verify_only else "write"
        jobfile = self.scratch / f"kvgate-soak-{step}.fio"
        jobfile.write_text(verify_job(self.scratch, self.size, self.block, self.rate,
                                      self.ioengine, self.direct, verify_only))
        done = self.runner.run([self.binary, "--output-format=json", str(jobfile)],
                               timeout=self.timeout, cwd=self.scratch)
        failures = parse_verify_failures(done.stderr)
        try:
            report = parse_fio_json(done.stdout)
        except FioParseError as exc:
            return len(failures), failures, f"fio {step} pass: {exc}"
        # continue_on_error=verify: fio goes on and counts them in total_err (error 84).
        # fio may print notes (with braces) before its JSON: start where a line opens with "{".
        text = done.stdout if done.stdout.startswith("{") else done.stdout.split("\n{", 1)[-1]
        try:
            raw = json.JSONDecoder().raw_decode(text if text.startswith("{") else "{" + text)[0]
            counted = sum(int(j.get("total_err", 0) or 0) for j in raw.get("jobs", []))
        except (ValueError, AttributeError, TypeError):
            counted = 0  # the parsed report stands; the failure lines still count
        other = [j.error for j in report.jobs if j.error not in (0, 84)]
        error = f"fio {step} pass: job error {other[0]}" if other else ""
        return max(counted, len(failures)), failures, error

    def collect(self, ctx: WindowContext) -> HealthReading:
        """Errors and failing offsets of this window's pass."""
        try:
            self.scratch.mkdir(parents=True, exist_ok=True)
            written, first, error = self._pass(verify_only=False)
            if not error and self.between:
                self.between(self.scratch / "kvgate-soak-verify.dat")  # tests: corrupt it here
            reread, second, error2 = self._pass(verify_only=True) if not error else (0, [], "")
        except (ToolMissing, OSError) as exc:
            return HealthReading.failed(f"fio verify pass could not run: {exc}")
        if error or error2:
            return HealthReading.failed(error or error2)
        failures = first + second
        return HealthReading(status="alert" if written + reread else "ok",
                             values={"verify_errors": float(written + reread),
                                     "bytes": float(self.size)},
                             details=[f.describe() for f in failures[:MAX_DETAILS]])


# ---- the engine's process and the target's free space -----------------------------------

class ProcessHealth(_Base):
    """RSS and open files of a local engine process and its children (psutil)."""

    name = PROCESS

    def __init__(self, pid: Callable[[], int | None]):
        self.pid = pid

    def collect(self, ctx: WindowContext) -> HealthReading:
        """RSS bytes and open file descriptors; N/A for an engine kvgate does not run."""
        pid = self.pid()
        if pid is None:
            return HealthReading.not_applicable("the engine is not a local process kvgate "
                                                "started (endpoint arm)")
        try:
            root = psutil.Process(pid)
            tree = [root, *root.children(recursive=True)]
            rss = sum(p.memory_info().rss for p in tree)
            fds = sum(p.num_fds() for p in tree)
        except psutil.NoSuchProcess:
            return HealthReading.failed(f"engine process {pid} is gone")
        except psutil.AccessDenied as exc:
            return HealthReading.not_applicable(f"no access to process {pid}: {exc}")
        return HealthReading(values={"rss_bytes": float(rss), "open_files": float(fds),
                                     "processes": float(len(tree))})


class FreeSpace(_Base):
    """Free space on the target; an alert below site.toml's min_free."""

    name = FREE_SPACE

    def __init__(self, directory: Path, min_free: int = 0):
        self.directory, self.min_free = Path(directory), min_free

    def collect(self, ctx: WindowContext) -> HealthReading:
        """Free and total bytes of the target's filesystem."""
        try:
            usage = shutil.disk_usage(self.directory)
        except OSError as exc:
            return HealthReading.failed(f"cannot stat the target {self.directory}: {exc}")
        low = usage.free < self.min_free
        return HealthReading(status="alert" if low else "ok",
                             values={"free_bytes": float(usage.free),
                                     "total_bytes": float(usage.total)},
                             reason=f"below min_free {self.min_free}" if low else "")
