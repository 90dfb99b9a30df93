"""`kvgate bundle RUN`: pack a run, every run its chain cites, and a manifest, in a .tar.gz."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ..options import folder, output_file, run_id
from ..store import (
    COMPARISON_JSON,
    DB_NAME,
    MANIFEST,
    SUFFIX,
    SWEEP_JSON,
    BundleError,
    Store,
    StoreError,
    check_run_id,
    write_bundle,
)

EXAMPLES = """examples:
  kvgate bundle 20261129T170000Z-3f9a1c                  reports/<run>.bundle.tar.gz
  kvgate bundle 20261129T170000Z-3f9a1c --out /data/kvgate-reports -o site-a.tar.gz
  kvgate verify reports/20261129T170000Z-3f9a1c.bundle.tar.gz
  kvgate bundle compare-20261206T090000Z-aaaaaa-bbbbbb      a comparison and every run it cites
  kvgate bundle sweep-20261205T130000Z-3f9a1c               a sweep's page and its evidence

exit codes: 0 written, 2 unknown run, a run with no gate record yet (killed before its first
gate finished, or still running), missing folder, an unreadable store or an existing output
file"""


def add_bundle_commands(commands: argparse._SubParsersAction) -> None:
    """Register `bundle RUN_ID [--out DIR] [-o FILE]`."""
    bundle = commands.add_parser(
        "bundle", help="pack a run, the runs its chain cites and a SHA-256 manifest in a .tar.gz",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    bundle.add_argument("run_id", type=run_id, metavar="RUN_ID",
                        help="the run to bundle, e.g. 20261129T170000Z-3f9a1c, or a "
                        "comparison's or a sweep's folder name (compare-…, sweep-…)")
    bundle.add_argument("--out", type=folder, default=Path("reports"),
                        help="folder of the store and the run folders (default: ./reports)")
    bundle.add_argument("-o", "--output", type=output_file, default=None, metavar="FILE",
                        help=f"bundle file to create (default: <out>/<run>{SUFFIX}); never "
                        "overwritten")


def _known_run(out: Path, run_id: str) -> str:
    """Why run_id cannot be bundled from out's store ("" when it can)."""
    db = out / DB_NAME
    if not db.is_file():
        return f"no kvgate store at {db}: give the folder of your reports with --out"
    if any((out / check_run_id(run_id) / name).is_file() for name in (COMPARISON_JSON,
                                                                        SWEEP_JSON)):
        return ""  # a comparison's or a sweep's folder, which cites runs the store holds
    with Store.reading(out) as store:  # bundling writes nothing to the store (a read-only mount)
        if store.run(check_run_id(run_id)) is None:
            return f"run {run_id} is not in the store {db}"
    return ""


def bundle_command(args: argparse.Namespace) -> int:
    """Write the bundle and say where it is; 2 with the reason on stderr when it cannot."""
    err = Console(stderr=True, soft_wrap=True)
    try:
        problem = _known_run(args.out, args.run_id)
        if problem:
            err.print(f"[red]error:[/] {problem}", highlight=False)
            return 2
        count = []
        path = write_bundle(args.out, args.run_id, args.output, on_file=count.append)
    except (BundleError, StoreError, ValueError) as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        return 2
    runs = sorted({name.split("/")[0] for name in count} - {"pytest-html"})
    print(f"bundle {path}: {len(count)} files of run(s) {', '.join(runs)} and {MANIFEST}")
    print(f"check it with: kvgate verify {path}", file=sys.stdout)
    return 0
