"""`kvgate compare RUN_ID[=ARRAY] ...`: candidate arrays' chains side by side (issue #28)."""

from __future__ import annotations

import argparse
import re
from argparse import ArgumentTypeError
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ..core.quantities import UnitError, format_size, parse_size
from ..core.text import shown
from ..model import SHIPPED_CATALOG, CatalogError, load_catalog
from ..options import folder, input_file, plain_text, run_id
from ..report import GAINS, CompareError, Comparison, compare, write_comparison
from ..store import DB_NAME, Store, StoreError

EXAMPLES = """examples:
  kvgate compare 20261204T100000Z-aaaaaa=FX100 20261205T100000Z-bbbbbb=FX300
  kvgate compare RUN_A=FX100 RUN_B=FX200 --out /data/kvgate-reports --catalog quotes.toml
  kvgate compare RUN_A=FX100 RUN_B=FX300 --capacity 300TB   the KV the site must hold
  kvgate compare RUN_A=FX100 RUN_B=FX300 --sweep SWEEP_A=FX100 --sweep SWEEP_B=FX300

Each candidate is a run whose chain (G1 -> G4, followed by its own citations) measured one
array; =ARRAY names it as the catalogue does, for its price per TB and per point of TTFT p50
reduction (and, with --capacity, how many of each array hold the site's KV working set, as
`kvgate model size` gives it, and their price). --sweep SWEEP=ARRAY names the working-set
sweep (kvgate sweep, its run id or its sweep-<run> folder) that measured an array's tier: the
page states from which working set up it pays (the sweep's break-even). Two candidates are
ranked only where their G3 intervals do not overlap; otherwise they are "not
distinguishable". Writes the folder
compare-<when>-<runs>/ into --out: comparison.html (prints to PDF, Letter or A4),
comparison.json, and comparison.json.sig when a signing key is configured (kvgate key new);
check it, or pack it with every run it cites, with
  kvgate bundle compare-20261206T090000Z-aaaaaa-bbbbbb
  kvgate verify reports/compare-20261206T090000Z-aaaaaa-bbbbbb

exit codes: 0 compared, 2 an unknown run, a missing store, an unreadable catalogue, a
--capacity that is no size, fewer than two runs, a sweep that is not there or was altered"""


CAPACITY_MAX = 10**18  # 1 EB: past any one site's KV working set


def candidate(text: str) -> tuple[str, str]:
    """RUN_ID or RUN_ID=ARRAY, the run id a plain folder name."""
    run, _, array = plain_text(text).partition("=")
    if "=" in text and not array.strip():
        raise ArgumentTypeError(f"{text}: name the array after '=', or leave '=' out")
    return run_id(run) or _empty(text), array.strip()


def sweep_of(text: str) -> tuple[str, str]:
    """--sweep SWEEP=ARRAY: a sweep's run id (or its sweep-<run> folder) and the array."""
    name, _, array = plain_text(text).partition("=")
    if not array.strip() or not name.strip():
        raise ArgumentTypeError(f"{text!r}: write SWEEP=ARRAY, e.g. "
                                "20261205T130000Z-3f9a1c=FX100")
    return run_id(name.strip()), array.strip()


def capacity(text: str) -> int:
    """--capacity: bytes with a unit ("300TB", "250TiB"); a bare number would be read as bytes."""
    if re.fullmatch(r"\s*[0-9.eE+-]+\s*", text):
        raise ArgumentTypeError(f"{text!r} has no unit: give one, e.g. 300TB or 250TiB")
    try:
        value = parse_size(text)
    except (UnitError, ValueError, ArithmeticError) as exc:
        raise ArgumentTypeError(str(exc)) from None
    if not 0 < value <= CAPACITY_MAX:
        raise ArgumentTypeError(f"{text!r} is not a capacity from 1 B to 1 EB")
    return value


def _empty(text: str) -> str:
    raise ArgumentTypeError(f"{text!r}: a run id is needed before '='")


def text_lines(c: Comparison) -> list[str]:
    """The comparison for the terminal: verdicts, rankings, prices, differences."""
    out = [f"{col.array} (run {col.run_id}): " + ", ".join(
        f"{g.upper()} {v}" for g, v in col.verdicts.items()) for col in c.columns]
    for col in c.columns:
        out += [f"{col.array}: chain {note}" for note in col.chain if "BROKEN" in note]
    out += [f"differs: {d}" for d in c.differences]
    for r in c.rankings:
        out.append(f"{GAINS[r.id]} @ concurrency {r.at}:")
        out += [f"  {line}" for line in r.lines] + [f"  unranked: {u}" for u in r.unranked]
    money = c.symbol  # every price in the catalogue's currency
    for col in c.columns:
        for at, p in sorted(col.price_per_point.items()):
            span = (f"{money}{p.low:,.0f} … {money}{p.high:,.0f}" if p.high is not None else
                    f"from {money}{p.low:,.0f}, no upper bound" if p.low is not None
                    else "none")
            out.append(f"{col.array}: price per point of TTFT p50 reduction @ {at}: "
                       f"{'—' if p.point is None else f'{money}{p.point:,.0f}'} ({span})")
        if col.price_per_tb is not None:
            out.append(f"{col.array}: price {money}{col.price:,.0f} ({c.currency}), per TB "
                       f"{money}{col.price_per_tb:,.0f}")
        if col.arrays_needed is not None:
            out.append(f"{col.array}: {col.arrays_needed} x {col.capacity_tb:g} TB arrays hold "
                       f"the site's {c.capacity_needed / 1e12:,.4g} TB, for "
                       f"{money}{col.price_for_capacity:,.0f}")
        if col.price_note:
            out.append(f"{col.array}: {col.price_note}")
        if col.sweep:
            out.append(f"{col.array}: sweep {col.sweep.id}: both gains clear G3's limits "
                       + (f"from {format_size(col.sweep.break_even)} of KV up"
                          if col.sweep.break_even is not None else "at no working set up"))
    return out + [c.risk]


def add_compare_commands(commands: argparse._SubParsersAction) -> None:
    """Register `compare CANDIDATE... [--out DIR] [--catalog FILE]`."""
    cmd = commands.add_parser(
        "compare", help="candidate arrays' chains side by side, ranked where intervals allow",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    cmd.add_argument("candidates", nargs="+", type=candidate, metavar="RUN_ID[=ARRAY]",
                     help="two or more runs, each optionally with its array's catalogue name")
    cmd.add_argument("--out", type=folder, default=Path("reports"),
                     help="folder of the store and the run folders (default: ./reports)")
    cmd.add_argument("--capacity", type=capacity, default=0, metavar="SIZE",
                     help="the KV working set the site must hold, with a unit (e.g. 300TB; "
                     "`kvgate model size` estimates it): each array's count and price for it")
    cmd.add_argument("--sweep", type=sweep_of, action="append", default=[],
                     metavar="SWEEP=ARRAY", help="the working-set sweep that measured an "
                     "array's tier (repeat per array): its break-even size on the page")
    cmd.add_argument("--catalog", type=input_file, default=SHIPPED_CATALOG,
                     help="array catalogue for prices (default: the shipped catalog/arrays.toml)")


def _priced_arrays(candidates: list[tuple[str, str]], catalog, path: Path) -> None:
    """An =ARRAY the catalogue does not have would be compared with no price and no word why
    but "no price": refused, naming the catalogue's arrays (leave =ARRAY out for none)."""
    known = [a.name for a in catalog.arrays]
    for run, array in candidates:
        if array and array not in known:
            raise CompareError(f"{run}={array}: the catalogue {path} has no array {array!r} "
                               f"(it has {', '.join(known) or 'none'}): name one of them, add "
                               f"{array} to a catalogue given with --catalog, or write {run} "
                               "alone to compare it without a price")


def compare_command(args: argparse.Namespace) -> int:
    """Print the comparison and write its JSON; 2 with the reason on stderr when it cannot."""
    err = Console(stderr=True, soft_wrap=True)
    try:
        if not (args.out / DB_NAME).is_file():
            raise CompareError(f"no kvgate store at {args.out / DB_NAME}: give the folder of "
                               "your reports with --out")
        catalog = load_catalog(args.catalog)
        _priced_arrays(args.candidates, catalog, args.catalog)
        with Store.reading(args.out) as store:
            for run, _ in args.candidates:
                if store.run(run) is None:
                    raise CompareError(f"run {run} is not in the store {args.out / DB_NAME}")
            sweeps = dict((array, sweep) for sweep, array in args.sweep)
            if len(sweeps) < len(args.sweep):
                raise CompareError("--sweep names one array twice: one sweep per array")
            result = compare(store, args.candidates, catalog, args.capacity, sweeps)
    except (CompareError, CatalogError, StoreError, OSError) as exc:
        err.print(f"[red]error:[/] {escape(shown(exc))}", highlight=False)
        return 2
    for line in text_lines(result):  # printed before the file, which may fail to be written
        print(shown(line))  # array and site names are what a person wrote
    try:
        files = write_comparison(args.out, result)
    except OSError as exc:
        err.print(f"[red]error:[/] the comparison above was not written to {args.out}: "
                  f"{escape(shown(exc))}", highlight=False)
        return 2
    print(f"comparison: {files['html']}" + ("" if "sig" in files else
                                             " (unsigned: no signing key is configured)"))
    return 0
