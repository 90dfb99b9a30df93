"""The G4 integrity collector: a rate-limited fio write-then-verify pass and its failing blocks."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from ..storage import (
    CommandRunner,
    FioParseError,
    ToolMissing,
    fioerrors,
    job_value,
    parse_fio_json,
)
from .health import MAX_DETAILS, BaseCollector, WindowContext
from .rules import VERIFY, HealthReading

VERIFY_FILE = "kvgate-soak-verify.dat"
# fio's job "error" is the errno that ended the job (fio 3.33 stat.c show_thread_status_json:
# "error" = ts->error); verify mismatches under continue_on_error=verify are EILSEQ
# (fioerrors.EILSEQ, where that is read from fio's source), and fio prints "fio: pid=N,
# err=28/file:io_u.c:1876, func=io_u error, error=No space left on device" and "fio: io_u
# error on file F: ...: write offset=N, buflen=M" (io_u.c, filesetup.c).
_FIO_ERROR = re.compile(r"^fio: (?:pid=\d+, err=|io_u error )")


def fio_error_lines(text: str) -> list[str]:
    """fio's own lines about the error that ended a job (its errno, file and offset)."""
    return [line.strip() for line in text.splitlines() if _FIO_ERROR.match(line)][:3]


class JobError(BaseModel):
    """An fio job ended by an error other than a verify mismatch: the storage refused the pass."""

    step: str  # "write" or "verify"
    code: int  # the errno fio reported
    said: list[str] = []

    def describe(self) -> str:
        """E.g. "fio write pass: job error ENOSPC (28), No space left on device"."""
        name = errno.errorcode.get(self.code, "errno")
        try:
            text = os.strerror(self.code)
        except ValueError:
            text = "unknown error"
        return f"fio {self.step} pass: job error {name} ({self.code}), {text}"


def verify_job(directory: Path, size: int, block: int, rate: str, ioengine: str, direct: bool,
               verify_only: bool) -> str:
    """A write-then-verify (or verify-only) job file over one file in the scratch directory."""
    options = {"rw": "write", "filename": VERIFY_FILE, "size": str(size),
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

    def _pass(self, verify_only: bool,
              jobs: Path) -> tuple[int, list[fioerrors.VerifyFailure], str, JobError | None]:
        step = "verify" if verify_only else "write"
        # The job file lives outside the target: a full or read-only target must meet fio's
        # own I/O (and its errno), not kvgate's bookkeeping.
        jobfile = jobs / f"kvgate-soak-{step}.fio"
        jobfile.write_text(verify_job(self.scratch, self.size, self.block, self.rate,
                                      self.ioengine, self.direct, verify_only))
        done = self.runner.run([self.binary, "--output-format=json", str(jobfile)],
                               timeout=self.timeout, cwd=self.scratch)
        if done.timed_out:
            return 0, [], f"fio {step} pass killed after {self.timeout:g} s", None
        failures = fioerrors.parse_verify_failures(done.stderr)
        try:
            report = parse_fio_json(done.stdout)
        except FioParseError as exc:
            return len(failures), failures, f"fio {step} pass: {exc}", None
        # continue_on_error=verify: fio goes on and counts them in total_err (error 84).
        # fio may print notes (with braces) before its JSON: start where a line opens with "{".
        text = done.stdout if done.stdout.startswith("{") else done.stdout.split("\n{", 1)[-1]
        try:
            raw = json.JSONDecoder().raw_decode(text if text.startswith("{") else "{" + text)[0]
            counted = sum(int(j.get("total_err", 0) or 0) for j in raw.get("jobs", []))
        except (ValueError, AttributeError, TypeError):
            counted = 0  # the parsed report stands; the failure lines still count
        other = [j.error for j in report.jobs if j.error not in (0, fioerrors.EILSEQ)]
        said = fio_error_lines(done.stdout.split("\n{", 1)[0] + "\n" + done.stderr)
        refused = JobError(step=step, code=other[0], said=said) if other else None
        return max(counted, len(failures)), failures, "", refused

    def collect(self, ctx: WindowContext) -> HealthReading:
        """Errors and failing offsets of this window's pass; a job error is an alert."""
        try:
            self.scratch.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(prefix="kvgate-soak-fio-") as jobs:
                return self._window(Path(jobs))
        except (ToolMissing, OSError) as exc:
            return HealthReading.failed(f"fio verify pass could not run: {exc}")
        finally:  # each window's pass allocates afresh, as the engine's KV writes do
            with contextlib.suppress(OSError):
                (self.scratch / VERIFY_FILE).unlink(missing_ok=True)

    def _window(self, jobs: Path) -> HealthReading:
        written, first, error, refused = self._pass(verify_only=False, jobs=jobs)
        second: list[fioerrors.VerifyFailure] = []
        reread = 0
        if not (error or refused):
            if self.between:
                self.between(self.scratch / VERIFY_FILE)  # tests: corrupt it here
            reread, second, error, refused = self._pass(verify_only=True, jobs=jobs)
        if error:
            return HealthReading.failed(error)
        failures = [f.describe() for f in first + second]
        values = {"verify_errors": float(written + reread), "bytes": float(self.size)}
        if refused is not None:
            values["job_errors"] = 1.0
            return HealthReading(status="alert", values=values, reason=refused.describe(),
                                 details=[refused.describe(), *refused.said,
                                          *failures][:MAX_DETAILS])
        return HealthReading(status="alert" if written + reread else "ok", values=values,
                             details=failures[:MAX_DETAILS])
