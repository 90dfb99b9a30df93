"""A gate run: configuration, the store, upstream checks, and the records written at the end."""

from __future__ import annotations

import json
import platform
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__
from .binding import BINDING_FACT, binding_deviations, site_binding
from .checklist import ChecklistStore, unknown_checklist
from .core.configuration import CHECKOUT, Arm, LoadedFile, Site, Thresholds
from .core.verdicts import (
    DECLARED,
    GATE_TITLES,
    Cause,
    ChecklistAnswer,
    Deviation,
    DutItem,
    GateRecord,
    Measurement,
    Outcome,
    Scope,
    Table,
    UpstreamRef,
    upstream_gate,
)
from .engines import EngineRun, run_engine
from .options import RunConfig, RunOptions
from .report import ReportContext, Signer, arm_row, configured_signer, retest_rows, write_reports
from .storage import TargetLock, lock_target
from .store import Store, new_run_id, utc_now


def source_commit() -> str:
    """The git commit kvgate runs from ("+dirty" with local changes), or "unknown"."""
    try:
        found = subprocess.run(["git", "-C", str(CHECKOUT), "describe", "--always",
                                "--dirty=+dirty", "--abbrev=12"], capture_output=True,
                               text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return found.stdout.strip() if found.returncode == 0 and found.stdout.strip() else "unknown"


def upstream_problem(store: Store, gate: str, site: str) -> tuple[UpstreamRef | None, str]:
    """The upstream record a gate stands on, and why it blocks the gate ("" if it does not)."""
    before = upstream_gate(gate)
    if before is None:
        return None, ""
    found = store.latest_record(before, site)
    if found is None:
        return None, f"no {before.upper()} record for site '{site}': run {before} first"
    record, digest = found
    ref = UpstreamRef(gate=before, run_id=record.run_id, verdict=record.verdict,
                      record_sha256=digest)
    if record.verdict is not Outcome.PASS:
        return ref, f"{before.upper()} did not pass (run {record.run_id}: {record.verdict.value})"
    return ref, ""


@dataclass
class GateSession:
    """One run of one or more gates, sharing a run id, a store and the configuration."""

    options: RunOptions
    site: Site
    thresholds: Thresholds
    site_file: LoadedFile
    thresholds_file: LoadedFile
    store: Store
    run_id: str
    tool_versions: dict[str, str] = field(default_factory=dict)
    started: dict[str, str] = field(default_factory=dict)
    upstream: dict[str, tuple[UpstreamRef | None, str]] = field(default_factory=dict)
    deviations: dict[str, list[Deviation]] = field(default_factory=dict)
    inventory: list[DutItem] = field(default_factory=list)  # the DUT, collected by G1
    facts: dict[str, dict[str, str]] = field(default_factory=dict)  # per gate, e.g. workload
    finished: dict[str, tuple[GateRecord, dict[str, Path]]] = field(default_factory=dict)
    charts: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # gate: (title, svg)
    engine_run: EngineRun | None = None  # chosen once, in open()
    # gate: arm: (what its server said it is, whether it is kvgate's simulator)
    served: dict[str, dict[str, tuple[str, bool]]] = field(default_factory=dict)
    tables: dict[str, dict[str, Table]] = field(default_factory=dict)  # gate: title: table
    not_run: dict[str, list[str]] = field(default_factory=dict)  # gate: its checks the run skipped
    signer: Signer | None = None  # the performer's key; None: records are written unsigned
    target_lock: TargetLock | None = None  # held from open() until finish()

    @classmethod
    def open(cls, options: RunOptions, config: RunConfig | None = None,
             engine: EngineRun | None = None) -> GateSession:
        """Open the store and register the run; the configuration is loaded and the engine
        chosen unless handed in (`kvgate run` chose it to say so first)."""
        config = config or RunConfig.load(options)
        engine = engine or run_engine(config)  # an engine asked for and missing stops it here
        signer = configured_signer()  # a bad $KVGATE_SIGNING_KEY stops the run before it starts
        if problem := options.checklist_id and unknown_checklist(options.out, options.checklist_id):
            raise ValueError(problem)  # `pytest -m g1 --checklist-id X` too, not only kvgate run
        run_id = options.run_id or new_run_id()
        # One run at a time on a target, for the run's whole length (TargetBusy says who has it).
        lock = lock_target(config.site.target, run_id, utc_now(), config.site.fio.binary)
        try:
            session = cls._registered(options, config, run_id, signer, lock)
            session.engine_run = engine
            return session
        except BaseException:  # no store, or no run registered (a full disk, a run id taken)
            if lock:
                lock.release()
            raise

    @classmethod
    def _registered(cls, options: RunOptions, config: RunConfig, run_id: str, signer,
                    lock) -> GateSession:
        """The session with its store open and its run registered (or resumed)."""
        site, thresholds = config.site, config.thresholds
        store = Store(options.out)
        session = cls(options, site, thresholds, config.site_file, config.thresholds_file,
                      store, run_id)
        session.signer, session.target_lock = signer, lock
        session.tool_versions = {"kvgate": __version__, "python": platform.python_version(),
                                 "platform": platform.platform(),
                                 "kvgate commit": source_commit()}
        if run_id in (options.soak_resume, options.sweep_resume) and store.run(run_id):
            # `kvgate soak resume` or `kvgate sweep --resume`: it goes on in its own run.
            (store.run_dir(run_id) / "evidence").mkdir(parents=True, exist_ok=True)
            return session
        store.begin_run(run_id, site.site.name, site_sha256=config.site_file.sha256,
                        thresholds_revision=thresholds.meta.revision,
                        thresholds_sha256=config.thresholds_file.sha256,
                        limits_profile=thresholds.profile,
                        tool_versions=session.tool_versions)
        return session

    @property
    def evidence_dir(self) -> Path:
        """Where this run's raw evidence files go."""
        return self.store.run_dir(self.run_id) / "evidence"

    def blocked_reason(self, gate: str) -> str:
        """Why this gate may not run now ("" if it may); --force turns a block into a note."""
        for earlier in [g for g in sorted(self.started) if g < gate]:
            self.finish_gate(earlier)  # `run all`: G1's record must exist before G2 asks
        if gate not in self.upstream:
            self.upstream[gate] = upstream_problem(self.store, gate, self.site.site.name)
            self.bind(gate)
        reason = self.upstream[gate][1]
        if reason and self.options.force:
            self.deviate(gate, f"FORCED: run despite the upstream gate: {reason}", Cause.FORCED)
            return ""
        return reason

    def bind(self, gate: str) -> None:
        """Deviations for what changed since the upstream record: limits, target, arms."""
        ref = self.upstream[gate][0]
        upstream = next((r for r in self.store.records(ref.run_id) if r.gate == ref.gate),
                        None) if ref else None
        if upstream is not None:
            for found in binding_deviations(upstream, self.thresholds_file.sha256,
                                            site_binding(self.site, self.bound_arms(gate))):
                self.deviate(gate, found)

    def bound_arms(self, gate: str) -> dict[str, Arm]:
        """The arms a gate's record is bound to: the ones it measured (G4 soaks the candidate)."""
        arms = self.arms(gate)
        return {"candidate": arms["candidate"]} if gate == "g4" and "candidate" in arms else arms

    def deviate(self, gate: str, found: Deviation | str, cause: Cause | None = None) -> None:
        """Record a deviation from the procedure, shown on the gate's report: its cause, set by
        whoever found it (a Deviation's own, or the one named with its text), decides its
        effect on ACCEPT; text without one is refused (only older records' is read by words)."""
        if isinstance(found, str):  # cause=None is refused by Deviation's validation
            found = Deviation(cause=cause, text=found)
        notes = self.deviations.setdefault(gate, [])
        if found not in notes:
            notes.append(found)

    def record(self, gate: str, measurement: Measurement) -> None:
        """Store one measurement of a gate the moment it is made."""
        if gate in self.finished:
            raise RuntimeError(f"{gate.upper()} is already signed off in run {self.run_id}: "
                               "run its checks before the next gate's")
        self.started.setdefault(gate, utc_now())
        self.store.add_measurement(self.run_id, gate, measurement)

    def expect(self, gate: str, not_run: list[str]) -> None:
        """A gate the run was asked for: it gets a record even when none of its checks ran,
        and the record names the checks that did not (INCOMPLETE)."""
        self.started.setdefault(gate, utc_now())
        if not_run:
            self.not_run[gate] = list(not_run)

    def judged(self, gate: str) -> list[Measurement]:
        """The gate's measurements as its record holds them: complete, or made INCOMPLETE (a
        gate its upstream blocks measured nothing on purpose: its BLOCKED stands alone)."""
        measurements = self.store.measurements(self.run_id, gate)
        if gate not in self.upstream:
            self.blocked_reason(gate)  # a gate none of whose checks ran: still bound, or blocked
        reason = self.upstream[gate][1]
        if reason and not self.options.force:
            return measurements or [Measurement.blocked(GATE_TITLES[gate], reason)]
        return DECLARED[gate].complete(measurements, self.scope(gate), self.not_run.get(gate, []))

    def scope(self, gate: str) -> Scope:
        """What the gate ran on, for its declarations: the site with the gate's arms, limits."""
        return Scope(self.site.model_copy(update={"arms": self.arms(gate)}), self.thresholds)

    def add_evidence(self, path: Path) -> str:
        """Hash an evidence file into the manifest; returns its run-relative name."""
        path = path.parent.resolve() / path.name
        self.store.add_evidence(self.run_id, path)
        return path.relative_to(self.store.run_dir(self.run_id)).as_posix()

    def engine(self) -> EngineRun:
        """The engine G2/G3 measure, chosen once when the run opened (gates.engines.run_engine)."""
        assert self.engine_run is not None, "GateSession.open chooses the engine"
        return self.engine_run

    def arms(self, gate: str) -> dict[str, Arm]:
        """The arms a gate measures: the chosen engine's for G2/G3, the site's for G4."""
        if gate in ("g2", "g3"):
            return self.engine().arms
        return self.site.arms if gate != "g1" else {}

    def simulated_arms(self, gate: str) -> list[str]:
        """The gate's arms that ran kvgate's simulator: by the server's word, else the config
        (every G2/G3 cold recovery and G4's soak ask the server what it is: an arm it reached is
        judged by its answer, whatever its `engine =` says; one it never asked, by its config)."""
        said = self.served.get(gate, {})
        return sorted(n for n, arm in self.bound_arms(gate).items()
                      if (said[n][1] if n in said else arm.engine == "kvgate-sim"))

    def serve(self, gate: str, arm: str, identity: str, simulated: bool) -> None:
        """Record what an arm's server said it is (the record's tool versions name it)."""
        self.served.setdefault(gate, {})[arm] = (identity, simulated)
        if identity:
            self.tool_versions[f"engine ({arm}, as it answered)"] = identity

    def checklist_answers(self, gate: str) -> list[ChecklistAnswer]:
        """The manual checklist answers given for this gate in the `kvgate checklist` run."""
        if not self.options.checklist_id:
            return []
        return ChecklistStore(self.store).answers(self.options.checklist_id, gate)

    def finish(self) -> list[tuple[GateRecord, dict[str, Path]]]:
        """Build, store and report a record for every gate that recorded anything; the run
        then lets its target go."""
        try:
            for gate in sorted(self.started):
                self.finish_gate(gate)
        finally:
            if self.target_lock:
                self.target_lock.release()
                self.target_lock = None
        return [self.finished[g] for g in sorted(self.finished)]

    def finish_gate(self, gate: str) -> None:
        """Store and report one gate's record, once; later measurements are refused."""
        if gate in self.finished:
            return
        measurements = self.judged(gate)
        upstream = self.upstream.get(gate, (None, ""))[0]
        simulated = ", ".join(self.simulated_arms(gate))
        if simulated:  # carried by the record, so a summary of any later run sees it too
            self.deviate(gate, f"simulated engine: the arms {simulated} run kvgate's reference "
                         "engine simulator, not a real inference engine", Cause.SIMULATED_ENGINE)
        record = GateRecord(
            gate=gate, run_id=self.run_id, site=self.site.site.name,
            started=self.started[gate], finished=utc_now(),
            measurements=measurements, thresholds_revision=self.thresholds.meta.revision,
            thresholds_sha256=self.thresholds_file.sha256,
            site_sha256=self.site_file.sha256, limits_profile=self.thresholds.profile,
            tool_versions=self.tool_versions, upstream=upstream,
            forced=any(d.cause is Cause.FORCED for d in self.deviations.get(gate, [])),
            deviations=self.deviations.get(gate, []),
            evidence=self.store.manifest(self.run_id),
            inventory=self.inventory if gate == "g1" else [],
            facts=self.facts.get(gate, {}) | {BINDING_FACT: json.dumps(
                site_binding(self.site, self.bound_arms(gate)), sort_keys=True)},
            checklist=self.checklist_answers(gate),
            tables=self.tables.get(gate, {}))
        self.store.save_record(record)
        self.finished[gate] = (record, write_reports(record, self.report_context(record),
                                                     self.store.run_dir(record.run_id),
                                                     signer=self.signer))

    def report_context(self, record: GateRecord) -> ReportContext:
        """What the gate's report shows besides its record: site, profile, arms, retests."""
        th, said = self.thresholds, self.served.get(record.gate, {})
        return ReportContext(
            site=self.site.site, profile=th.profile, profile_description=th.profile_description,
            statistic=th.decision.statistic, confidence=th.decision.confidence,
            marginal_band=th.decision.marginal_band, target=str(self.site.target.directory),
            thresholds_path=self.thresholds_file.path, site_path=self.site_file.path,
            charts=self.charts, simulated_arms=self.simulated_arms(record.gate),
            arms=[arm_row(name, arm, said.get(name, ("", False))[0])
                  for name, arm in self.bound_arms(record.gate).items()],
            retests=retest_rows(self.store, record))
