"""`kvgate verify PATH [--key PUB]`: hashes, chain, signatures, and who signed."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ..core.configuration import ConfigError
from ..core.text import shown
from ..report import (
    BAD_INPUT,
    VERIFY_EXIT_TEXT,
    NotVerifiable,
    examine,
    trusted_fingerprint,
    trusted_here,
)

EXAMPLES = f"""examples:
  kvgate verify reports/20261129T170000Z-3f9a1c
  kvgate verify reports/20261129T170000Z-3f9a1c/g3.json
  kvgate verify --key performer.pub reports/20261129T170000Z-3f9a1c.bundle.tar.gz
  kvgate verify --key "3f9a 1c2b …" reports/RUN_ID     the fingerprint instead of the file

It re-checks every record hash, evidence file, report seal, the chain between gates and a
bundle's manifest; that every report a record implies is there (<gate>.html and its .seal
file beside <gate>.json, summary.html beside summary.json; a run folder with records, its
summary.json) and names the digest of the JSON beside it; that a run folder holds nothing
else (any other file, at its top level or in evidence/, is named); every signature
(<file>.sig), which covers a record's decision rule too; and it refuses a JSON that names one
key twice (two "verdict" keys), naming the key. With --key every record and the
summary must be signed by that key (give --key again for several performers); without it, by
this machine's own key (`kvgate key show`) or a key in its trusted/ folder. It says "signed by
<fingerprint>, intact" only then. A path that does not exist, or a folder holding no gate
record, report or summary (a mistyped path, a run killed before its first gate finished), is
bad input (exit 2), never called altered.

{VERIFY_EXIT_TEXT}"""

COLOURS = {"ALTERED": "red", "UNSIGNED": "yellow", "UNKNOWN SIGNER": "yellow"}


def add_verify_commands(commands: argparse._SubParsersAction) -> None:
    """Register `verify PATH [--key PUB]…`."""
    verify = commands.add_parser(
        "verify", help="re-check a run's records, evidence, reports, chain and signatures",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    verify.add_argument("path", type=Path,
                        help="a run folder, one gate JSON, or a bundle (.tar.gz)")
    verify.add_argument("--key", action="append", default=[], metavar="PUB",
                        help="the signer's public key file (.pub) or its fingerprint; "
                        "repeat for several signers")


def _bad_input(exc: Exception) -> int:
    Console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {escape(shown(exc))}",
                                               highlight=False)
    return BAD_INPUT


def verify_command(args: argparse.Namespace) -> int:
    """Print what was checked, what was altered and who signed; the exit code says which."""
    console = Console(soft_wrap=True)
    try:
        trusted = {trusted_fingerprint(k) for k in args.key} if args.key else trusted_here()
    except (OSError, ValueError, ConfigError) as exc:
        return _bad_input(exc)
    try:
        found = examine(args.path)
    except NotVerifiable as exc:  # a mistyped path, a killed run's folder: nothing to check
        return _bad_input(exc)
    code, lines = found.judge(trusted, given=bool(args.key))
    for label, text in lines:
        colour = COLOURS.get(label)
        # A problem quotes what the files say (a waiver's name, a deviation): never raw.
        text = escape(shown(text))
        console.print(f"[{colour}]{label}[/] {text}" if colour else text, highlight=False)
    return code
