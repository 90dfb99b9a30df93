"""`kvgate loadgen` and `kvgate sim serve`: the inference instruments on the command line."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path

import aiohttp
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table

from ..core import RequestRecord
from ..inference import (
    PROBE,
    AttributionError,
    Endpoint,
    LoadResult,
    LoadSettings,
    PhaseError,
    Plan,
    PsutilDiskCounters,
    WorkloadError,
    cold_recovery,
    mooncake_replay,
    multi_turn,
    run_cold_recovery,
    run_phase,
    shared_prefix,
    summarize,
    workload_hash,
)
from ..sim import SERVE_HELP, add_serve_options, serve_command, serve_examples
from ..store import DB_NAME, Store, new_run_id

LOADGEN_EXAMPLES = """examples:
  kvgate sim serve --profile tiny --kv-dir /tmp/kv --port 8000        (in one terminal)
  kvgate loadgen --url http://127.0.0.1:8000 --workload cold-recovery --concurrency 8
  kvgate loadgen --url http://10.0.0.5:8000 --url http://10.0.0.6:8000 --model Qwen/Qwen3 \\
      --workload shared-prefix --rate 4 --json run.json
  kvgate loadgen --url http://127.0.0.1:8000 --workload trace --trace mooncake.jsonl \\
      --time-scale 0.5
"""


def add_inference_commands(commands: argparse._SubParsersAction) -> None:
    """Register the loadgen and sim subcommands."""
    fmt = argparse.RawDescriptionHelpFormatter
    gen = commands.add_parser("loadgen", help="drive an OpenAI-compatible endpoint and report "
                              "TTFT/TPOT/ITL/throughput and storage-read attribution",
                              epilog=LOADGEN_EXAMPLES, formatter_class=fmt)
    gen.add_argument("--url", action="append", required=True,
                     help="base URL of an endpoint (repeat for several instances)")
    gen.add_argument("--model", default="", help="model name (default: the first in /v1/models)")
    gen.add_argument("--api", choices=["completions", "chat"], default="completions")
    gen.add_argument("--api-key-env", default="", help="environment variable holding the key")
    gen.add_argument("--workload", choices=["cold-recovery", "shared-prefix", "multi-turn",
                                            "trace"], default="cold-recovery")
    gen.add_argument("--trace", type=Path, help="Mooncake trace (JSONL) for --workload trace")
    gen.add_argument("--time-scale", type=float, default=1.0, help="trace time factor")
    gen.add_argument("--concurrency", type=int, default=8, help="closed loop (default 8)")
    gen.add_argument("--rate", type=float, help="open loop: requests per second instead")
    gen.add_argument("--arrival", choices=["poisson", "constant"], default="poisson")
    gen.add_argument("--requests", type=int, default=16, help="contexts / sessions / requests")
    gen.add_argument("--context-tokens", type=int, default=4096)
    gen.add_argument("--question-tokens", type=int, default=64)
    gen.add_argument("--output-tokens", type=int, default=32)
    gen.add_argument("--chunk-tokens", type=int, default=256, help="KV chunk size of the tier")
    gen.add_argument("--vocab", type=int, default=32000, help="token ids are drawn below this")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--engine", default="auto", help="metrics adapter (default: detect)")
    gen.add_argument("--evict", choices=["reset", "flood", "none"], default="reset")
    gen.add_argument("--stall-timeout", type=float, default=60.0)
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
    if args.workload == "shared-prefix":
        return shared_prefix(max(1, n // 4), 4, args.context_tokens, args.question_tokens, out,
                             seed, vocab)
    if args.workload == "multi-turn":
        return multi_turn(n, 4, args.context_tokens, args.question_tokens, out, seed, vocab)
    if args.trace is None:
        raise WorkloadError("--workload trace needs --trace FILE")
    return mooncake_replay(args.trace.read_text(), seed, vocab, time_scale=args.time_scale,
                           max_requests=n)


async def _first_model(url: str) -> str:
    async with aiohttp.ClientSession() as session, session.get(
            url.rstrip("/") + "/v1/models", timeout=aiohttp.ClientTimeout(total=30)) as r:
        data = await r.json()
        return data["data"][0]["id"]


def _settings(args: argparse.Namespace) -> LoadSettings:
    if args.workload == "trace":
        return LoadSettings(mode="trace", seed=args.seed, stall_timeout=args.stall_timeout)
    if args.rate:
        return LoadSettings(mode="rate", rate=args.rate, arrival=args.arrival, seed=args.seed,
                            stall_timeout=args.stall_timeout)
    return LoadSettings(concurrency=args.concurrency, stall_timeout=args.stall_timeout)


async def _drive(args: argparse.Namespace, plan: Plan, endpoints: list[Endpoint],
                 progress: Progress, store: Store | None, run_id: str) -> dict:
    task = progress.add_task("requests", total=len(plan.requests))

    def tick(record: RequestRecord) -> None:
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
    records, wall = [], 0.0
    for turn in turns:  # a session's turn k+1 extends turn k, so turns go in order
        batch = [r for r in plan.phase(PROBE) if turn is None or r.turn == turn]
        part = await run_phase(batch, endpoints, settings, tick)
        records += part.records
        wall += part.wall
    return {"probe": LoadResult(records=records, wall=wall, self_check=part.self_check)}


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
    check = probe.self_check
    console.print("load generator self-check: " + ("fit for a gate" if check.fit else
                                                    "UNFIT: " + "; ".join(check.reasons)))


def _open_store(args: argparse.Namespace, plan: Plan) -> tuple[Store | None, str]:
    if not args.out:
        return None, ""
    store, run_id = Store(args.out), new_run_id()
    store.begin_run(run_id, "loadgen", argv=["loadgen", args.workload, workload_hash(plan)])
    return store, run_id


def loadgen(args: argparse.Namespace) -> int:
    """Run the workload, print the summary table, write JSON if asked."""
    console = Console(soft_wrap=True)
    key = os.environ.get(args.api_key_env) if args.api_key_env else None
    try:
        plan = build_plan(args)
        model = args.model or asyncio.run(_first_model(args.url[0]))
        endpoints = [Endpoint(url=u, model=model, api=args.api, api_key=key) for u in args.url]
        store, run_id = _open_store(args, plan)
        with Progress(BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=Console(stderr=True)) as progress:
            result = asyncio.run(_drive(args, plan, endpoints, progress, store, run_id))
    except (PhaseError, WorkloadError, AttributionError, OSError, aiohttp.ClientError) as exc:
        Console(stderr=True).print(f"[red]loadgen:[/] {exc}", highlight=False)
        return 2
    if store:
        console.print(f"requests stored in {store.out_dir / DB_NAME} under run {run_id}")
        store.close()
    _print(console, result)
    if args.json:
        body = {k: json.loads(v.model_dump_json()) for k, v in result.items()}
        body["summary"] = json.loads(summarize(result["probe"].records,
                                               result["probe"].wall).model_dump_json())
        args.json.write_text(json.dumps(body, indent=2))
    return 0 if any(r.ok for r in result["probe"].records) else 2
