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

from ..core import RequestRecord
from ..inference import PhaseError, run_cold_recovery
from ..loadgen import (
    PROBE,
    RESERVED,
    SEED,
    WARMUP,
    Endpoint,
    LoadResult,
    LoadSettings,
    Plan,
    WorkloadError,
    cold_recovery,
    mooncake_replay,
    multi_turn,
    run_phase,
    shared_prefix,
    summarize,
    workload_hash,
)
from ..proof import AttributionError, PsutilDiskCounters
from ..sim import SERVE_HELP, add_serve_options, serve_command, serve_examples
from ..store import DB_NAME, Store, new_run_id
from .loadgen_checks import (
    base_url,
    error_rate,
    failures,
    first_model,
    percent,
    positive,
    positive_number,
    vocab_size,
)

LOADGEN_EXAMPLES = """examples:
  kvgate sim serve --profile tiny --kv-dir /tmp/kv --port 8000        (in one terminal)
  kvgate loadgen --url http://127.0.0.1:8000 --workload cold-recovery --concurrency 8
  kvgate loadgen --url http://10.0.0.5:8000 --url http://10.0.0.6:8000 --model Qwen/Qwen3 \\
      --workload shared-prefix --rate 4 --json run.json
  kvgate loadgen --url http://127.0.0.1:8000 --workload trace --trace mooncake.jsonl \\
      --time-scale 0.5
exit codes: 0 ok, 1 more requests failed than --max-error-rate allows, 2 error or bad input
(no answer to the model lookup, no request succeeded, a phase could not run)
"""
GROUP, TURNS = 4, 4  # shared-prefix requests per group, multi-turn turns per session


def add_inference_commands(commands: argparse._SubParsersAction) -> None:
    """Register the loadgen and sim subcommands."""
    fmt = argparse.RawDescriptionHelpFormatter
    gen = commands.add_parser("loadgen", help="drive an OpenAI-compatible endpoint and report "
                              "TTFT/TPOT/ITL/throughput and storage-read attribution",
                              epilog=LOADGEN_EXAMPLES, formatter_class=fmt)
    gen.add_argument("--url", action="append", required=True, type=base_url,
                     help="base URL of an endpoint (repeat for several instances)")
    gen.add_argument("--model", default="", help="model name (default: the first in /v1/models)")
    gen.add_argument("--api", choices=["completions", "chat"], default="completions")
    gen.add_argument("--api-key-env", default="", help="environment variable holding the key")
    gen.add_argument("--workload", choices=["cold-recovery", "shared-prefix", "multi-turn",
                                            "trace"], default="cold-recovery")
    gen.add_argument("--trace", type=Path, help="Mooncake trace (JSONL) for --workload trace")
    gen.add_argument("--time-scale", type=float, default=1.0, help="trace time factor")
    gen.add_argument("--concurrency", type=positive, default=8, help="closed loop (default 8)")
    gen.add_argument("--rate", type=positive_number,
                     help="open loop: requests per second instead")
    gen.add_argument("--arrival", choices=["poisson", "constant"], default="poisson")
    gen.add_argument("--requests", type=positive, default=16,
                     help="contexts (cold-recovery), sessions of 4 turns (multi-turn), requests "
                     "(shared-prefix: exactly this many, in groups of 4), trace lines at most")
    gen.add_argument("--context-tokens", type=int, default=4096)
    gen.add_argument("--question-tokens", type=int, default=64)
    gen.add_argument("--output-tokens", type=int, default=32)
    gen.add_argument("--chunk-tokens", type=int, default=256, help="KV chunk size of the tier")
    gen.add_argument("--vocab", type=vocab_size, default=32000,
                     help=f"token ids are drawn from {RESERVED} up to this (default 32000)")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--engine", default="auto", help="metrics adapter (default: detect)")
    gen.add_argument("--evict", choices=["reset", "flood", "none"], default="reset")
    gen.add_argument("--stall-timeout", type=positive_number, default=60.0,
                     help="seconds without a byte (connect, headers, stream) before a request "
                     "or the model lookup times out (default 60)")
    gen.add_argument("--request-timeout", type=positive_number, default=None,
                     help="seconds a whole request may take (default: unbounded)")
    gen.add_argument("--max-error-rate", type=error_rate, default=Fraction(0),
                     help="failed requests allowed, a fraction (0.05) or a percentage (5%%) of "
                     "every request sent; above it the run exits 1 (default 0: any failure)")
    gen.add_argument("--json", type=Path, help="write the records and summary here")
    gen.add_argument("--out", type=Path, help="also stream every request into the store here "
                     "(kvgate.sqlite), as it finishes")
    gen.add_argument("--device", action="append", default=[],
                     help="block device holding the KV tier (e.g. nvme0n1; repeatable): its "
                     "read bytes during the probe are reported")

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


def build_plan(args: argparse.Namespace) -> Plan:
    """The workload the arguments describe, deterministic from --seed."""
    n, seed, vocab, out = args.requests, args.seed, args.vocab, args.output_tokens
    if args.workload == "cold-recovery":
        return cold_recovery(n, args.context_tokens, args.question_tokens, out, seed, vocab,
                             chunk_tokens=args.chunk_tokens)
    if args.workload == "shared-prefix":  # exactly n: the last group holds what is left
        return shared_prefix(-(-n // GROUP), GROUP, args.context_tokens, args.question_tokens,
                             out, seed, vocab, total=n)
    if args.workload == "multi-turn":
        return multi_turn(n, TURNS, args.context_tokens, args.question_tokens, out, seed, vocab)
    if args.trace is None:
        raise WorkloadError("--workload trace needs --trace FILE")
    return mooncake_replay(args.trace.read_text(), seed, vocab, time_scale=args.time_scale,
                           max_requests=n)


def announce(args: argparse.Namespace, plan: Plan) -> str:
    """What will be sent, said before sending: the workload's shape may not be --requests."""
    n = len(plan.phase(PROBE))
    if args.workload == "cold-recovery":
        return (f"sending {n} probe requests, one per context, after "
                f"{len(plan.phase(WARMUP))} warm-up and {len(plan.phase(SEED))} seed requests")
    if args.workload == "shared-prefix":
        groups = plan.params["groups"]
        last = n - GROUP * (groups - 1)
        return (f"sending {n} requests: {groups} groups of {GROUP} sharing a "
                f"{args.context_tokens}-token prefix" + (f", the last of {last}"
                                                          if last != GROUP else ""))
    if args.workload == "multi-turn":
        return f"sending {n} requests: {args.requests} sessions x {TURNS} turns"
    short = f", not {args.requests}: the trace has no more" if n < args.requests else ""
    return f"sending {n} requests from {args.trace}{short}"


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
        cold = result["cold_recovery"]
        read, gbps = cold.storage_read_bytes(), cold.restore_gbps()
        console.print(f"storage reads ({cold.engine}): {_number(cold.storage_read_tokens())} "
                      f"tokens of {_number(cold.expected_kv_tokens)} expected, "
                      f"{_number(read)} bytes; effective restore "
                      f"{'—' if gbps is None else f'{gbps:.3f} GB/s'}; {cold.eviction}")
    console.print("load generator self-check: " + probe.self_check.line())


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
        console.print(f"requests stored in {store.out_dir / DB_NAME} under run {run_id}")
        store.close()
    _print(console, result)
    if args.json:
        body = {k: json.loads(v.model_dump_json()) for k, v in result.items()}
        body["summary"] = json.loads(summarize(result["probe"].records,
                                               result["probe"].wall).model_dump_json())
        args.json.write_text(json.dumps(body, indent=2))
    rate, lines = failures(sent)
    for line in lines:
        console.print(escape(line), highlight=False)
    if not any(r.ok for r in result["probe"].records):
        return refuse("no probe request succeeded: nothing was measured")
    limit: Fraction = args.max_error_rate
    if rate > limit:
        err.print(f"[red]loadgen:[/] {percent(rate)} of the requests sent failed, above "
                  f"--max-error-rate {percent(limit)}: FAIL", highlight=False)
        return 1
    return 0
