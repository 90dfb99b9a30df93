"""`kvgate model kv|size|predict|cost`: the capacity, bandwidth and cost model as commands."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ._bwmodel import (
    SEED_BASELINE_BPS,
    SEED_BASELINE_LABEL,
    ModelInputError,
    RestoreModel,
    fit_calibration,
    fmt_rate,
    predict,
    recompute_time,
)
from ._cost import RANK_KEYS, SHIPPED_CATALOG, CatalogError, evaluate, load_catalog, rank
from ._kvmodel import (
    CATALOGUE,
    LMCACHE_CHUNK_TOKENS,
    ModelError,
    chunking,
    fmt_bytes,
    fmt_tokens,
    kv_geometry,
    parse_tokens,
    size_workload,
)
from ._units import UnitError, parse_duration, parse_rate

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


def add_commands(commands: argparse._SubParsersAction) -> None:
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
    cost.add_argument("--catalog", type=Path, help="array catalogue TOML (default: "
                      "./catalog/arrays.toml, else the one shipped with kvgate)")
    cost.add_argument("--sessions", type=int, default=0, help="size capacity for this many "
                      "sessions (default 0: price one array)")
    cost.add_argument("--reuse", type=int, default=1, help="contexts kept per session")
    cost.add_argument("--fill", type=float, default=0.8, help="share of the tier to fill")
    cost.add_argument("--rank-by", choices=RANK_KEYS, default="ttft",
                      help="ttft: price per %% TTFT reduction (default); workload; tb; gbps")
    _restore_args(cost)


def _emit(body: object) -> None:
    """Print JSON; an infinite break-even ("never") becomes null, as strict JSON requires."""
    def clean(x: object) -> object:
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        return [clean(v) for v in x] if isinstance(x, list) else x
    print(json.dumps(clean(body), indent=2, ensure_ascii=False))


def _table(title: str, rows: list[tuple[str, str]]) -> Table:
    table = Table(title=title)
    table.add_column("quantity")
    table.add_column("value", justify="right")
    for name, value in rows:
        table.add_row(name, value)
    return table


def _kv(args: argparse.Namespace, console: Console) -> int:
    g = kv_geometry(args.model, args.dtype, args.tp)
    c = chunking(g, args.context, args.chunk_tokens)
    if args.json:
        _emit({"geometry": g.model_dump(), "chunking": c.model_dump()})
        return 0
    console.print(_table(f"KV cache of {g.model} ({g.dtype.upper()}, TP{g.tp})", [
        ("attention", g.attention.upper()),
        ("KV bytes per token (model)", f"{g.bytes_per_token:,} B"),
        ("KV bytes per token per rank", f"{g.per_rank_bytes_per_token:,} B"),
        ("KV bytes per token stored (all ranks)", f"{g.stored_bytes_per_token:,} B"),
        (f"KV per {fmt_tokens(args.context)}-token context (stored)",
         fmt_bytes(c.context_stored_bytes)),
        (f"chunk file ({c.chunk_tokens} tokens, one rank)", fmt_bytes(c.chunk_file_bytes)
         + f" ({c.chunk_file_bytes:,} B)"),
        ("chunk files per context", f"{c.files_per_context:,} ({c.chunks_per_context:,} × "
         f"TP{g.tp}; last chunk {c.last_chunk_tokens} tokens)")]))
    console.print(f"note: {g.note}", highlight=False)
    return 0


def _size(args: argparse.Namespace, console: Console) -> int:
    g = kv_geometry(args.model, args.dtype, args.tp)
    s = size_workload(g, args.sessions, args.context, args.reuse, args.new_contexts_per_s,
                      args.fill)
    if args.json:
        _emit({"geometry": g.model_dump(), "sizing": s.model_dump()})
        return 0
    turnover = (f"{s.turnover_s / 60:.3g} min" if s.turnover_s is not None else "—")
    console.print(_table(f"Workload on {g.model} ({g.dtype.upper()}, TP{g.tp})", [
        ("KV per context (stored)", fmt_bytes(s.context_bytes)),
        (f"working set ({s.sessions} sessions × {s.reuse} × {fmt_tokens(s.context_tokens)})",
         fmt_bytes(s.working_set_bytes)),
        (f"capacity needed (filled to {s.fill:.0%})", fmt_bytes(s.capacity_bytes)),
        (f"write bandwidth ({s.new_contexts_per_s:g} new contexts/s)", fmt_rate(s.write_bps)
         if s.write_bps else "0"),
        ("working set rewritten every", turnover)]))
    return 0


def _restore(args: argparse.Namespace) -> RestoreModel:
    return RestoreModel(efficiency=args.efficiency, overhead_s=args.overhead,
                        other_s=args.other, concurrent_restores=args.concurrent)


def _baseline(args: argparse.Namespace) -> tuple[float | None, str | None, float | None]:
    recompute = (recompute_time(args.context, args.prefill_rate)
                 if args.prefill_rate else None)
    if args.baseline_bw is None and recompute is None:
        return SEED_BASELINE_BPS, SEED_BASELINE_LABEL, None
    return args.baseline_bw, None, recompute


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:.1f} %"


def _predict(args: argparse.Namespace, console: Console) -> int:
    g = kv_geometry(args.model, args.dtype, args.tp)
    kv = args.context * g.stored_bytes_per_token
    restore, fit = _restore(args), None
    if args.point:
        fit = fit_calibration(args.point, kv, args.concurrent)
        if fit.shape_ok:
            restore = fit.restore_model(args.concurrent)
    # No --bw: predict at the measured points, else at the seed's two bandwidths.
    bws = args.bw or [p[0] for p in args.point] or [SEED_BASELINE_BPS, 5.23e9]
    base_bps, label, recompute = _baseline(args)
    preds = [predict(kv, bw, restore, baseline_bps=base_bps, baseline_label=label,
                     recompute_s=recompute, decode_s=args.decode) for bw in bws]
    if args.json:
        _emit({"geometry": g.model_dump(), "kv_bytes": kv,
               "calibration": fit.model_dump() if fit else None,
               "predictions": [p.model_dump() for p in preds]})
        return 0
    if fit:
        eff = f"; efficiency {fit.efficiency:.3g}" if fit.efficiency else ""
        console.print(f"fit over {fit.points} points: TTFT = {fit.a_s:.4g} s + "
                      f"{fmt_bytes(fit.b_bytes)} / bandwidth{eff}", highlight=False)
        if not fit.shape_ok:
            console.print("[yellow]the points do not have the model's shape (a >= 0, b > 0): "
                          "predictions below use the unfitted model[/]")
    table = Table(title=f"Predicted TTFT, {g.model} ({g.dtype.upper()}, TP{g.tp}), "
                  f"{fmt_tokens(args.context)}-token context, {fmt_bytes(kv)} of KV")
    for col in ("read bandwidth", "restore", "TTFT", "TTFT reduction", "throughput gain"):
        table.add_column(col, justify="right")
    for p in preds:
        table.add_row(fmt_rate(p.read_bps), f"{p.restore_s:.3g} s", f"{p.ttft_s:.3g} s",
                      _pct(p.ttft_reduction), _pct(p.throughput_gain))
    console.print(table)
    p = preds[0]
    if p.baseline:
        console.print(f"baseline: {p.baseline}, TTFT {p.baseline_ttft_s:.3g} s", highlight=False)
    if p.break_even_bps is not None:
        console.print(f"break-even read bandwidth vs recompute: {fmt_rate(p.break_even_bps)}"
                      if p.break_even_bps != float("inf") else
                      "break-even: never (the fixed overhead alone exceeds recompute)",
                      highlight=False)
    for line in p.assumptions:
        console.print(f"assumption: {line}", highlight=False)
    return 0


def _cost(args: argparse.Namespace, console: Console) -> int:
    local = Path("catalog/arrays.toml")
    catalog = load_catalog(args.catalog or (local if local.exists() else SHIPPED_CATALOG))
    g = kv_geometry(args.model, args.dtype, args.tp)
    kv = args.context * g.stored_bytes_per_token
    capacity = (size_workload(g, args.sessions, args.context, args.reuse, fill=args.fill)
                .capacity_bytes if args.sessions else 0)
    base_bps, label, recompute = _baseline(args)
    rows = rank(evaluate(catalog, kv, capacity_bytes=capacity, restore=_restore(args),
                         baseline_bps=base_bps, recompute_s=recompute), args.rank_by)
    baseline = label or (fmt_rate(base_bps) if base_bps else "recompute")
    if args.json:
        _emit({"currency": catalog.currency, "kv_bytes": kv, "baseline": baseline,
               "capacity_bytes": capacity, "rank_by": args.rank_by,
               "rows": [r.model_dump() for r in rows]})
        return 0
    sym = catalog.symbol
    table = Table(title=f"Arrays for {g.model} ({g.dtype.upper()}, TP{g.tp}), "
                  f"{fmt_tokens(args.context)}-token context, ranked by {args.rank_by}")
    for col in ("#", "array", "price", f"{sym}/TB", "read bw", f"{sym}/GB/s", "units", "total",
                "TTFT", "TTFT cut", f"{sym} per % cut"):
        table.add_column(col, justify="left" if col == "array" else "right")
    for i, r in enumerate(rows, 1):
        flag = " [yellow](example bw)[/]" if r.basis == "example" else ""
        table.add_row(str(i), r.name + flag, f"{sym}{r.price:,.0f}", f"{sym}{r.price_per_tb:,.0f}",
                      fmt_rate(r.read_bps), f"{sym}{r.price_per_gbps:,.0f}", str(r.units_needed),
                      f"{sym}{r.workload_price:,.0f}", f"{r.ttft_s:.3g} s", _pct(r.ttft_reduction),
                      "—" if r.price_per_pct is None else f"{sym}{r.price_per_pct:,.0f}")
    console.print(table)
    console.print(f"TTFT reduction vs {baseline}; "
                  + (f"units = arrays needed for {fmt_bytes(capacity)} of capacity "
                     f"({args.sessions} sessions × {args.reuse} contexts)" if capacity else
                     "one array each (give --sessions to size capacity)")
                  + f"; prices: {catalog.source or args.catalog}", highlight=False)
    for line in _restore(args).assumptions():
        console.print(f"assumption: {line}", highlight=False)
    console.print("assumption: arrays bought for capacity add no bandwidth (one context is "
                  "read from one array)", highlight=False)
    return 0


def model_command(args: argparse.Namespace) -> int:
    """Run one `kvgate model` subcommand; 0 on success, 2 on bad input (message on stderr)."""
    # Piped output is 80 columns by default: too narrow for the cost table.
    console = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 140)
    run = {"kv": _kv, "size": _size, "predict": _predict, "cost": _cost}[args.model_command]
    try:
        return run(args, console)
    except (ModelError, CatalogError, ModelInputError, UnitError, ValueError) as exc:
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {exc}", highlight=False)
        return 2


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point: `python -m gates._model_cli model kv …`."""
    parser = argparse.ArgumentParser(prog="kvgate")
    add_commands(parser.add_subparsers(dest="command", required=True))
    return model_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
