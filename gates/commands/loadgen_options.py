"""The options of `kvgate loadgen`, each with its range (refused when parsed, before a request),
and the workload they describe.

Every number is finite and in a range said in its refusal (gates.options.Range); every path is
checked for what kvgate will do with it (read, or write once the load is done).
"""

from __future__ import annotations

import argparse
from fractions import Fraction
from pathlib import Path

from ..core.configuration import ADAPTER_NAMES
from ..loadgen import (
    MAX_INPUT,
    PROBE,
    RESERVED,
    SEED,
    WARMUP,
    Plan,
    WorkloadError,
    cold_recovery,
    mooncake_replay,
    multi_turn,
    shared_prefix,
)
from ..options import LONGEST_S, Range, input_file, output_dir, output_file
from .loadgen_checks import base_url, error_rate

GROUP, TURNS = 4, 4  # shared-prefix requests per group, multi-turn turns per session
TOKENS = Range(1, MAX_INPUT, whole=True, unit="tokens")
SECONDS = Range(0, LONGEST_S, above=True, unit="seconds")
# An open loop's mean gap is 1/rate: below a request per 1,000 s a run of --requests waits for
# days; far above what one process can send, the self-check says it could not keep up.
RATE = Range(0.001, 1_000_000, unit="requests per second")
VOCAB = Range(RESERVED, 2**31 - 1, whole=True, above=True)
# The prompt tokens a workload may hold in memory at once (~36 bytes each as Python ints):
# 2**25 is about 1.2 GB, 64 cold-recovery contexts of 256k tokens (each held twice).
PLAN_TOKENS_MAX = 1 << 25
TRACE_MAX = 256 * 2**20  # bytes of a trace file read at most: published traces are tens of MiB


def vocab_size(text: str) -> int:
    """Parse --vocab: token ids are drawn from RESERVED up to it, so it must be above that."""
    try:
        return VOCAB(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give a whole number above {RESERVED} and at most {VOCAB.high:,} (token "
            f"ids are drawn from {RESERVED} up to --vocab; the low ids are skipped, where many "
            "vocabularies keep control tokens)") from None


def add_loadgen_options(gen: argparse.ArgumentParser) -> None:
    """Declare every option of `kvgate loadgen` on its parser."""
    gen.add_argument("--url", action="append", required=True, type=base_url,
                     help="base URL of an endpoint (repeat for several instances)")
    gen.add_argument("--model", default="", help="model name (default: the first in /v1/models)")
    gen.add_argument("--api", choices=["completions", "chat"], default="completions")
    gen.add_argument("--api-key-env", default="", help="environment variable holding the key")
    gen.add_argument("--workload", choices=["cold-recovery", "shared-prefix", "multi-turn",
                                            "trace"], default="cold-recovery")
    gen.add_argument("--trace", type=input_file,
                     help="Mooncake trace (JSONL) for --workload trace")
    gen.add_argument("--time-scale", type=Range(0.001, 1000, unit="times the trace's pace"),
                     default=1.0, help="trace time factor (default 1)")
    gen.add_argument("--concurrency", type=Range(1, 10_000, whole=True, unit="requests at once"),
                     default=8, help="closed loop (default 8)")
    gen.add_argument("--rate", type=RATE, help="open loop: requests per second instead")
    gen.add_argument("--arrival", choices=["poisson", "constant"], default="poisson")
    gen.add_argument("--requests", type=Range(1, 1_000_000, whole=True), default=16,
                     help="contexts (cold-recovery), sessions of 4 turns (multi-turn), requests "
                     "(shared-prefix: exactly this many, in groups of 4), trace lines at most")
    gen.add_argument("--context-tokens", type=TOKENS, default=4096)
    gen.add_argument("--question-tokens", type=TOKENS, default=64)
    gen.add_argument("--output-tokens", type=TOKENS, default=32)
    gen.add_argument("--chunk-tokens", type=TOKENS, default=256, help="KV chunk size of the tier")
    gen.add_argument("--vocab", type=vocab_size, default=32000,
                     help=f"token ids are drawn from {RESERVED} up to this (default 32000)")
    gen.add_argument("--seed", type=Range(0, 2**63 - 1, whole=True), default=0)
    gen.add_argument("--engine", choices=["auto", *ADAPTER_NAMES], default="auto",
                     help="metrics adapter (default auto: detect it from /metrics)")
    gen.add_argument("--evict", choices=["reset", "flood", "none"], default="reset")
    gen.add_argument("--stall-timeout", type=SECONDS, default=60.0,
                     help="seconds without a byte (connect, headers, stream) before a request "
                     "or the model lookup times out (default 60)")
    gen.add_argument("--request-timeout", type=SECONDS, default=None,
                     help="seconds a whole request may take (default: unbounded)")
    gen.add_argument("--max-error-rate", type=error_rate, default=Fraction(0),
                     help="failed requests allowed, a fraction (0.05) or a percentage (5%%) of "
                     "every request sent; above it the run exits 1 (default 0: any failure)")
    gen.add_argument("--json", type=output_file, help="write the records and summary here")
    gen.add_argument("--out", type=output_dir, help="also stream every request into the store "
                     "here (kvgate.sqlite), as it finishes")
    gen.add_argument("--device", action="append", default=[],
                     help="block device holding the KV tier (e.g. nvme0n1; repeatable): its "
                     "read bytes during the probe are reported")


def too_large(args: argparse.Namespace) -> str:
    """Why the workload the options describe is too large to build ("" when it is not)."""
    n, context = args.requests, args.context_tokens
    if args.workload == "trace":
        return ""  # as long as the trace file is: its lines are bounded one by one
    if args.workload == "multi-turn":  # turn t holds the context and t answers and questions
        tokens = n * sum(context + t * (args.output_tokens + args.question_tokens)
                         for t in range(TURNS))
    else:  # cold recovery holds each context twice: the seed, and the probe with its question
        tokens = n * (context + args.question_tokens) * (2 if args.workload == "cold-recovery"
                                                          else 1)
    if tokens <= PLAN_TOKENS_MAX:
        return ""
    return (f"--requests {n:,} x --context-tokens {context:,}: the {args.workload} workload "
            f"would hold {tokens:,} prompt tokens, more than the {PLAN_TOKENS_MAX:,} kvgate "
            "builds in memory; lower one of them")


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
    return mooncake_replay(_trace_text(args.trace), seed, vocab, time_scale=args.time_scale,
                           max_requests=n)


def _trace_text(path: Path) -> str:
    """The trace file's text: a regular file (checked when parsed), UTF-8, of a bounded size."""
    size = path.stat().st_size
    if size > TRACE_MAX:
        raise WorkloadError(f"--trace {path}: {size:,} bytes, more than the "
                            f"{TRACE_MAX // 2**20} MiB kvgate reads of a trace")
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"--trace {path}: byte {exc.start:,} is not UTF-8: not a JSONL "
                            "trace (a compressed file? decompress it first)") from None


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
