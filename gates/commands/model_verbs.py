"""The bodies of `kvgate model kv|size|predict|cost`: model answers as a table or as JSON."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..model import (
    SEED_BASELINE_BPS,
    SEED_BASELINE_LABEL,
    SHIPPED_CATALOG,
    RestoreModel,
    chunking,
    evaluate,
    fit_calibration,
    fmt_bytes,
    fmt_rate,
    fmt_tokens,
    kv_geometry,
    load_catalog,
    predict,
    rank,
    recompute_time,
    size_workload,
)


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


def run_kv(args: argparse.Namespace, console: Console) -> int:
    """`kvgate model kv`: print KV bytes per token, per context and per chunk file."""
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


def run_size(args: argparse.Namespace, console: Console) -> int:
    """`kvgate model size`: print a load's working set, capacity and write bandwidth."""
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


def run_predict(args: argparse.Namespace, console: Console) -> int:
    """`kvgate model predict`: print TTFT and gain at read bandwidths (fitted to any points)."""
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
            console.print("the points do not have the model's shape (a >= 0, b > 0): "
                          "predictions below use the unfitted model", style="yellow")
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


def run_cost(args: argparse.Namespace, console: Console) -> int:
    """`kvgate model cost`: print the catalogue's arrays ranked by price per TB, GB/s, TTFT cut."""
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
        name = Text(r.name)  # as the catalogue spells it: never read as markup
        if r.basis == "example":
            name.append(" (example bw)", style="yellow")
        table.add_row(str(i), name, f"{sym}{r.price:,.0f}", f"{sym}{r.price_per_tb:,.0f}",
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
