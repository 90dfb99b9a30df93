"""`kvgate waive RUN_ID DEVIATION --reason … --by NAME`: a named person closes one deviation.

The deviation is one the run's procurement summary lists as open (it blocks ACCEPT); DEVIATION
is its text, or how it begins ("limits changed since G2"). The waiver is signed with the
performer's key, kept in the store, and the run's summary is re-issued with it (the next
revision, naming the one it replaces), then bundled again. Rehearsal marks (simulated engine,
shortened soak, --force) are never waived: those runs are re-run for real.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ..core.configuration import ConfigError
from ..core.text import shown
from ..core.verdicts import Waiver
from ..options import folder, plain_text, run_id
from ..report import (
    WaiverRefused,
    build_summary,
    choose_deviation,
    configured_signer,
    grouped,
    machine_keys,
    reissue_summary,
    sign_waiver,
    trusted_waivers,
    untrusted,
)
from ..store import BundleError, Store, check_run_id, utc_now, write_bundle

EXAMPLES = """examples:
  kvgate waive 20261129T170000Z-3f9a1c "limits changed since G2" \\
      --reason "revision 7 only corrected a comment; every limit is unchanged" --by "J. Reviewer"
  kvgate waive RUN_ID "baseline may be starved" --gate g2 --reason "…" --by "J. Reviewer"

A waiver must be signed: it uses the performer's key ($KVGATE_SIGNING_KEY, or `kvgate key
new`). exit codes: 0 waived and the summary re-issued, 2 refused (no such run or summary, no
such open deviation, a rehearsal mark, no key, an empty reason or name)"""
REFUSED = 2


def add_waive_commands(commands: argparse._SubParsersAction) -> None:
    """Register `waive RUN_ID DEVIATION --reason TEXT --by NAME [--gate G] [--out DIR]`."""
    waive = commands.add_parser(
        "waive", help="waive one open deviation of a run's summary, signed, with a reason",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    waive.add_argument("run_id", type=run_id,
                       help="the run whose procurement summary lists the deviation")
    waive.add_argument("deviation", type=plain_text,
                       help="the deviation's text, or how it begins")
    waive.add_argument("--reason", required=True, type=plain_text,
                       help="why it leaves the verdicts' meaning")
    waive.add_argument("--by", required=True, type=plain_text,
                       help="the name of the person who waives it")
    waive.add_argument("--gate", choices=["g1", "g2", "g3", "g4"], default="",
                       help="the gate whose record carries it, when the text names several")
    waive.add_argument("--out", type=folder, default=Path("reports"),
                       help="where the store and the run folders are (default: ./reports)")


def _waive(args: argparse.Namespace, console: Console) -> int:
    reason, by = args.reason.strip(), args.by.strip()
    if not reason or not by:
        raise WaiverRefused("a waiver needs a reason (--reason) and the name of who gives it "
                            "(--by)")
    signer = configured_signer()
    if signer is None:
        raise WaiverRefused("a waiver must be signed, and no performer's key is configured: "
                            "create one with `kvgate key new` (or set $KVGATE_SIGNING_KEY)")
    keys = machine_keys()
    if why := untrusted(signer.public.fingerprint, keys):
        raise WaiverRefused(f"the waiver would be {why}: its summary would then verify as "
                            f"UNKNOWN SIGNER here; sign with this machine's key, or put "
                            f"{signer.path}'s public half (.pub) in that trusted/ folder")
    with Store(args.out) as store:
        run_id = check_run_id(args.run_id)
        folder = store.run_dir(run_id)
        if store.run(run_id) is None or not (folder / "summary.json").is_file():
            raise WaiverRefused(f"run {run_id} has no procurement summary in {folder}")
        site = store.run(run_id)["site"]
        for line in trusted_waivers(store.waivers(), keys)[1]:
            console.print(shown(line), highlight=False, markup=False)
        found = choose_deviation(build_summary(store, site, run_id).deviations,
                                 args.deviation, args.gate)
        signed = sign_waiver(Waiver(run_id=found.run_id, gate=found.gate, deviation=found.text,
                                    reason=reason, by=by, waived_at=utc_now()), signer)
        summary, files = _reissue(store, run_id, signed, signer)
    for line in (f"waived: {found.gate.upper()} (run {found.run_id}): {found.text}",
                 f"by {by}: {reason} (waiver SHA-256 {signed.sha256[:16]}…, signed by "
                 f"{grouped(signer.public.fingerprint)})",
                 f"summary revision {summary.revision}: {summary.recommendation.text}",
                 f"{files['html']}"):
        console.print(shown(line), highlight=False, markup=False)
    try:
        dest = args.out / f"{run_id}.r{summary.revision}.bundle.tar.gz"
        console.print(shown(f"evidence bundle: {write_bundle(args.out, run_id, dest)}"),
                      highlight=False, markup=False)
    except (BundleError, OSError) as exc:
        console.print(shown(f"evidence bundle not written: {exc}"), highlight=False,
                      markup=False)
    return 0


def _reissue(store: Store, run_id: str, signed, signer):
    """Store the waiver and re-issue the summary; a summary that cannot be re-issued (altered)
    leaves no waiver behind."""
    with store.transaction():
        store.add_waiver(signed)
        return reissue_summary(store, run_id, signer)


def waive_command(args: argparse.Namespace) -> int:
    """Waive one deviation; the exit code says whether it was."""
    console = Console(soft_wrap=True)
    try:
        return _waive(args, console)
    except (WaiverRefused, ValueError, ConfigError) as exc:
        Console(stderr=True, soft_wrap=True).print(f"[red]refused:[/] {escape(shown(exc))}",
                                                   highlight=False)
        return REFUSED
