"""The kvgate command line: run gates through the same pytest suites, check configuration."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import __version__
from .checklist import add_checklist_commands, checklist_command, unknown_checklist
from .commands import (
    add_bundle_commands,
    add_compare_commands,
    add_engine_commands,
    add_inference_commands,
    add_key_commands,
    add_model_commands,
    add_proof_commands,
    add_verify_commands,
    add_waive_commands,
    bundle_command,
    compare_command,
    config_check,
    engine_command,
    inventory_command,
    key_command,
    loadgen,
    model_command,
    proof_command,
    say_embedded,
    sim_serve,
    verify_command,
    waive_command,
)
from .core.configuration import ConfigError, shipped
from .core.verdicts import EXIT_CODES, GATE_TITLES, GATES, INCOMPLETE, GateRecord, Outcome
from .engines import run_engine
from .options import RunConfig, RunOptions, add_run_options, input_file
from .plugin import PresetRun
from .soak import add_soak_commands, soak_command
from .store import BundleError, Store, StoreError, new_run_id, write_bundle
from .sweep import add_sweep_commands, sweep_command

EXIT_TEXT = "exit codes: 0 pass, 1 fail (or marginal), 2 error or bad input, 3 blocked"

EXAMPLES = """examples:
  kvgate run g1                          G1 on ./site.toml, reports under ./reports/<run>/
  kvgate run all                         every gate that has a suite, in order
  kvgate run g1 --site examples/vllm-lmcache.toml --out /data/kvgate-reports
  kvgate run g2 --force                  run G2 although G1 did not pass (reported in red)
  kvgate run g1 -- -k seq_read           pass extra arguments to pytest after -- (a gate
                                         run in part is INCOMPLETE: ERROR)
  kvgate config check                    validate site.toml and thresholds.toml, print them
  kvgate checklist --operator "A. Engineer"   guided on-site run: manual items, then each gate
  kvgate bundle RUN_ID && kvgate verify reports/RUN_ID.bundle.tar.gz
  kvgate compare RUN_A=FX100 RUN_B=FX300 candidate arrays side by side, ranked where
                                         their G3 intervals allow
  kvgate waive RUN_ID "limits changed since G2" --reason "…" --by "J. Reviewer"
"""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser, with examples in --help."""
    parser = argparse.ArgumentParser(
        prog="kvgate", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Gate-based acceptance of storage as an LLM KV-cache offload tier.",
        epilog=EXAMPLES + "\n" + EXIT_TEXT)
    parser.add_argument("--version", action="version", version=f"kvgate {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run one gate, or all of them in order",
                              formatter_class=argparse.RawDescriptionHelpFormatter,
                              epilog=EXAMPLES + "\n" + EXIT_TEXT)
    run.add_argument("gate", choices=[*GATES, "all"], help="g1 … g4, or all")
    add_run_options(run.add_argument, skip={"soak_resume"})

    config = commands.add_parser("config", help="configuration commands")
    config_commands = config.add_subparsers(dest="config_command", required=True)
    check = config_commands.add_parser(
        "check", help="validate site.toml and thresholds.toml and print the resolved values",
        epilog="examples:\n  kvgate config check\n  kvgate config check --site "
               "examples/vllm-lmcache.toml",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_options(check.add_argument, only={"site", "thresholds"})
    add_soak_commands(commands)
    add_verify_commands(commands)
    add_waive_commands(commands)
    add_key_commands(commands)
    commands.add_parser("schema", help="print the JSON Schema of the gate record JSON files",
                        epilog="example:\n  kvgate schema > gate-record.schema.json",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    inventory = commands.add_parser(
        "inventory", help="collect and print the site inventory (RAID, filesystem, NVMe, NICs)",
        epilog="examples:\n  kvgate inventory\n  kvgate inventory --site my-site.toml --json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    inventory.add_argument("--site", type=input_file, default=Path("site.toml"),
                           help="site file (default: ./site.toml)")
    inventory.add_argument("--json", action="store_true", help="machine-readable output")
    add_inference_commands(commands)
    add_model_commands(commands)
    add_bundle_commands(commands)
    add_compare_commands(commands)
    add_checklist_commands(commands)
    add_engine_commands(commands)
    add_proof_commands(commands)
    add_sweep_commands(commands)
    return parser


def suites_for(gate: str) -> list[Path]:
    """The suite files of a gate, e.g. suites/test_g1_arrival.py and test_g1_config.py."""
    return sorted(shipped("suites").glob(f"test_{gate}_*.py"))


def summary_exit_code(records: list[GateRecord], requested: list[str] | None = None) -> int:
    """Exit code of a run: the first gate, in chain order, that did not pass decides.

    Every requested gate counts: one that wrote no record could not be measured (ERROR).
    """
    by_gate = {r.gate: r for r in records}
    for gate in sorted(by_gate if requested is None else requested):
        record = by_gate.get(gate)
        if record is None or record.verdict is not Outcome.PASS:
            return EXIT_CODES[record.verdict if record else Outcome.ERROR]
    return 0 if records else EXIT_CODES[Outcome.ERROR]


def print_summary(records: list[GateRecord], out: Path, console: Console) -> None:
    """A table of gate verdicts, then where their reports are, one whole path a line.

    The table's cells wrap at words at any width; a path is one word, so it goes below the
    table, where neither a narrow terminal nor a log file (80 columns) cuts it."""
    table = Table(title="kvgate results")
    for column in ("gate", "verdict", "measurements"):
        table.add_column(column, overflow="fold")
    for r in records:
        counts = ", ".join(f"{n} {o}" for o, n in r.counts().items())
        incomplete = any(m.note.startswith(INCOMPLETE) for m in r.measurements)
        table.add_row(r.title, r.verdict.value + (f" ({INCOMPLETE})" if incomplete else ""),
                      counts)
    console.print(table)
    for r in records:
        console.print(f"{r.gate.upper() + ' report':>20}: {out / r.run_id / f'{r.gate}.html'}",
                      highlight=False, markup=False)


def run_gates(args: argparse.Namespace, console: Console) -> int:
    """Run the chosen gates through pytest in one session, then report from the store."""
    import pytest

    options = RunOptions.from_namespace(args)
    if options.checklist_id and (problem := unknown_checklist(options.out, options.checklist_id)):
        console.print(f"[red]error:[/] {escape(problem)}", highlight=False)
        return EXIT_CODES[Outcome.ERROR]
    options.run_id = options.run_id or new_run_id()
    config = RunConfig.load(options)  # validated once, before pytest, and handed to the session
    wanted = list(GATES) if args.gate == "all" else [args.gate]
    engine = run_engine(config)  # chosen once, said first, handed to the session
    if {"g2", "g3"} & set(wanted):
        console.print(engine.headline(), highlight=False, markup=False)
    say_embedded(config, console)
    suites = {g: suites_for(g) for g in wanted}
    for gate in [g for g, s in suites.items() if not s]:
        console.print(f"[yellow]{GATE_TITLES[gate]}: no suite in kvgate {__version__} yet[/]")
    runnable = [g for g in wanted if suites[g]]
    if not runnable:
        return EXIT_CODES[Outcome.ERROR]
    html = options.out / "pytest-html" / f"{options.run_id}.html"
    argv = [*(str(path) for g in runnable for path in suites[g]), "-m", " or ".join(runnable),
            "--rootdir", str(shipped("suites").parent), "-p", "no:cacheprovider", "-q",
            # A gate run is not a test run: hypothesis' plugin (installed with the test extras)
            # costs a second at every exit, and the suites' asserts need no rewriting.
            "-p", "no:hypothesispytest", "--assert=plain",
            "--html", str(html), "--self-contained-html", *args.pytest_args]
    code = pytest.main(argv, plugins=[PresetRun(options, config, runnable, engine)])
    return report_run(options.out, options.run_id, runnable, int(code), console)


def report_run(out: Path, run_id: str, runnable: list[str], pytest_code: int,
               console: Console) -> int:
    """The run's verdicts and where its outputs are, from the store; the run's exit code."""
    with Store(out) as store:
        records = store.records(run_id)
    print_summary(records, out, console)
    absent = sorted(set(runnable) - {r.gate for r in records})
    if absent:
        console.print(f"[red]no record was written for {', '.join(g.upper() for g in absent)} "
                      f"(pytest exit code {pytest_code})[/]")
    if records:
        print_outputs(out, run_id, console)
    return summary_exit_code(records, runnable)


def print_outputs(out: Path, run_id: str, console: Console) -> None:
    """Bundle the run and say where every output of it is."""
    folder = out / run_id
    lines = [("reports", f"{folder}/ (each gate's .html with its .json)"),
             ("procurement summary", str(folder / "summary.html")),
             ("pytest-html", str(out / "pytest-html" / f"{run_id}.html"))]
    try:
        bundle = write_bundle(out, run_id)
        lines.append(("evidence bundle", f"{bundle} (check: kvgate verify {bundle})"))
    except (BundleError, ValueError, OSError) as exc:
        lines.append(("evidence bundle", f"not written: {exc}"))
    for label, where in lines:
        console.print(f"{label:>20}: {where}", highlight=False, markup=False)


def record_schema() -> dict:
    """JSON Schema of <gate>.json: the GateRecord plus the two keys written beside it."""
    schema = GateRecord.model_json_schema(mode="serialization")
    schema["properties"]["decision_rule"] = {"type": "string",
                                             "description": "the rule in words"}
    schema["properties"]["record_sha256"] = {
        "type": "string", "description": "SHA-256 of the record without these two keys"}
    schema["required"] = sorted({*schema.get("required", []), "decision_rule",
                                 "record_sha256", "verdict"})
    schema["$id"] = f"urn:kvgate:gate-record:{__version__}"
    return schema


# The commands that take their arguments alone.
VERBS = {"engine": engine_command, "checklist": checklist_command, "proof": proof_command,
         "bundle": bundle_command, "compare": compare_command, "verify": verify_command,
         "waive": waive_command, "key": key_command, "model": model_command, "loadgen": loadgen,
         "sim": sim_serve}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `kvgate` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after a bare "--" goes to pytest untouched.
    split = argv.index("--") if "--" in argv else len(argv)
    args = build_parser().parse_args(argv[:split])
    args.pytest_args = argv[split + 1:]
    console = Console(soft_wrap=True)
    try:
        if args.command == "config":
            return config_check(args, console)
        if args.command == "schema":
            print(json.dumps(record_schema(), indent=2))
            return 0
        if args.command in VERBS:
            return VERBS[args.command](args)
        if args.command == "soak":
            return soak_command(args, console, run_gates)
        if args.command == "sweep":
            return sweep_command(args, console, say_embedded)
        if args.command == "inventory":
            return inventory_command(args.site, args.json)
        return run_gates(args, console)
    except ConfigError as exc:
        # The message is text, not markup: "[profiles]" and "[site]" must reach the user.
        Console(stderr=True, soft_wrap=True).print(f"[red]configuration error:[/] "
                                                   f"{escape(str(exc))}", highlight=False)
        return EXIT_CODES[Outcome.ERROR]
    except StoreError as exc:  # its message names the store file, the cause and what to do
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {escape(str(exc))}",
                                                   highlight=False)
        return EXIT_CODES[Outcome.ERROR]


if __name__ == "__main__":
    sys.exit(main())
