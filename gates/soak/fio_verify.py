"""The G4 integrity collector: a rate-limited fio write-then-verify pass and its failing blocks."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from ..storage import CommandRunner, FioParseError, ToolMissing, job_value, parse_fio_json
from .health import MAX_DETAILS, BaseCollector, WindowContext
from .rules import VERIFY, HealthReading

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


class FioVerify(BaseCollector):
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
