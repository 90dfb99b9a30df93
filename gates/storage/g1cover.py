"""Which hosts a G1 rule read: the hosts a step planned each job on, against those fio reported.
Pure.

With several [fio] hosts fio reports one entry (or several, numjobs) per client. The hosts a
rule is over come from the plan (fiorun.plan, from site.toml [fio] hosts and the step), never
from fio's output: a planned host that sent no entry of the job, or whose entry ended with an
error or carries no figure for the rule, is "not read" with why, never a host left out of a sum
or out of "the worst host". fio on this machine alone is one host.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..core.verdicts import Coverage, Measurement
from .fio import FioJob, FioReport
from .fioerrors import errno_words
from .g1step import StepOutcome, no_job

LOCAL = "this machine"  # the one host of a run without [fio] hosts
WHAT = "hosts"  # the unit of G1's fio rules (declared over="hosts")

# Why one host's entries of a job give the rule no figure ("" where they do).
Figure = Callable[[list[FioJob]], str]


def any_entry(entries: list[FioJob]) -> str:
    """Every entry fio sent gives a figure (the rule says itself what it lacks)."""
    return ""


def moved(direction: str) -> Figure:
    """A figure of bytes or I/Os in ``direction``: a host whose job moved none has none."""
    def why(entries: list[FioJob]) -> str:
        if any(getattr(e, direction).io_bytes for e in entries):
            return ""
        return f"moved no bytes ({direction})"
    return why


def latencies(entries: list[FioJob]) -> str:
    """A latency figure: a host whose job counted no completion latency has none."""
    if any(e.read.clat_ns.N for e in entries):
        return ""
    return "counted no completion latency (read clat N = 0)"


class PlanUnknown(ValueError):
    """A report with client hosts whose plan is unknown: no rule can say which are missing."""


@dataclass(frozen=True)
class HostEntries:
    """A job's entries by planned host, in plan order; a host fio sent none of has []."""

    job: str
    by_host: dict[str, list[FioJob]]

    @property
    def expected(self) -> tuple[str, ...]:
        """The planned hosts, in plan order."""
        return tuple(self.by_host)

    def entries(self) -> list[FioJob]:
        """Every planned host's entries of the job."""
        return [e for entries in self.by_host.values() for e in entries]

    def unreadable(self, host: str, figure: Figure) -> str:
        """Why the entries a host sent give no figure: an error, or none for the rule ("")."""
        entries = self.by_host[host]
        if failed := next((e.error for e in entries if e.error), 0):
            return f"job {self.job!r} ended with {errno_words(failed)}"
        why = figure(entries)
        return f"job {self.job!r} {why}" if why else ""


def not_sent(host: str, *jobs: str) -> str:
    """Why a planned host is not read: fio sent none of these jobs from it."""
    return no_job(*jobs) + ("" if host == LOCAL else " from it")


def coverage(per_job: Sequence[HostEntries], figure: Figure = any_entry,
             failed: dict[str, str] | None = None) -> Coverage:
    """The planned hosts, read where every job gave a figure from them: not read where fio
    sent a job from it, a job ended with an error or has no figure, or ``failed`` says so."""
    hosts = per_job[0].expected
    if any(e.expected != hosts for e in per_job):
        raise ValueError(f"jobs {', '.join(e.job for e in per_job)} were planned on different "
                         "hosts: one rule cannot be over them")
    why = dict(failed or {})
    for host in hosts:
        absent = [e.job for e in per_job if not e.by_host[host]]
        whys = ([not_sent(host, *absent)] if absent else []) + [
            w for e in per_job if e.by_host[host] and (w := e.unreadable(host, figure))]
        if host in why:
            whys.append(why[host])
        if whys:
            why[host] = ", and ".join(dict.fromkeys(whys))
    return Coverage(hosts, [h for h in hosts if h not in why], why, what=WHAT)


def planned_hosts(report: FioReport, job: str) -> list[str]:
    """The hosts a job was planned on: from the report's plan, else this machine alone for a
    local report; PlanUnknown for a client/server report read without its plan."""
    if report.planned is None:
        if report.client_stats:
            raise PlanUnknown(f"fio's report lists client hosts but not which hosts job {job!r} "
                              "was planned on, so a host that sent nothing cannot be named")
        return [LOCAL]
    readers = next(iter(report.planned.values()), [])  # the step's first job: its readers
    return report.planned.get(job, readers) or [LOCAL]


def host_entries(report: FioReport, job: str) -> HostEntries:
    """A job's entries by planned host; PlanUnknown where the plan is unknown, ValueError
    where fio reported a host the step did not plan (the figures are not this run's)."""
    hosts = planned_hosts(report, job)
    by_host: dict[str, list[FioJob]] = {h: [] for h in hosts}
    for entry in report.named(job):
        host = entry.hostname or LOCAL
        if host not in by_host:
            raise ValueError(f"fio reported job {job!r} from {host}, which the step did not "
                             f"plan (planned: {', '.join(hosts)})")
        by_host[host].append(entry)
    return HostEntries(job, by_host)


def over_hosts(step: StepOutcome, jobs: Sequence[str], figure: Figure,
               measured: Callable[[list[HostEntries]], Measurement],
               error: Callable[[str], Measurement]) -> Measurement:
    """A rule whose figure more hosts could move either way (a sum, a merged percentile): the
    figure only over every planned host, else an ERROR naming the hosts not read.

    ``measured(per_job)`` is the rule over every host's entries of each job; ``error(why)`` is
    its ERROR with that reason. The coverage line leads the evidence, also of a step that
    failed where fio's report shows which hosts it failed on.
    """
    if step.report is None:
        return error(step.problem())
    try:
        per_job = [host_entries(step.report, job) for job in jobs]
        cov = coverage(per_job, figure)
    except ValueError as exc:
        return error(step.problem() or str(exc))
    if step.problem():
        return cov.judge(error(step.problem()))
    if not cov.read:
        return cov.judge(error(cov.describe()))
    if not cov.complete:
        return cov.judge(error(f"{cov.describe()}: a figure over fewer hosts than planned is "
                               "not the array's"))
    return cov.judge(measured(per_job))
