"""fio's job errors in words a site engineer can act on: job, errno, file, offset. Pure."""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass

from pydantic import BaseModel

from .fio import FioReport
from .jobs import FioStep

# A verify mismatch under continue_on_error=verify ends its job with EILSEQ (84): fio 3.33
# verify.c returns -EILSEQ from each failed check, and stat.c show_thread_status_json writes
# the job's "error" and "total_err" (the blocks that failed). The verify rule counts those.
EILSEQ = errno.EILSEQ
# fio 3.33 verify.c log_verify_failure() / verify_io_u_*(): "crc32c: verify failed at file F
# offset N, length L (requested block: ...)", "verify: bad magic header ..., at file F offset N,
# length L", on stderr (also with --output), once per block that failed.
_VERIFY = re.compile(r"^(?P<what>.*?(?:verify|bad ).*?) at file (?P<file>.+?) offset "
                     r"(?P<offset>\d+), length (?P<length>\d+)")

# fio 3.33 io_u.c io_u_log_error(): "fio: io_u error on file %s: %s: %s offset=%llu,
# buflen=%llu" (file, strerror, read/write/trim, offset, length), once per failed I/O, on stderr.
_IO_U = re.compile(r"fio: io_u error on file (?P<file>.+?): (?P<why>[^:]+): (?P<dir>\w+) "
                   r"offset=(?P<offset>\d+), buflen=(?P<length>\d+)")


@dataclass(frozen=True)
class IoError:
    """One I/O fio saw fail, as it printed it."""

    file: str
    why: str
    direction: str
    offset: int
    length: int


def io_errors(stderr: str) -> list[IoError]:
    """Every failed I/O fio printed, in order."""
    return [IoError(m["file"], m["why"], m["dir"], int(m["offset"]), int(m["length"]))
            for m in _IO_U.finditer(stderr)]


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


def verifies(step: FioStep, name: str) -> bool:
    """Whether the step's job ``name`` verifies and goes on past a mismatch (its EILSEQ is a
    counted verify error, judged by the verify rule, not a job that failed to run)."""
    return any(job.name == name and job.options.get("continue_on_error") == "verify"
               for job in step.jobs)


def errno_words(code: int) -> str:
    """"error 5 (EIO, Input/output error)"; fio's own codes above errno's are said to be fio's."""
    if code in errno.errorcode:
        return f"error {code} ({errno.errorcode[code]}, {os.strerror(code)})"
    return f"error {code} (fio error)"


def _job_path(step: FioStep, name: str, directory: str) -> str:
    file = next((job.options.get("filename", "") for job in step.jobs if job.name == name), "")
    return os.path.join(directory, file) if directory and file else file


def _first_on(path: str, errors: list[IoError]) -> str:
    """fio's first failed I/O on ``path`` (its lines do not say which job's it was)."""
    mine = [e for e in errors if e.file == path]
    if not mine:
        return ""
    first = mine[0]
    return (f"first failed I/O on {path}: {first.direction} at offset {first.offset}, "
            f"{first.length} bytes ({len(mine)} failed I/O{'s' * (len(mine) > 1)} printed)")


def job_errors(report: FioReport, step: FioStep, stderr: str, directory: str = "") -> str:
    """Each failed job once, with its errno in words and its file; then, per file, where fio's
    first failed I/O on it was. A job the step does not name is placed by fio's own lines."""
    errors = io_errors(stderr)
    jobs: dict[str, str] = {}
    for j in report.entries():
        if j.error and not (j.error == EILSEQ and verifies(step, j.jobname)):
            path = _job_path(step, j.jobname, directory) or (errors[0].file if errors else "")
            host = f" on {j.hostname}" if j.hostname else ""
            jobs.setdefault(f"job {j.jobname}{host}: {errno_words(j.error)}"
                            + (f" on file {path}" if path else ""), path)
    where = [_first_on(path, errors) for path in dict.fromkeys(jobs.values()) if path]
    return "; ".join([*jobs, *filter(None, where)])
