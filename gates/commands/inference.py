"""`kvgate loadgen` and `kvgate sim serve`: the inference instruments on the command line."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from fractions import Fraction
from pathlib import Path

import aiohttp
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table

from ..core.verdicts import RequestRecord
from ..inference import ColdRecovery, PhaseError, run_cold_recovery
from ..loadgen import (
    PROBE,
    Endpoint,
    LoadResult,
    LoadSettings,
    Plan,
    WorkloadError,
    run_phase,
    summarize,
    workload_hash,
)
from ..proof import AttributionError, PsutilDiskCounters
from ..sim import SERVE_HELP, add_serve_options, serve_command, serve_examples
from ..store import DB_NAME, Store, new_run_id
from .loadgen_checks import failures, first_model, percent, unmeasured
from .loadgen_options import add_loadgen_options, announce, build_plan, too_large

LOADGEN_EXAMPLES = """examples:
  kvgate sim serve --profile tiny --kv-dir /tmp/kv --port 8000        (in one terminal)
  kvgate loadgen --url http://127.0.0.1:8000 --workload cold-recovery --concurrency 8
  kvgate loadgen --url http://10.0.0.5:8000 --url http://10.0.0.6:8000 --model Qwen/Qwen3 \\
      --workload shared-prefix --rate 4 --json run.json
  kvgate loadgen --url http://127.0.0.1:8000 --workload trace --trace mooncake.jsonl \\
      --time-scale 0.5
exit codes: 0 ok, 1 more requests failed than --max-error-rate allows, 2 error or bad input
(no answer to the model lookup, no request succeeded, a phase could not run, the probe's
storage reads could not be measured: a scrape failed, a counter was not a count)
"""


def add_inference_commands(commands: argparse._SubParsersAction) -> None:
    """Register the loadgen and sim subcommands."""
    fmt = argparse.RawDescriptionHelpFormatter
    gen = commands.add_parser("loadgen", help="drive an OpenAI-compatible endpoint and report "
                              "TTFT/TPOT/ITL/throughput and storage-read attribution",
                              epilog=LOADGEN_EXAMPLES, formatter_class=fmt)
    add_loadgen_options(gen)

    sim = commands.add_parser("sim", help="the reference KV-offload engine simulator "
                              "(also standalone: python -m gates.sim)")
    sim_commands = sim.add_subparsers(dest="sim_command", required=True)
    # The options are the simulator's own (gates.sim.cli), so this and `python -m gates.sim`
    # cannot drift apart.
    run = sim_commands.add_parser("serve", help=SERVE_HELP,
                                  epilog=serve_examples("kvgate sim serve"), formatter_class=fmt)
    add_serve_options(run)


def sim_serve(args: argparse.Namespace) -> int:
    """Run the simulator until Ctrl-C (the same code as `python -m gates.sim`)."""
    return serve_command(args)


def _settings(args: argparse.Namespace) -> LoadSettings:
    timeouts = dict(stall_timeout=args.stall_timeout, request_timeout=args.request_timeout)
    if args.workload == "trace":
        return LoadSettings(mode="trace", seed=args.seed, **timeouts)
    if args.rate:
        return LoadSettings(mode="rate", rate=args.rate, arrival=args.arrival, seed=args.seed,
                            **timeouts)
    return LoadSettings(concurrency=args.concurrency, **timeouts)


async def _drive(args: argparse.Namespace, plan: Plan, endpoints: list[Endpoint],
                 progress: Progress, store: Store | None, run_id: str,
                 sent: list[RequestRecord]) -> dict:
    task = progress.add_task("requests", total=len(plan.requests))

    def tick(record: RequestRecord) -> None:
        sent.append(record)
        progress.advance(task)
        if store:
            store.add_request(run_id, record)

    settings = _settings(args)
    if args.workload == "cold-recovery":
        disks = PsutilDiskCounters() if args.device else None
        result = await run_cold_recovery(plan, endpoints, settings, engine=args.engine,
                                         eviction=args.evict, on_record=tick, disks=disks,
                                         devices=args.device)
        return {"probe": result.probe, "cold_recovery": result}
    turns = sorted({r.turn for r in plan.requests}) if args.workload == "multi-turn" else [None]
    records, wall, reconnects, notes = [], 0.0, 0, []
    for turn in turns:  # a session's turn k+1 extends turn k, so turns go in order
        batch = [r for r in plan.phase(PROBE) if turn is None or r.turn == turn]
        part = await run_phase(batch, endpoints, settings, tick)
        records += part.records
        wall += part.wall
        reconnects += part.self_check.reconnects
        notes += [n for n in part.self_check.notes if n not in notes]
    # The last turn's judgement, with every turn's reconnects and notes (said once each).
    check = part.self_check.model_copy(update={"reconnects": reconnects, "notes": notes})
    return {"probe": LoadResult(records=records, wall=wall, self_check=check)}


def _number(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:,.0f}" if abs(value) >= 1e4 or float(value).is_integer() else f"{value:,.4g}"


def _print(console: Console, result: dict) -> None:
    probe: LoadResult = result["probe"]
    summary = summarize(probe.records, probe.wall)
    table = Table(title="probe phase")
    for column in ("metric", "value", "unit"):
        table.add_column(column)
    for name, value, unit in summary.table_rows():
        if unit == "s" and value is not None:
            value, unit = value * 1e3, "ms"
        table.add_row(name, _number(value), unit)
    console.print(table)
    if "cold_recovery" in result:
        console.print(_storage_line(result["cold_recovery"]), markup=False, highlight=False)
    console.print("load generator self-check: " + probe.self_check.line(), markup=False,
                  highlight=False)


def _storage_line(cold: ColdRecovery) -> str:
    """What the probe read from storage, by the engine's counters."""
    tokens, read, gbps = cold.storage_read_tokens(), cold.storage_read_bytes(), cold.restore_gbps()
    # "—" is never left unexplained: an error is said at the end (exit 2), else it is not exposed.
    hidden = ("" if tokens is not None or unmeasured(cold) else
              f" (none of {cold.engine}'s storage-read counters is in its /metrics)")
    return (f"storage reads ({cold.engine}): {_number(tokens)} tokens of "
            f"{_number(cold.expected_kv_tokens)} expected{hidden}, {_number(read)} bytes; "
            f"effective restore {'—' if gbps is None else f'{gbps:.3f} GB/s'}; {cold.eviction}")


def _write_json(path: Path, result: dict) -> str:
    """Write the records and summary; why it could not be ("" once written)."""
    body = {k: json.loads(v.model_dump_json()) for k, v in result.items()}
    body["summary"] = json.loads(summarize(result["probe"].records,
                                           result["probe"].wall).model_dump_json())
    try:  # checked before the load (gates.options.output_file); a disk can still fill since
        path.write_text(json.dumps(body, indent=2))
    except OSError as exc:
        return f"--json {path}: cannot write it: {exc.strerror}"
    return ""


def _open_store(args: argparse.Namespace, plan: Plan) -> tuple[Store | None, str]:
    if not args.out:
        return None, ""
    store, run_id = Store(args.out), new_run_id()
    store.begin_run(run_id, "loadgen", argv=["loadgen", args.workload, workload_hash(plan)])
    return store, run_id


def loadgen(args: argparse.Namespace) -> int:
    """Run the workload, print the summary table, write JSON if asked; exit 1 on errors."""
    console, err = Console(soft_wrap=True), Console(stderr=True, soft_wrap=True)

    def refuse(text: str) -> int:
        err.print(f"[red]loadgen:[/] {escape(text)}", highlight=False)
        return 2

    key = os.environ.get(args.api_key_env) if args.api_key_env else None
    if args.api_key_env and not key:
        return refuse(f"--api-key-env {args.api_key_env}: that environment variable is not set "
                      "or is empty")
    if problem := too_large(args):
        return refuse(problem)
    sent: list[RequestRecord] = []
    try:
        plan, settings = build_plan(args), _settings(args)
        model = args.model or asyncio.run(first_model(args.url[0], key, settings))
        endpoints = [Endpoint(url=u, model=model, api=args.api, api_key=key) for u in args.url]
        store, run_id = _open_store(args, plan)
        console.print(escape(announce(args, plan)), highlight=False)
        with Progress(BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=Console(stderr=True)) as progress:
            result = asyncio.run(_drive(args, plan, endpoints, progress, store, run_id, sent))
    except (PhaseError, WorkloadError, AttributionError, OSError, aiohttp.ClientError) as exc:
        # A bare TimeoutError has no text: say at least what it was and whom it concerned.
        return refuse(str(exc) or f"{type(exc).__name__} talking to {', '.join(args.url)}")
    if store:
        console.print(f"requests stored in {store.out_dir / DB_NAME} under run {run_id}",
                      markup=False, highlight=False)
        store.close()
    _print(console, result)
    if args.json and (problem := _write_json(args.json, result)):
        return refuse(problem)
    return _exit_code(args, result, sent, console, refuse)


def _exit_code(args: argparse.Namespace, result: dict, sent: list[RequestRecord],
               console: Console, refuse) -> int:
    """2 when nothing was measured (no probe succeeded, or its storage reads could not be
    read), 1 when more requests failed than --max-error-rate allows, else 0."""
    rate, lines = failures(sent)
    for line in lines:
        console.print(line, markup=False, highlight=False)
    if not any(r.ok for r in result["probe"].records):
        return refuse("no probe request succeeded: nothing was measured")
    if "cold_recovery" in result and (problems := unmeasured(result["cold_recovery"])):
        return refuse("the probe's storage reads could not be measured: " + "; ".join(problems))
    limit: Fraction = args.max_error_rate
    if rate > limit:
        refuse(f"{percent(rate)} of the requests sent failed, above --max-error-rate "
               f"{percent(limit)}: FAIL")
        return 1
    return 0
