"""The G1 fio job set, as data, and its rendering to a job file. Pure."""

from __future__ import annotations

from pydantic import BaseModel

from ..core.configuration import FioSettings

READ_FILE = "kvgate-read.dat"
WRITE_FILE = "kvgate-write.dat"
NEIGHBOUR_FILE = "kvgate-neighbour.dat"
VERIFY_FILE = "kvgate-verify.dat"
# The write-then-verify job's size: 64 MiB (or [fio] file_size, if smaller) checks every block
# of a KV-chunk-sized region in about a second on an array G1 would pass, so G1's time barely
# grows; G4's soak verifies for hours.
VERIFY_SIZE = 64 * 1024**2
# Options whose value is a path: fio splits them at ":" (several files), so colons are escaped.
PATH_OPTIONS = ("directory", "filename")


class JobFileError(ValueError):
    """A value that a fio job file cannot carry (it would be cut short or misread)."""


def job_value(option: str, value: str) -> str:
    """``value`` as it must be written in a job file; refuses what fio would misread."""
    # fio's job-file parser ends a line at ";" or "#", trims blanks at either end and
    # expands ${VAR} and $ncpus-style keywords: such a path would silently name another place.
    bad = [c for c in ("\n", "\r", "\x00", ";", "#", "$") if c in value]
    if bad or value != value.strip():
        what = ", ".join(map(repr, bad)) or "leading or trailing blanks"
        raise JobFileError(f"fio cannot take {option}={value!r} in a job file ({what}); "
                           "use a path without them")
    return value.replace(":", "\\:") if option in PATH_OPTIONS else value


class JobSection(BaseModel):
    """One [section] of a job file."""

    name: str
    options: dict[str, str]


class FioStep(BaseModel):
    """One fio invocation: a job file of one or more jobs, and what it is for."""

    key: str  # stable id, used for evidence file names and by the suite
    title: str
    jobs: list[JobSection]
    seconds: float  # expected wall time, for the progress bar's ETA
    direction: str = "read"
    # Client/server mode: the [fio] hosts this step's jobs run on (None = all of them), and
    # other hosts running other jobs at the same time (a neighbour's load), each in one fio run.
    hosts: list[str] | None = None
    neighbour: list[JobSection] = []
    neighbour_hosts: list[str] = []


def _ss(fio: FioSettings) -> dict[str, str]:
    ss = fio.steady_state
    return {"ss": ss.criterion, "ss_dur": f"{ss.window:g}s", "ss_ramp": f"{ss.ramp:g}s"}


def _timed(seconds: float) -> dict[str, str]:
    return {"time_based": "1", "runtime": f"{seconds:g}s"}


def g1_steps(fio: FioSettings, device: str = "") -> list[FioStep]:
    """Precondition, then sequential read/write, 4k QD1, the QD sweep and the KV-restore reads.

    With a raw ``device`` (destructive, already confirmed) every job uses it instead of files.
    """
    size = str(fio.file_size)
    read_file, write_file = (device, device) if device else (READ_FILE, WRITE_FILE)
    seq = {"bs": str(fio.seq_block), "iodepth": str(fio.seq_iodepth), "size": size}
    steps = [
        FioStep(key="precondition", title="Precondition: write the test file fully",
                seconds=fio.runtime, direction="write", jobs=[JobSection(
                    name="precondition", options={
                        "rw": "write", "filename": read_file,
                        "loops": str(fio.precondition_passes), **seq})]),
        FioStep(key="seqread", title="Sequential read, 1 MiB", seconds=fio.runtime,
                jobs=[JobSection(name="seqread", options={
                    "rw": "read", "filename": read_file, **seq, **_timed(fio.runtime),
                    **_ss(fio)})]),
        FioStep(key="seqwrite", title="Sequential write, 1 MiB", seconds=fio.runtime,
                direction="write", jobs=[JobSection(name="seqwrite", options={
                    "rw": "write", "filename": write_file, **seq, **_timed(fio.runtime),
                    **_ss(fio)})]),
        FioStep(key="randread-qd1", title="4 KiB random read, QD1",
                seconds=fio.latency_runtime, jobs=[JobSection(name="randread-qd1", options={
                    "rw": "randread", "filename": read_file, "bs": "4k", "iodepth": "1",
                    "size": size, **_timed(fio.latency_runtime)})]),
        FioStep(key="qd-sweep", title="4 KiB random read, queue-depth sweep",
                seconds=fio.qd_sweep_runtime * len(fio.qd_sweep), jobs=[
                    JobSection(name=f"randread-qd{qd}", options={
                        "rw": "randread", "filename": read_file, "bs": "4k", "iodepth": str(qd),
                        "size": size, "stonewall": "1", **_timed(fio.qd_sweep_runtime)})
                    for qd in fio.qd_sweep]),
        FioStep(key="kvrestore", title="KV restore: random reads of KV-chunk blocks",
                seconds=fio.runtime, jobs=[kv_restore_job(fio, read_file, steady=True)]),
        verify_step(fio, device),
    ]
    return steps


def verify_size(fio: FioSettings) -> int:
    """Bytes the verify job writes and reads back (see VERIFY_SIZE)."""
    return min(VERIFY_SIZE, fio.file_size)


def verify_step(fio: FioSettings, device: str = "") -> FioStep:
    """Write KV-chunk blocks with a crc32c in each, read them back and check every one.

    fio 3.33 HOWTO: verify=crc32c with do_verify=1 reads back what a write job wrote;
    verify_fatal=0 checks on past the first bad block, continue_on_error=verify keeps the job
    running so total_err counts every bad block; verify_dump=0 and verify_state_save=0 leave no
    dump or *-verify.state file (fio writes one in its working directory, the target).
    Direction "write": it needs no preconditioned file and runs even when that failed. With
    [fio] hosts only the first runs it: two writers of one file would mismatch each other.
    """
    return FioStep(key="verify", title="Write then verify (crc32c), KV-chunk blocks",
                   seconds=2.0, direction="write", hosts=fio.hosts[:1] or None,
                   jobs=[JobSection(name="verify", options={
                       "rw": "write", "filename": device or VERIFY_FILE,
                       "bs": str(fio.kv_block), "iodepth": str(fio.kv_iodepth),
                       "size": str(verify_size(fio)), "verify": "crc32c", "do_verify": "1",
                       "verify_fatal": "0", "verify_dump": "0", "verify_state_save": "0",
                       "continue_on_error": "verify"})])


def kv_restore_job(fio: FioSettings, read_file: str, steady: bool = False) -> JobSection:
    """The KV-restore read pattern: random reads of KV-chunk blocks, several jobs, one figure."""
    return JobSection(name="kvrestore", options={
        "rw": "randread", "filename": read_file, "bs": str(fio.kv_block),
        "iodepth": str(fio.kv_iodepth), "numjobs": str(fio.kv_jobs), "group_reporting": "1",
        "size": str(fio.file_size), **_timed(fio.runtime), **(_ss(fio) if steady else {})})


def scaling_levels(hosts: int) -> list[int]:
    """Client counts of the 1 -> N scaling curve: 1, 2, 4 ... below N, then N (N >= 2)."""
    if hosts < 2:
        return []
    levels = [1]
    while levels[-1] * 2 < hosts:
        levels.append(levels[-1] * 2)
    return [*levels, hosts]


def scaling_steps(fio: FioSettings, device: str = "") -> list[FioStep]:
    """The KV-restore job from the first 1, 2, 4 ... N [fio] hosts at once, one step each."""
    read_file = device or READ_FILE
    return [FioStep(key=f"kvscale-{n}", title=f"KV restore from {n} of {len(fio.hosts)} hosts",
                    seconds=fio.runtime, hosts=fio.hosts[:n],
                    jobs=[kv_restore_job(fio, read_file)])
            for n in scaling_levels(len(fio.hosts))]


def neighbour_step(fio: FioSettings, device: str = "") -> FioStep | None:
    """The first host restores KV while the second writes the declared load (sequential 1 MiB
    writes at [fio] neighbour_write_rate) to the same array; None without two hosts and a rate.
    """
    if len(fio.hosts) < 2 or fio.neighbour_write_rate is None:
        return None
    write = device or NEIGHBOUR_FILE
    return FioStep(key="kvneighbour", title="KV restore while a neighbour writes",
                   seconds=fio.runtime, hosts=fio.hosts[:1], neighbour_hosts=fio.hosts[1:2],
                   jobs=[kv_restore_job(fio, device or READ_FILE)],
                   neighbour=[JobSection(name="neighbour", options={
                       "rw": "write", "filename": write, "bs": "1m", "size": str(fio.file_size),
                       "rate": f"{fio.neighbour_write_rate:.0f}", "iodepth": "1",
                       **_timed(fio.runtime)})])


def shared_steps(fio: FioSettings, device: str = "") -> list[FioStep]:
    """G1's steps for a shared array (two [fio] hosts or more): the scaling curve, then the
    neighbour's load; none for one host or none."""
    neighbour = neighbour_step(fio, device)
    return [*scaling_steps(fio, device), *([neighbour] if neighbour else [])]


def render_jobfile(step: FioStep, directory: str, fio: FioSettings) -> str:
    """The job file text: a [global] section that pins every file under ``directory``.

    Raises JobFileError for a directory or device path fio would misread.
    """
    lines = ["# written by kvgate; every file lives under the target directory", "[global]",
             *([f"directory={job_value('directory', directory)}"] if directory else []),
             f"ioengine={job_value('ioengine', fio.ioengine)}", f"direct={int(fio.direct)}",
             "thread=0",
             # A fio server prefixes file names with the client's address unless told not to;
             # the files must be exactly the ones kvgate vetted and sized (files_written).
             "unique_filename=0", ""]
    for job in step.jobs:
        lines.append(f"[{job.name}]")
        lines.extend(f"{k}={job_value(k, v)}" for k, v in job.options.items())
        lines.append("")
    return "\n".join(lines)


def files_written(steps: list[FioStep]) -> set[str]:
    """Every file name the job set can create, so safety checks can vet them."""
    return {job.options["filename"] for step in steps for job in step.jobs}


def bytes_needed(fio: FioSettings) -> int:
    """Space the job set needs on the target: the read file and the write file (and the
    neighbour's, when it writes), and the verify job's file."""
    return (3 if neighbour_step(fio) else 2) * fio.file_size + verify_size(fio)
