"""Running fio: write the job file, run it with json+ output to a file, keep both as evidence."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from pathlib import Path

from ._fio import FioParseError, FioReport, parse_fio_json
from ._jobs import FioStep, render_jobfile
from ._runner import CommandRunner, Tick, ToolMissing
from ._settings import FioSettings


@dataclass
class FioRun:
    """The result of one fio invocation: a parsed report, or the reason there is none."""

    step: FioStep
    report: FioReport | None = None
    error: str = ""
    evidence: list[Path] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the run produced a report with no job errors."""
        return self.report is not None and not self.error


def fio_version(runner: CommandRunner, binary: str = "fio") -> str:
    """fio's version string, e.g. "fio-3.33"; raises ToolMissing when fio is absent."""
    done = runner.run([binary, "--version"], timeout=30)
    return done.stdout.strip() or done.stderr.strip()


def client_args(fio: FioSettings, jobfile: Path) -> list[str]:
    """Arguments for fio's client/server mode: ``--client=HOST,PORT JOBFILE`` per host."""
    args: list[str] = []
    for host in fio.hosts:
        args += [f"--client={host},{fio.server_port}", str(jobfile)]
    return args


def _job_errors(report: FioReport) -> str:
    bad = [(j.jobname, j.hostname, j.error) for j in report.entries() if j.error]
    return "; ".join(
        f"job {name}{' on ' + host if host else ''}: error {code} "
        f"({os.strerror(code) if code in errno.errorcode else 'fio error'})"
        for name, host, code in bad)


def run_step(runner: CommandRunner, step: FioStep, fio: FioSettings, target: Path | None,
             evidence_dir: Path, on_tick: Tick | None = None) -> FioRun:
    """Run one step; every failure becomes FioRun.error, and the evidence is always kept.

    ``target`` is the directory fio's files live in, or None when the jobs name a raw device.
    """
    jobfile = evidence_dir / f"fio-{step.key}.fio"
    output = evidence_dir / f"fio-{step.key}.json"
    log = evidence_dir / f"fio-{step.key}.log"
    jobfile.write_text(render_jobfile(step, str(target) if target else "", fio))
    run = FioRun(step=step, evidence=[jobfile])
    jobs = client_args(fio, jobfile) if fio.hosts else [str(jobfile)]
    argv = [fio.binary, "--output-format=json+", f"--output={output}", *jobs]
    try:
        done = runner.run(argv, timeout=fio.timeout + step.seconds, cwd=target or evidence_dir,
                          on_tick=on_tick)
    except ToolMissing as exc:
        run.error = str(exc)
        return run
    log.write_text(f"$ {' '.join(argv)}\nexit {done.returncode}\n--- stdout\n{done.stdout}"
                   f"\n--- stderr\n{done.stderr}")
    run.evidence.append(log)
    if output.exists():
        run.evidence.append(output)
    if done.timed_out:
        run.error = f"fio was killed after the {fio.timeout + step.seconds:g} s timeout"
        return run
    try:
        run.report = parse_fio_json(output.read_text() if output.exists() else "")
    except FioParseError as exc:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        run.error = f"fio exited {done.returncode}: {exc}" + (f" — {' | '.join(tail)}"
                                                               if tail else "")
        return run
    run.error = _job_errors(run.report)
    if not run.error and done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-3:]
        run.error = f"fio exited {done.returncode}: {' | '.join(tail) or 'no message'}"
    return run
