"""`kvgate soak status` and `kvgate soak resume`: where a soak stands, and carrying it on.

Status says whether the soak's runner is alive (its pid, the pid's start time and the
heartbeat of every window, gates.soak.liveness) and, when it is not, the command that resumes
it; a soak whose G4 record is written with windows left (it ended in ERROR) is over, and status
says so instead. Status only reads the store: it creates none, and works on a read-only mount.
Resume continues the soak as it was started: the same run id (the G4 record is written into
the run the soak began in), the same --force, site and thresholds files, metrics port and
checklist run, all read back from the soak's stored plan.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from ..options import DEFAULTS, add_run_options
from ..store import DB_NAME, Store
from .liveness import Liveness, judge
from .runner import status
from .store import SoakStore

DEFAULT_OUT = DEFAULTS.out
STATUS_EXIT = ("exit codes: 0 running, finished, or ended with its G4 record written, 1 not "
               "running with windows left (resume it), 2 no such soak or no store")
RESUME_EXIT = ("exit codes: those of `kvgate run` (0 pass, 1 fail, 2 error, 3 blocked); 2 also "
               "when the soak is unknown or its runner is still alive")


def add_soak_commands(commands: argparse._SubParsersAction) -> None:
    """Register `soak status [RUN_ID]` and `soak resume RUN_ID`."""
    soak = commands.add_parser("soak", help="G4 soak: status and resume",
                               formatter_class=argparse.RawDescriptionHelpFormatter,
                               epilog="examples:\n  kvgate soak status\n"
                               "  kvgate soak resume 20261129T170000Z-3f9a1c")
    verbs = soak.add_subparsers(dest="soak_command", required=True)
    state = verbs.add_parser("status", help="progress, ETA, health and whether the runner is "
                             "alive", epilog=STATUS_EXIT)
    state.add_argument("run_id", nargs="?", default="", help="default: the newest soak")
    # Not the run's --out (a folder kvgate writes into): status only reads, so a store on a
    # read-only mount must do, and a folder without one is said to have none.
    state.add_argument("--out", type=store_folder, default=DEFAULT_OUT,
                       help="folder of the store to read (default: ./reports); only read, "
                       "never written")
    resume = verbs.add_parser(
        "resume", help="continue a soak from its last committed window (after a crash)",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=(
            "It continues the soak as it was started: in the same run (the G4 record goes into\n"
            "the run the soak began in, unless that run already has one), with the --force,\n"
            "site and thresholds files, metrics port and checklist run it started with.\n\n"
            + RESUME_EXIT))
    resume.add_argument("run_id")
    add_run_options(resume.add_argument, only=("site", "thresholds", "out"),
                    inherit=("site", "thresholds"), inherited_from="the one the soak started with")
    resume.add_argument("--force", action="store_true",
                        help="run past an upstream gate that did not pass (a soak started with "
                        "--force resumes forced without it)")


def store_folder(text: str) -> Path:
    """`soak status --out DIR`: a folder that exists; it need not be writable."""
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: " + ("not a folder" if path.exists() else
                                                        "no such folder")
                                          + ": give the folder of your reports")
    return path


def resume_command(run_id: str, out: Path) -> str:
    """The command line that resumes a soak stored under out."""
    where = "" if Path(out) == DEFAULT_OUT else f" --out {out}"
    return f"kvgate soak resume {run_id}{where}"


def liveness(soaks: SoakStore, run_id: str, out: Path) -> Liveness:
    """Whether the soak's runner is alive (finished soaks are finished)."""
    plan = soaks.plan(run_id)
    assert plan is not None
    done = len(soaks.windows(run_id)) >= plan.windows
    return judge(soaks.runner(run_id), plan.window, done, resume_command(run_id, out))


def ended(alive: Liveness, store: Store, run_id: str) -> Liveness:
    """A soak not running whose run holds its G4 record already (an ERROR) is over: no resume."""
    found = store.record(run_id, "g4")
    if found is None or alive.busy or alive.kind == "finished":
        return alive
    report = store.run_dir(run_id) / "g4.html"
    return Liveness(kind="ended", text=f"not running, and the soak has ended: its G4 record "
                    f"is written ({found[0].verdict.value}) with windows left, so its verdict "
                    f"stands ({report}); a new soak is `kvgate run g4`")


def _error(text: str) -> int:
    Console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {text}", highlight=False)
    return 2


def _status(args: argparse.Namespace, console: Console) -> int:
    with Store.reading(args.out) as store:  # a look: no store is created, none is written
        soaks = SoakStore(store)
        run_id = args.run_id or soaks.latest()
        plan = soaks.plan(run_id) if run_id else None
        if plan is None:
            console.print(f"no soak {run_id or ''} in {args.out / DB_NAME}".replace("  ", " "))
            return 2
        found = status(plan, soaks.windows(run_id), soaks.deviations(run_id))
        alive = ended(liveness(soaks, run_id, args.out), store, run_id)
    console.print(found.line(), highlight=False)
    colour = {"running": "green", "finished": "green", "ended": "yellow"}.get(alive.kind, "red")
    console.print(f"  runner: [{colour}]{alive.text}[/]", highlight=False)
    for signal, health in sorted(found.health.items()):
        console.print(f"  {signal}: {health}", highlight=False)
    return 0 if alive.kind in ("running", "finished", "ended") else 1


def _resume(args: argparse.Namespace, console: Console,
            run_gates: Callable[[argparse.Namespace, Console], int]) -> int:
    with Store.reading(args.out) as store:  # the run itself opens the store to write
        soaks = SoakStore(store)
        plan = soaks.plan(args.run_id)
        if plan is None:
            return _error(f"no soak {args.run_id} in {args.out / DB_NAME}")
        alive = liveness(soaks, args.run_id, args.out)
        has_record = store.record(args.run_id, "g4") is not None
    if alive.busy:
        return _error(f"soak {args.run_id} is {alive.text}; it cannot be resumed beside its "
                      "runner")
    if alive.kind == "finished" and has_record:
        console.print(f"soak {args.run_id} is finished and its G4 record is written: nothing "
                      "to resume", highlight=False)
        return 0
    began = plan.started_with
    for flag, given, kept in (("--site", args.site, began.site),
                              ("--thresholds", args.thresholds, began.thresholds)):
        if given is None and kept and not Path(kept).is_file():
            return _error(f"soak {args.run_id} started with {kept}, which is not there any "
                          f"more: name the file with {flag} FILE")
    forced = args.force or began.force
    # A record is never rewritten: with one in the soak's run, the record goes to a new run.
    run_id = "" if has_record else args.run_id
    console.print(f"resuming soak {args.run_id} "
                  + (f"in its own run {args.run_id}" if run_id else
                     f"in a new run ({args.run_id} already has its G4 record)")
                  + (", forced past the upstream gate as it was started" if began.force else
                     ", forced (--force)" if forced else ""), highlight=False)
    resumed = argparse.Namespace(
        gate="g4", out=args.out, run_id=run_id, soak_resume=args.run_id, force=forced,
        site=args.site or Path(began.site or "site.toml"),
        thresholds=args.thresholds or Path(began.thresholds or "thresholds.toml"),
        soak_metrics_port=began.metrics_port, checklist_id=began.checklist_id,
        pytest_args=args.pytest_args)
    return run_gates(resumed, console)


def soak_command(args: argparse.Namespace, console: Console,
                 run_gates: Callable[[argparse.Namespace, Console], int]) -> int:
    """`soak status` prints progress and the runner's state; `resume` continues through G4."""
    if args.soak_command == "resume":
        return _resume(args, console, run_gates)
    return _status(args, console)
