"""Running fio: write the job file, run it with json+ output to a file, keep both as evidence."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..core.configuration import FioSettings
from .fio import FioParseError, FioReport, parse_fio_json
from .fioerrors import VerifyFailure, job_errors, parse_verify_failures
from .jobs import FioStep, JobFileError, render_jobfile
from .runner import INSTALL_HINTS, CommandRunner, Tick, ToolMissing
from .target import device_bytes


@dataclass
class FioRun:
    """The result of one fio invocation: a parsed report, or the reason there is none."""

    step: FioStep
    report: FioReport | None = None
    error: str = ""
    evidence: list[Path] = field(default_factory=list)
    # Bytes the watched block device read and wrote while fio ran (fio's and anyone else's).
    device_io: tuple[int, int] | None = None
    # Blocks a verify job read back other than written, as fio printed them.
    verify_failures: list[VerifyFailure] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the run produced a report with no job errors."""
        return self.report is not None and not self.error


def _fio_missing(binary: str, exc: ToolMissing) -> ToolMissing:
    """ToolMissing that says it is fio, whatever the binary is called, and how to install it."""
    if INSTALL_HINTS["fio"] in str(exc):
        return exc
    return ToolMissing(f"{exc} (site.toml [fio] binary = {binary!r} is fio: "
                       f"{INSTALL_HINTS['fio']})")


def fio_version(runner: CommandRunner, binary: str = "fio") -> str:
    """fio's version string, e.g. "fio-3.33"; raises ToolMissing when fio is absent."""
    try:
        done = runner.run([binary, "--version"], timeout=30)
    except ToolMissing as exc:
        raise _fio_missing(binary, exc) from None
    return done.stdout.strip() or done.stderr.strip()


FIO_PREFIXES = ("ip:", "ip4:", "ip6:", "sock:")


def host_name(host: str) -> str:
    """A host as fio names it in ``client_stats``: without fio's prefix or IPv6 brackets."""
    for prefix in FIO_PREFIXES:
        if host.startswith(prefix):
            host = host[len(prefix):]
            break
    return host.strip("[]")


def client_address(host: str, port: int) -> str:
    """A host as fio's --client takes it: ``HOST,PORT``; IPv6 literals need fio's ``ip6:``."""
    if host.startswith("sock:"):
        return host  # a local socket has no port
    if host.startswith(FIO_PREFIXES):
        return f"{host},{port}"
    if ":" in host:  # an IPv6 literal, perhaps in brackets; fio would read ":…" as a port
        return f"ip6:{host.strip('[]')},{port}"
    return f"{host},{port}"


def client_args(fio: FioSettings, jobfile: Path, hosts: list[str] | None = None) -> list[str]:
    """Arguments for fio's client/server mode: ``--client=HOST,PORT JOBFILE`` per host (the
    step's hosts, else every [fio] host)."""
    args: list[str] = []
    for host in fio.hosts if hosts is None else hosts:
        args += [f"--client={client_address(host, fio.server_port)}", str(jobfile)]
    return args


def step_hosts(step: FioStep, fio: FioSettings) -> list[str]:
    """Every host a step runs on: its readers (all [fio] hosts unless it names some) and its
    neighbour's."""
    return [*(fio.hosts if step.hosts is None else step.hosts), *step.neighbour_hosts]


def plan(step: FioStep, fio: FioSettings) -> dict[str, list[str]]:
    """The hosts each of a step's jobs runs on, as fio names them ([]: this machine)."""
    readers = [host_name(h) for h in (fio.hosts if step.hosts is None else step.hosts)]
    return {**{job.name: readers for job in step.jobs},
            **{job.name: [host_name(h) for h in step.neighbour_hosts] for job in step.neighbour}}


def _missing_hosts(report: FioReport, hosts: list[str], output: str) -> str:
    """Which --client hosts sent no results: their figures would silently be left out."""
    reported = set(report.hosts())
    missing = [h for h in hosts if host_name(h) not in reported]
    if not missing:
        return ""
    # fio 3.33 client.c remove_client prints "client: host=%s disconnected" when one drops.
    said = [line.strip() for line in output.splitlines() if "disconnected" in line
            and any(f"host={host_name(h)} " in line + " " for h in missing)]
    return f"no results from fio server(s) {', '.join(missing)}" + (
        f" (fio: {' | '.join(said)}); the other hosts' results are kept in the evidence"
        if said else "")


def _job_args(step: FioStep, fio: FioSettings, jobfile: Path, evidence_dir: Path,
              directory: str) -> list[str] | str:
    """fio's job arguments: the job file alone, or per client (the neighbour's hosts with
    their own job file); a str is why the neighbour's job file could not be written."""
    if not step_hosts(step, fio):
        return [str(jobfile)]
    args = client_args(fio, jobfile, step.hosts)
    if step.neighbour_hosts:
        other = evidence_dir / f"fio-{step.key}-neighbour.fio"
        try:
            other.write_text(render_jobfile(step.model_copy(update={"jobs": step.neighbour}),
                                            directory, fio))
        except JobFileError as exc:
            return str(exc)
        args += client_args(fio, other, step.neighbour_hosts)
    return args


def run_step(runner: CommandRunner, step: FioStep, fio: FioSettings, target: Path | None,
             evidence_dir: Path, on_tick: Tick | None = None, watch: str = "") -> FioRun:
    """Run one step; every failure becomes FioRun.error, and the evidence is always kept.

    ``target`` is the directory fio's files live in, or None when the jobs name a raw device;
    ``watch`` names the block device (see watched_device) whose I/O during the run is kept.
    """
    # fio runs in the target directory: every path it is given must be absolute.
    evidence_dir = evidence_dir.absolute()
    target = target.absolute() if target else None
    jobfile = evidence_dir / f"fio-{step.key}.fio"
    output = evidence_dir / f"fio-{step.key}.json"
    log = evidence_dir / f"fio-{step.key}.log"
    run = FioRun(step=step)
    try:
        jobfile.write_text(render_jobfile(step, str(target) if target else "", fio))
    except JobFileError as exc:
        run.error = str(exc)
        return run
    run.evidence.append(jobfile)
    output.unlink(missing_ok=True)  # never read an older run's report as this one's
    jobs = _job_args(step, fio, jobfile, evidence_dir, str(target) if target else "")
    if isinstance(jobs, str):
        run.error = jobs
        return run
    if step.neighbour_hosts:
        run.evidence.append(evidence_dir / f"fio-{step.key}-neighbour.fio")
    argv = [fio.binary, "--output-format=json+", f"--output={output}", *jobs]
    before = device_bytes(watch) if watch else None
    try:
        done = runner.run(argv, timeout=fio.timeout + step.seconds, cwd=target or evidence_dir,
                          on_tick=on_tick)
    except ToolMissing as exc:
        run.error = str(_fio_missing(fio.binary, exc))
        return run
    except OSError as exc:  # e.g. the target directory vanished, or fio is not executable
        run.error = f"could not start {fio.binary}: {exc}"
        return run
    after = device_bytes(watch) if before else None
    if before and after:
        run.device_io = (after[0] - before[0], after[1] - before[1])
    log.write_text(f"$ {' '.join(argv)}\nexit {done.returncode}\n--- stdout\n{done.stdout}"
                   f"\n--- stderr\n{done.stderr}")
    run.evidence.append(log)
    if output.exists():
        run.evidence.append(output)
    run.verify_failures = parse_verify_failures(done.stderr)
    if done.timed_out:
        # The limit is the site's margin past the job's own planned time: say both, and where.
        run.error = (f"fio was killed after {fio.timeout + step.seconds:g} s: the job's planned "
                     f"{step.seconds:g} s plus site.toml [fio] timeout = {fio.timeout:g} s; "
                     "raise [fio] timeout if the array is slow to finish the job")
        return run
    try:
        text = output.read_text(errors="replace") if output.exists() else ""
        run.report = parse_fio_json(text).model_copy(update={"planned": plan(step, fio)})
    except FioParseError as exc:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        run.error = f"fio exited {done.returncode}: {exc}" + (f" — {' | '.join(tail)}"
                                                               if tail else "")
        return run
    run.error = job_errors(run.report, step, done.stderr, str(target) if target else "") \
        or _missing_hosts(run.report, step_hosts(step, fio),
                          # with --output, fio's client writes its own notes into that file
                          f"{text.split(chr(10) + '{', 1)[0]}\n{done.stdout}\n{done.stderr}")
    if not run.error and done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-3:]
        run.error = f"fio exited {done.returncode}: {' | '.join(tail) or 'no message'}"
    return run
