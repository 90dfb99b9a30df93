"""`kvgate model kv|size|predict|cost`: the capacity, bandwidth and cost model as commands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from ..core.quantities import UnitError, parse_duration, parse_rate
from ..model import (
    CATALOGUE,
    LMCACHE_CHUNK_TOKENS,
    RANK_KEYS,
    CatalogError,
    ModelError,
    ModelInputError,
    parse_tokens,
)
from ..options import Range, input_file
from .model_verbs import run_cost, run_kv, run_predict, run_size

EXAMPLES = """examples:
  kvgate model kv --model qwen3-coder-480b --dtype fp8 --tp 8 --context 128k
  kvgate model kv --model path/to/config.json --tp 4 --context 32k --json
  kvgate model size --model llama-3.1-70b --sessions 64 --context 32k --reuse 4 \\
      --new-contexts-per-s 2
  kvgate model predict --model qwen3-coder-480b --tp 8 --context 32k --bw 5.2GB/s \\
      --baseline-bw 0.98GB/s --prefill-rate 8000
  kvgate model predict --model qwen2.5-32b --context 8k --concurrent 16 \\
      --point 0.98GB/s=37.97s --point 5.23GB/s=9.30s --bw 12GB/s     (calibrate, then predict)
  kvgate model cost --catalog catalog/arrays.toml --model qwen3-coder-480b --context 32k
built-in models: """ + ", ".join(sorted(CATALOGUE)) + """ (or a local config.json)
exit codes: 0 ok, 2 bad input"""


# Each number's range, checked once parsed (model_command), so a refusal names the option, the
# value and the range instead of the model's own field names.
WHOLE = {"tp": ("--tp", 1, 1024), "context": ("--context", 1, 1 << 30),
         "chunk_tokens": ("--chunk-tokens", 1, 1 << 30), "concurrent": ("--concurrent", 1, 10**6),
         "sessions": ("--sessions", 0, 10**9), "reuse": ("--reuse", 1, 10**6)}
RANGES = {dest: (flag, Range(low, high, whole=True)) for dest, (flag, low, high) in WHOLE.items()}
# Lower bounds past zero: a share of 1e-300 or a rate of 1e-300 B/s gives times and capacities
# that overflow (inf, and int() of it); no array or engine is measured there.
RANGES |= {"efficiency": ("--efficiency", Range(0.001, 1, unit="a share of the read bandwidth")),
           "fill": ("--fill", Range(0.01, 1, unit="a share of the tier")),
           "prefill_rate": ("--prefill-rate", Range(1, 1e12, unit="tokens/s")),
           # 0 = a working set never rewritten; a positive rate of 1e-300 overflows the same
           # way, so at least 1e-6 (one new context in 12 days).
           "new_contexts_per_s": ("--new-contexts-per-s", Range(1e-6, 1e6, zero=True,
                                                                unit="new contexts per second")),
           "bw": ("--bw", Range(1, 1e15, unit="bytes/s")),
           "baseline_bw": ("--baseline-bw", Range(1, 1e15, unit="bytes/s"))}


def refusals(args: argparse.Namespace) -> list[str]:
    """Each option whose value is out of its range, or a --model file that is not a file."""
    found = [text for dest, (flag, allowed) in RANGES.items()
             for value in _values(getattr(args, dest, None))
             if (text := allowed.refusal(flag, value))]
    if Path(args.model).exists():  # a config.json: a FIFO or /dev/zero would never be read
        try:
            input_file(args.model)
        except argparse.ArgumentTypeError as exc:
            found.append(f"--model {exc}")
    return found


def _values(value: object) -> list:
    return value if isinstance(value, list) else [value]


def _typed(parse, what: str):
    def convert(text: str):
        try:
            return parse(text)
        except (UnitError, ValueError) as exc:
            raise argparse.ArgumentTypeError(f"{what}: {exc}") from None
    convert.__name__ = what
    return convert


def _point(text: str) -> tuple[float, float]:
    bw, sep, ttft = text.partition("=")
    if not sep:
        raise UnitError(f"{text!r} is not a point (write it like '5.23GB/s=9.30s')")
    return parse_rate(bw), parse_duration(ttft)


def _model_args(p: argparse.ArgumentParser, context: bool = True) -> None:
    p.add_argument("--model", default="qwen3-coder-480b",
                   help="built-in name or a local config.json (default: qwen3-coder-480b)")
    p.add_argument("--dtype", default="auto", help="KV dtype: fp8, bf16, fp16, or auto "
                   "(the model's torch_dtype; FP8 for the seed's Qwen3-Coder-480B)")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel size (default 1)")
    if context:
        p.add_argument("--context", type=_typed(parse_tokens, "tokens"), default=32768,
                       help="context length in tokens, e.g. 32k or 131072 (default 32k)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _restore_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--baseline-bw", type=_typed(parse_rate, "bandwidth"),
                   help="baseline tier's read bandwidth, e.g. your G2 local NVMe "
                   "(default: the seed's 0.98 GB/s unless --prefill-rate is given)")
    p.add_argument("--prefill-rate", type=float, help="recompute speed in tokens/s: enables "
                   "the break-even bandwidth and, without --baseline-bw, a recompute baseline")
    p.add_argument("--efficiency", type=float, default=1.0,
                   help="share of the read bandwidth a restore achieves (default 1)")
    p.add_argument("--overhead", type=_typed(parse_duration, "duration"), default=0.0,
                   help="fixed time per restore, e.g. 50ms (default 0)")
    p.add_argument("--other", type=_typed(parse_duration, "duration"), default=0.0,
                   help="TTFT that does not read KV: queueing, prefill of the rest (default 0)")
    p.add_argument("--concurrent", type=int, default=1,
                   help="restores sharing the bandwidth at once (default 1)")
    p.add_argument("--decode", type=_typed(parse_duration, "duration"), default=0.0,
                   help="decode time per request, for the throughput gain (default 0)")


def add_model_commands(commands: argparse._SubParsersAction) -> None:
    """Register `model` and its subcommands kv, size, predict, cost."""
    fmt = argparse.RawDescriptionHelpFormatter
    model = commands.add_parser("model", help="KV capacity, bandwidth and cost model",
                                description="Answer before testing: how much capacity, how "
                                "much bandwidth, at what price; and after G1, what TTFT gain "
                                "G3 should show.", epilog=EXAMPLES, formatter_class=fmt)
    sub = model.add_subparsers(dest="model_command", required=True)
    kv = sub.add_parser("kv", help="KV bytes per token, per context and per chunk file",
                        epilog=EXAMPLES, formatter_class=fmt)
    _model_args(kv)
    kv.add_argument("--chunk-tokens", type=int, default=LMCACHE_CHUNK_TOKENS,
                    help="tokens per chunk file (default 256, LMCache's)")
    size = sub.add_parser("size", help="working set, capacity and write bandwidth of a load",
                          epilog=EXAMPLES, formatter_class=fmt)
    _model_args(size)
    size.add_argument("--sessions", type=int, required=True, help="concurrent sessions")
    size.add_argument("--reuse", type=int, default=1,
                      help="contexts per session kept on the tier for reuse (default 1)")
    size.add_argument("--new-contexts-per-s", type=float, default=0.0,
                      help="new contexts written per second (default 0)")
    size.add_argument("--fill", type=float, default=0.8,
                      help="share of the tier to fill at most (default 0.8)")
    pred = sub.add_parser("predict", help="predicted TTFT and gain at read bandwidths",
                          epilog=EXAMPLES, formatter_class=fmt)
    _model_args(pred)
    pred.add_argument("--bw", type=_typed(parse_rate, "bandwidth"), action="append",
                      help="read bandwidth to predict at, e.g. 5.2GB/s (repeatable)")
    pred.add_argument("--point", type=_typed(_point, "point"), action="append", default=[],
                      help="measured BANDWIDTH=TTFT, e.g. 5.23GB/s=9.30s: fit the model first")
    _restore_args(pred)
    cost = sub.add_parser("cost", help="rank arrays by price per TB, per GB/s, per TTFT gain",
                          epilog=EXAMPLES, formatter_class=fmt)
    _model_args(cost)
    cost.add_argument("--catalog", type=input_file, help="array catalogue TOML (default: "
                      "./catalog/arrays.toml, else the one shipped with kvgate)")
    cost.add_argument("--sessions", type=int, default=0, help="size capacity for this many "
                      "sessions (default 0: price one array)")
    cost.add_argument("--reuse", type=int, default=1, help="contexts kept per session")
    cost.add_argument("--fill", type=float, default=0.8, help="share of the tier to fill")
    cost.add_argument("--rank-by", choices=RANK_KEYS, default="ttft",
                      help="ttft: price per %% TTFT reduction (default); workload; tb; gbps")
    _restore_args(cost)


def model_command(args: argparse.Namespace) -> int:
    """Run one `kvgate model` subcommand; 0 on success, 2 on bad input (message on stderr)."""
    # Piped output is 80 columns by default: too narrow for the cost table.
    # markup=False: a model's or an array's name is printed as given, "[x]" included.
    console = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 140, markup=False)
    run = {"kv": run_kv, "size": run_size, "predict": run_predict,
           "cost": run_cost}[args.model_command]
    err = Console(stderr=True, soft_wrap=True, markup=False, highlight=False)
    if found := refusals(args):
        err.print("error: " + "; ".join(found), style="red")
        return 2
    try:
        return run(args, console)
    except (ModelError, CatalogError, ModelInputError, UnitError, ValueError) as exc:
        err.print(f"error: {exc}", style="red")
        return 2


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point: `python -m gates.commands.model model kv …`."""
    parser = argparse.ArgumentParser(prog="kvgate")
    add_model_commands(parser.add_subparsers(dest="command", required=True))
    return model_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
