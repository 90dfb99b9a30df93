"""One arm ready for repetitions: kept engines started once, logs kept, the machine read.

G2 runs one arm level by level; G3 runs two (baseline and candidate) in ABBA pairs. Both go
through ArmRunner, so an arm is validated, started, measured and stopped the same way whether
it runs alone or interleaved with another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..core.configuration import Site, validate_arms
from ..core.verdicts import RequestRecord
from ..inference import (
    ORDERS,
    ArmProcess,
    DeviceReference,
    MachineReadings,
    Pair,
    Repetition,
)
from ..model import kv_geometry
from ..storage import (
    DeviceReader,
    SubprocessRunner,
    TargetError,
    check_directory,
    foreign_filesystem,
)
from .choice import EngineRun, engine_problems
from .protocol import run_arm_once, start_arm


def engine_site(site: Site, run: EngineRun) -> Site:
    """The site as G2/G3 run it: the chosen engine's arms and workload."""
    return site.model_copy(update={"arms": run.arms,
                                   "workload": site.engine_workload(run.workload)})


def kv_bytes_per_token(site: Site, run: EngineRun) -> int:
    """KV bytes a token occupies on the tier: the engine's, the site's, or the model's."""
    return run.kv_bytes_per_token or site.workload.kv_bytes_per_token or kv_geometry(
        site.sizing.model, site.sizing.dtype, site.sizing.tp).stored_bytes_per_token


def arm_problem(site: Site, name: str, run: EngineRun, site_file: str) -> str:
    """Why an arm cannot run as G2/G3 would run it ("" if it can); names the site file."""
    problems = validate_arms(site.arms, (name,)) + engine_problems(site, run)
    if problems:
        return "; ".join(problems) + f" (site file {site_file})"
    try:
        check_directory(site.target, 0, set())
    except TargetError as exc:
        return str(exc)
    kv_dir = site.arms[name].kv_dir
    elsewhere = foreign_filesystem(kv_dir, site.target.directory) \
        if name == "candidate" and kv_dir is not None else ""
    if elsewhere:
        return f"arms.candidate.kv_dir: {elsewhere} (site file {site_file})"
    try:
        kv_bytes_per_token(site, run)
    except (ValueError, OSError) as exc:
        return f"cannot size the workload's KV ([sizing] model): {exc}"
    return ""


def machine_readings(run: RunContext, site: Site, gate: str, arms: tuple[str, ...],
                     seconds: float) -> tuple[MachineReadings, str]:
    """The machine's controls for a gate: the CPU reference, and the KV device's read speed
    (gates.storage.devref, ``seconds`` long) where every arm measured keeps its KV on the
    target's filesystem; the text says what the device reference reads, or why nothing."""
    if seconds <= 0:
        return MachineReadings(), "not read (g2.device_reference = 0s)"
    target = site.target.directory
    for name in arms:
        kv_dir = site.arms[name].kv_dir
        if kv_dir is not None and foreign_filesystem(kv_dir, target):
            return MachineReadings(), (
                f"not read: arms.{name}.kv_dir {kv_dir} is not on the target's filesystem "
                f"({target}), and kvgate writes its reference file only in the target")
    reader = DeviceReader(runner=SubprocessRunner(), fio=site.fio, target=target,
                          evidence_dir=run.evidence_dir, seconds=seconds,
                          keep=run.add_evidence, label=f"{gate}-devref")

    def read() -> DeviceReference:
        speed, error = reader()
        return DeviceReference(bytes_per_s=speed, error=error)
    return MachineReadings(device=read), (
        f"{seconds:g} s of random {site.fio.kv_block:,}-byte reads ({site.fio.kv_jobs} jobs x "
        f"queue depth {site.fio.kv_iodepth}, O_DIRECT) of a file in {target}, between "
        "repetitions (g2.device_reference)")


class RunContext(Protocol):
    """What a runner needs of the gate session (gates.session.GateSession is one)."""

    run_id: str
    evidence_dir: Path
    store: Any  # .add_request(run_id, record): every request lands in the store as it ends

    def add_evidence(self, path: Path) -> object: ...

    def engine(self) -> EngineRun: ...


@dataclass
class ArmRunner:
    """An arm of a site for one gate: ``with`` it, then ``rep(c, r)`` per repetition.

    A launched arm with ``fresh_each_repetition = false`` starts once on entering and stops on
    leaving; every other arm starts and stops inside each repetition. ProtocolError from any
    step names the arm, the phase and the log tail.
    """

    name: str
    site: Site
    gate: str
    run_id: str
    evidence_dir: Path
    add_evidence: Callable[[Path], object]
    kv_bytes_per_token: int
    machine: MachineReadings
    on_record: Callable[[RequestRecord], None] | None = None
    output_tokens: int | None = None
    tag: str = ""
    kept: ArmProcess | None = field(default=None, init=False)

    @classmethod
    def of(cls, run: RunContext, site: Site, name: str, gate: str, machine: MachineReadings,
           output_tokens: int | None = None, tag: str = "") -> ArmRunner:
        """An arm of ``site`` as this run measures it: requests stored, logs kept as evidence."""
        return cls(name=name, site=site, gate=gate, run_id=run.run_id,
                   evidence_dir=run.evidence_dir, add_evidence=run.add_evidence,
                   kv_bytes_per_token=kv_bytes_per_token(site, run.engine()), machine=machine,
                   output_tokens=output_tokens, tag=tag,
                   on_record=lambda rec: run.store.add_request(run.run_id, rec))

    @property
    def _kept_log(self) -> Path:
        return self.evidence_dir / f"{self.gate}-arm-{self.name}{self.tag}.log"

    def __enter__(self) -> ArmRunner:
        arm = self.site.arms[self.name]
        if arm.kind == "launch" and arm.stays_up:
            self.kept = start_arm(self.name, arm, self._kept_log, self.run_id,
                                  self.site.target.directory)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.kept is not None:
            self.kept.stop()
            self.kept = None
        if self._kept_log.exists():  # once, after the stop: the log grew until then
            self.add_evidence(self._kept_log)

    def warm_up(self, c: int) -> Repetition:
        """A repetition at concurrency c that is not judged: on a server that stays up
        (Arm.stays_up), the first repetition at a level ran 11-18 % slower than the next two
        (vLLM's CPU build, 8 of 10 levels the slowest; 16 short warm-up requests did not change
        it), so three judged repetitions held that one's difference as run-to-run noise. Its
        requests are not stored; its figures go in the record's facts."""
        return self.rep(c, 0, warm=True)

    def rep(self, c: int, r: int, again: int = 0, warm: bool = False) -> Repetition:
        """One cold-recovery repetition at concurrency c, bracketed by the CPU reference;
        again > 0 is repetition r measured once more (its own log), the same workload."""
        name = "warmup" if warm else f"r{r + 1}{f'-again{again}' if again else ''}"
        site, log = self.site, self.evidence_dir / (
            f"{self.gate}-arm-{self.name}{self.tag}-c{c}-{name}.log")
        topology = site.topology
        try:
            rep = run_arm_once(
                self.name, site.arms[self.name], site.workload, c, r, log=log,
                kv_root=site.target.directory, run_id=self.run_id,
                on_record=None if warm else self.on_record,
                output_tokens=self.output_tokens, devices=topology.devices,
                kv_bytes_per_token=self.kv_bytes_per_token, interfaces=topology.interfaces,
                rdma_devices=[topology.rdma_device] if topology.rdma_device else [],
                process=self.kept)
        finally:
            if log.exists():
                self.add_evidence(log)
        return rep.model_copy(update=self.machine.bracket())


def abba_pair(arms: dict[str, ArmRunner], c: int, i: int, again: int,
              step: Callable[[str], None], done: Callable[[], None]) -> Pair:
    """Pair i at concurrency c in its ABBA order (again > 0: measured once more), G3's and the
    sweep's alike; step(arm) before and done() after each arm's repetition (a progress bar)."""
    reps = {}
    for name in ORDERS[i % 2]:
        step(name)
        reps[name] = arms[name].rep(c, i, again)
        done()
    return reps["baseline"], reps["candidate"]
