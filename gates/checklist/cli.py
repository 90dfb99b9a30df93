"""`kvgate checklist`: the on-site engineer's guided run through G1→G4 with manual items."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..core.configuration import ConfigError, load_config
from ..core.text import shown
from ..core.verdicts import EXIT_CODES, GATE_TITLES, GATES, Outcome
from ..options import DEFAULTS, add_run_options, input_file, plain_text
from ..store import DB_NAME, Store, new_run_id
from .items import (
    AnswersFile,
    Checklist,
    answer_problems,
    load_answers,
    load_checklist,
    parse_gates,
    tally,
)
from .run import (
    Asker,
    ChecklistFlow,
    FileAsker,
    GateRequest,
    GateRunner,
    PromptAsker,
    Stop,
    run_gate_subprocess,
)
from .store import ChecklistRun, ChecklistStore

DEFAULT_OUT = DEFAULTS.out
INTERRUPTED = 130  # the shell's code for Ctrl-C: nothing failed, the run is only paused
EXAMPLES = """examples:
  kvgate checklist                           G1→G4 with ./checklist.toml, asking at the terminal
  kvgate checklist --operator "A. Engineer" --gates g1
  kvgate checklist --answers answers.toml    no prompts: every answer comes from the file
  kvgate checklist --resume 20261129T170000Z-3f9a1c
                                             continue: earlier answers and passed gates are kept
  kvgate checklist -- -x                     pass extra arguments to pytest after --

answers file (TOML, or JSON when it ends in .json), item ids as in checklist.toml:
  operator = "A. Engineer"
  [answers]
  "g1.serials-match-po" = { answer = "pass", note = "PO 4711: all 4 serials match" }
  "g1.firmware-recorded" = "pass"            short for { answer = "pass" }

A manual item answered fail stops the run before that gate's suite; it stays on record, so
start a new checklist for the remaining gates once the cause is fixed.

exit codes: 0 every gate passed, 1 a gate or a manual item failed (or marginal),
2 error or bad input, 3 blocked, 130 interrupted (continue with --resume)"""


def add_checklist_commands(commands: argparse._SubParsersAction) -> None:
    """Register `checklist`."""
    p = commands.add_parser(
        "checklist", help="the on-site engineer's guided run: manual items, then each gate",
        description="Ask each gate's manual items (pass / fail / n.a. with a note), then run\n"
        "its automated suite with live output, G1→G4, stopping at the first gate that does\n"
        "not pass. Every answer is stored the moment it is given and goes into the reports.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checklist", type=input_file, default=None,
                   help="checklist file (default: ./checklist.toml, or the resumed run's)")
    add_run_options(p.add_argument, only=("site", "thresholds", "out"),
                    inherit=("site", "thresholds"),
                    inherited_from="{default}, or the resumed run's")
    p.add_argument("--operator", default="", type=plain_text,
                   help="your name for the reports (default: asked)")
    p.add_argument("--answers", type=input_file, default=None, metavar="FILE",
                   help="answer every item from this file: no prompts at all")
    p.add_argument("--resume", default="", metavar="CHECKLIST_ID",
                   help="continue a checklist run: keep its answers, skip its passed gates")
    p.add_argument("--gates", default="", metavar="g1,g2,...",
                   help="the gates to take, in chain order (default: all, or the resumed run's)")


@dataclass
class Plan:
    """A checklist run ready to start: files loaded and checked, nothing written yet."""

    checklist: Checklist
    run: ChecklistRun
    given: AnswersFile | None
    resumed: bool


def _earlier(args: argparse.Namespace) -> ChecklistRun | None:
    if not args.resume:
        return None
    if not (args.out / DB_NAME).is_file():
        raise ValueError(f"--resume {args.resume}: no store {args.out / DB_NAME} (give --out)")
    with Store(args.out) as store:
        answers = ChecklistStore(store)
        found = answers.run(args.resume)
        if found is None:
            known = ", ".join(answers.latest_ids()) or "none"
            raise ValueError(f"--resume: no checklist run {args.resume} in "
                             f"{args.out / DB_NAME} (newest: {known})")
    return found


def _answered(args: argparse.Namespace) -> set[str]:
    if not args.resume:
        return set()
    with Store(args.out) as store:
        return {a.item_id for a in ChecklistStore(store).answers(args.resume)}


def plan(args: argparse.Namespace, can_prompt: bool) -> Plan:
    """Load and check every input before anything runs; ConfigError or ValueError if unusable."""
    earlier = _earlier(args)
    checklist_path = args.checklist or Path(earlier.checklist if earlier else "checklist.toml")
    site = args.site or Path(earlier.site if earlier else "site.toml")
    thresholds = args.thresholds or Path(earlier.thresholds if earlier else "thresholds.toml")
    gates = parse_gates(args.gates) if args.gates else (earlier.gates if earlier else list(GATES))
    checklist, sha = load_checklist(checklist_path)
    load_config(site, thresholds)
    given = load_answers(args.answers) if args.answers else None
    if given is not None:
        problems = answer_problems(checklist, given, gates, _answered(args))
        if problems:
            raise ConfigError(args.answers, problems)
    elif not can_prompt:
        raise ValueError("standard input is not a terminal, so nobody can answer the manual "
                         "items: give --answers FILE for a run without prompts")
    run = ChecklistRun(checklist_id=args.resume or new_run_id(), checklist=str(checklist_path),
                       checklist_sha256=sha, checklist_revision=checklist.meta.revision,
                       site=str(site), thresholds=str(thresholds), gates=gates,
                       operator=earlier.operator if earlier else "")
    return Plan(checklist, run, given, resumed=earlier is not None)


def resume_command(args: argparse.Namespace, checklist_id: str) -> str:
    """The command that continues this checklist run."""
    return (f"kvgate checklist --resume {checklist_id}"
            + (f" --out {args.out}" if args.out != DEFAULT_OUT else "")
            + (f" --answers {args.answers}" if args.answers else ""))


def restart_command(args: argparse.Namespace, run: ChecklistRun, gate: str) -> str:
    """The command that starts a new checklist run at this gate, with the same files."""
    files = [("--checklist", run.checklist, "checklist.toml"), ("--site", run.site, "site.toml"),
             ("--thresholds", run.thresholds, "thresholds.toml"),
             ("--out", str(args.out), str(DEFAULT_OUT))]
    return (f"kvgate checklist --gates {','.join(run.gates[run.gates.index(gate):])}"
            + "".join(f" {flag} {value}" for flag, value, default in files if value != default))


def what_to_do(stop: Stop, resume: str, restart: str) -> list[str]:
    """What the engineer reads and does after the run stopped at a gate."""
    name = GATE_TITLES[stop.gate]
    if stop.attempt is None:
        return [f"{name}: stopped before its automated suite; manual item(s) answered fail:",
                *(f"  {a.item_id}: {a.text} — {a.note or 'no note'} ({a.operator}, "
                  f"{a.answered_at})" for a in stop.failed),
                "A failed manual check stays on record in this checklist run (answers are "
                "never overwritten). Fix the cause (or agree a written deviation with the "
                "buyer), then start a new checklist run for the remaining gates:",
                f"  {restart}"]
    attempt = stop.attempt
    report = attempt.report or "the suite's output above"
    advice = {
        Outcome.BLOCKED: "its upstream gate has no passing record for this site: pass that "
                         "gate first (its report says why it did not)",
        Outcome.ERROR: "it could not measure: each ERROR row of the report says why "
                       "(a missing tool, an unreachable target, a configuration problem)",
    }.get(attempt.verdict, "failures are listed first in the report, with value, limit and "
          "margin: fix the cause, or agree a waiver")
    return [f"{name}: {attempt.verdict.value} (run {attempt.run_id}). {advice}.",
            *([f"  {attempt.note}"] if attempt.note else []),
            f"Read: {report}",
            f"Then re-run {stop.gate.upper()} and go on with: {resume}"]


def summary(store: ChecklistStore, run: ChecklistRun, stop: Stop | None) -> Table:
    """Per gate: the manual items' tally, the automated verdict and the report."""
    attempts = {a.gate: a for a in store.attempts(run.checklist_id)}
    table = Table(title=f"kvgate checklist {escape(run.checklist_id)}")
    for column in ("gate", "manual items", "automated verdict", "report"):
        table.add_column(column)
    for gate in run.gates:
        attempt = attempts.get(gate)
        manual_stop = stop is not None and stop.gate == gate and stop.attempt is None
        verdict = ("not run: manual item failed" if manual_stop else
                   attempt.verdict.value if attempt else "not run")
        table.add_row(GATE_TITLES[gate], tally(store.answers(run.checklist_id, gate)), verdict,
                      escape(attempt.report) if attempt else "")  # a path, as given
    return table


def execute(args: argparse.Namespace, ready: Plan, asker: Asker, run_gate: GateRunner,
            console: Console) -> int:
    """Run the planned checklist; every answer and gate run is stored as it happens."""
    run = ready.run
    console.print(f"checklist run [bold]{escape(run.checklist_id)}[/] ({escape(run.checklist)}, "
                  f"revision {escape(run.checklist_revision)}); gates {', '.join(run.gates)}",
                  highlight=False)
    try:
        operator = args.operator or asker.operator(run.operator)
    except (KeyboardInterrupt, EOFError):
        console.print("\n[yellow]interrupted[/] before the first answer: nothing was stored")
        return INTERRUPTED
    with Store(args.out) as store:
        answers = ChecklistStore(store)
        if not ready.resumed:
            answers.begin(run.model_copy(update={"operator": operator}))
        template = GateRequest("", "", run.checklist_id, Path(run.site), Path(run.thresholds),
                               args.out, list(getattr(args, "pytest_args", [])))
        flow = ChecklistFlow(ready.checklist, answers, run, asker, run_gate, console, template,
                             operator=operator, new_run_id=new_run_id)
        try:
            stop = flow.run_all(run.gates)
        except (KeyboardInterrupt, EOFError):
            console.print("\n[yellow]interrupted[/]: every answer given so far is stored. "
                          f"Continue with:\n  {escape(resume_command(args, run.checklist_id))}",
                          highlight=False)
            return INTERRUPTED
        console.print(summary(answers, run, stop))
    if stop is None:
        console.print("[green]every gate passed[/]")
        return 0
    for line in what_to_do(stop, resume_command(args, run.checklist_id),
                           restart_command(args, run, stop.gate)):
        console.print(shown(line), highlight=False, markup=False)  # names, notes typed
    return stop.exit_code


def checklist_command(args: argparse.Namespace, asker: Asker | None = None,
                      run_gate: GateRunner = run_gate_subprocess,
                      console: Console | None = None) -> int:
    """`kvgate checklist`: exit 0 when every gate passed, else the first failing gate's code."""
    console = console or Console(soft_wrap=True)
    try:
        ready = plan(args, can_prompt=asker is not None or sys.stdin.isatty())
    except (ConfigError, ValueError) as exc:
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {escape(str(exc))}",
                                                   highlight=False)
        return EXIT_CODES[Outcome.ERROR]
    asker = asker or (FileAsker(ready.given) if ready.given else PromptAsker(console))
    return execute(args, ready, asker, run_gate, console)


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point: `python -m gates.checklist.cli checklist …`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(prog="kvgate")
    add_checklist_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv[:split])
    args.pytest_args = argv[split + 1:]
    return checklist_command(args)


if __name__ == "__main__":
    sys.exit(main())
