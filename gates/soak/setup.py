"""G4 set-up from the configuration and the G3 record: operating point, load, collectors."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from ..core.configuration import G4Limits, Site, soak_problem
from ..core.quantities import format_duration
from ..core.statistics import median
from ..core.verdicts import Cause, Deviation, GateRecord
from ..inference import Repetition
from ..loadgen import Endpoint, LoadSettings, multi_turn
from ..proof import ServerIdentity
from ..storage import CommandRunner
from ..store import Store, sha256_file
from .fio_verify import FioVerify
from .health import FreeSpace, ProcessHealth
from .kernel_log import KernelLog
from .load import EndpointLoad
from .nvme_health import NvmePaths, Smart
from .rules import SoakPlan, StartOptions

G3_FILE = "g3-candidate-repetitions.json"
VERIFY_DIR = "kvgate-soak-verify"


class SetupError(Exception):
    """G4 cannot start: the message says what is missing."""


class OperatingPoint(NamedTuple):
    """G3's highest level, its median candidate throughput, and what G3's server said it was."""

    concurrency: int
    throughput: float  # tok/s, G3's probe: shown beside G4's floor, not judged
    served_by: tuple[str, ...] = ()  # Repetition.server at that level; () in older records


def operating_point(store: Store, g3: GateRecord) -> OperatingPoint:
    """G3's highest concurrency level, its median candidate throughput, its server's word."""
    path = store.run_dir(g3.run_id) / "evidence" / G3_FILE
    listed = g3.evidence.get(f"evidence/{G3_FILE}")
    # Said as `kvgate verify` says it: a file the record never listed is no altered file.
    if listed is None:
        raise SetupError(f"G3 run {g3.run_id} wrote no candidate repetitions: its record "
                         f"({g3.verdict.value}) lists no evidence/{G3_FILE}, so G3 was "
                         "interrupted (or stopped) before its repetitions were written; G4 "
                         "soaks at G3's operating point: run G3 again")
    if not path.is_file():
        raise SetupError(f"G3's repetitions {path} are missing (listed in run {g3.run_id}'s "
                         "G3 record)")
    if (actual := sha256_file(path)) != listed:
        raise SetupError(f"G3's repetitions {path} were altered (SHA-256 {actual[:16]}… but "
                         f"the G3 record lists {listed[:16]}…)")
    reps = [Repetition.model_validate(r) for r in json.loads(path.read_text())]
    top = max(r.concurrency for r in reps)
    tputs = [r.output_throughput for r in reps if r.concurrency == top and r.output_throughput]
    if not tputs:
        raise SetupError(f"G3 run {g3.run_id} has no throughput at concurrency {top}")
    said = tuple(sorted({r.server for r in reps if r.concurrency == top and r.server}))
    return OperatingPoint(top, median(tputs), said)


def other_engine(point: OperatingPoint, soak: ServerIdentity) -> Deviation | None:
    """A deviation when the soak's server is not the engine G3 measured; None when it is.

    Engine and version are compared (how each found out may differ); an engine that could not
    say what it is is not the same one. Older G3 records named no server: nothing to compare.
    """
    if not point.served_by:
        return None
    if soak.known and {ServerIdentity.name_of(s) for s in point.served_by} == {soak.name}:
        return None
    return Deviation(cause=Cause.SOAK_OTHER_ENGINE, text=(
        f"G4 soaked {soak.describe()}, not the engine G3 measured "
        f"({'; '.join(point.served_by)}): the soak says how that engine holds on this "
        "storage, not how G3's does"))


def soak_plan(run_id: str, site: Site, limits: G4Limits, g3_throughput: float | None,
              duration: float | None = None, window: float | None = None,
              started_with: StartOptions | None = None) -> SoakPlan:
    """The soak's plan: --soak-duration, else site.toml [soak], else thresholds.toml [g4].

    Whichever set the duration is named in the plan; whether it is shortened is the plan's
    own rule (SoakPlan.shortened, against the 72 h sign-off), not decided here. started_with
    keeps the run options (--force …) a resume continues with.
    """
    seconds, source = next((s, name) for s, name in (
        (duration, "--soak-duration"), (site.soak.duration, "site.toml [soak] duration"),
        (limits.duration, "thresholds.toml [g4] duration")) if s)
    warmup, warmup_source = ((site.soak.warmup_windows, "site.toml [soak] warmup_windows")
                             if site.soak.warmup_windows is not None else
                             (limits.warmup_windows, "thresholds.toml [g4] warmup_windows"))
    window, window_source = next((w, name) for w, name in (
        (window, "--soak-window"), (site.soak.window, "site.toml [soak] window"),
        (limits.window, "thresholds.toml [g4] window")) if w)
    plan = SoakPlan(run_id=run_id, duration=seconds, duration_source=source,
                    window=window, warmup_windows=warmup,
                    nominal_duration=limits.duration, nominal_window=limits.window,
                    g3_throughput=g3_throughput, started_with=started_with or StartOptions())
    # The rule `kvgate config check` holds the files to, held here too: --soak-duration and
    # --soak-window never passed through a file check.
    if problem := soak_problem(plan.duration, plan.window, warmup):
        fault, text = problem
        said = {"duration": f'{source} "{format_duration(plan.duration)}"',
                "window": f'{window_source} "{format_duration(plan.window)}"',
                "warmup": f"{warmup_source} = {warmup}"}
        raise SetupError(f"G4 could not judge this soak: {said[fault]} "
                         + text.format(**said))
    return plan


def soak_load(site: Site, endpoints: list[Endpoint], concurrency: int) -> EndpointLoad:
    """Closed loop at the operating point; each pass over the sessions brings new prompts."""
    s, w = site.soak, site.workload

    def plans(cycle: int):
        return multi_turn(s.sessions, s.turns, s.first_tokens, s.turn_tokens, s.output_tokens,
                          w.seed + 1000 + cycle, w.vocab)

    return EndpointLoad(endpoints, plans, LoadSettings(concurrency=concurrency,
                                                       stall_timeout=w.stall_timeout))


def collectors(site: Site, runner: CommandRunner, pid: Callable[[], int | None]) -> list:
    """Every health signal; those the site's topology rules out say NOT APPLICABLE."""
    verify_dir: Path = site.target.directory / VERIFY_DIR
    verify_dir.mkdir(exist_ok=True)
    devices = site.topology.devices
    return [KernelLog(runner, devices), Smart(runner, devices),
            NvmePaths(runner, site.topology.transport),
            FioVerify(runner, verify_dir, size=site.soak.verify_size,
                      rate=f"{int(site.soak.verify_rate)}", ioengine=site.fio.ioengine,
                      direct=site.fio.direct, binary=site.fio.binary),
            ProcessHealth(pid), FreeSpace(site.target.directory, site.target.min_free)]
