"""`kvgate key new | show`: the performer's ed25519 key that signs every record and summary."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from ..core.configuration import ConfigError
from ..options import output_dir
from ..report import (
    KEY_DIR_ENV,
    KEY_ENV,
    PRIVATE_NAME,
    PUBLIC_NAME,
    TRUSTED_DIR,
    PublicKey,
    configured_signer,
    grouped,
    key_dir,
    load_public,
    new_key,
)

EXAMPLES = f"""examples:
  kvgate key new                         create ~/.config/kvgate/{PRIVATE_NAME} (mode 0600)
                                         and {PUBLIC_NAME} beside it
  kvgate key new --out /secure/kvgate    another folder; then sign with it:
                                         export {KEY_ENV}=/secure/kvgate/{PRIVATE_NAME}
  kvgate key show                        the public key and fingerprint this machine signs with
  kvgate verify --key ~/.config/kvgate/{PUBLIC_NAME} reports/RUN_ID.bundle.tar.gz

Every gate record and summary written while a key is present is signed ({KEY_ENV} names the
private key; otherwise the key in ${KEY_DIR_ENV} or ~/.config/kvgate is used). Hand the .pub
file (or its fingerprint) to whoever verifies the run; put other performers' .pub files in
<key folder>/{TRUSTED_DIR}/ to trust them without --key. A key is never overwritten.

exit codes: 0 done, 2 a key already exists, or no key / an unusable key"""


def add_key_commands(commands: argparse._SubParsersAction) -> None:
    """Register `key new [--out DIR]` and `key show`."""
    key = commands.add_parser("key", help="the performer's signing key: new, show",
                              epilog=EXAMPLES,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = key.add_subparsers(dest="key_command", required=True)
    new = verbs.add_parser("new", help="create an ed25519 key pair for signing records",
                           epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    new.add_argument("--out", type=output_dir, default=None, metavar="DIR",
                     help=f"folder for the key pair (default: ${KEY_DIR_ENV} or ~/.config/kvgate)")
    verbs.add_parser("show", help="print the public key and fingerprint records are signed with",
                     epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)


def describe(key: PublicKey, public: Path | None) -> list[str]:
    """The lines that name a public key: where it is, its fingerprint, the key itself."""
    return ([f"public key:  {public}"] if public else []) + [
        f"fingerprint: {grouped(key.fingerprint)} (SHA-256 of the raw ed25519 public key)",
        f"ed25519:     {key.text}"]


def _show(err: Console) -> int:
    signer = configured_signer()
    public = key_dir() / PUBLIC_NAME
    if signer is None:
        if not public.is_file():
            err.print(f"no signing key: none in {key_dir()} and {KEY_ENV} is not set; create "
                      "one with `kvgate key new`", style="red", markup=False, highlight=False)
            return 2
        print("\n".join(["no private key here: records are written unsigned",
                         *describe(load_public(public), public)]))
        return 0
    beside = signer.path.with_name(PUBLIC_NAME) if signer.path else None
    print(f"private key: {signer.path} (records and summaries are signed with it)")
    print("\n".join(describe(signer.public, beside if beside and beside.is_file() else None)))
    return 0


def key_command(args: argparse.Namespace) -> int:
    """`kvgate key new` creates the key pair; `kvgate key show` prints the public key."""
    err = Console(stderr=True, soft_wrap=True)
    try:
        if args.key_command == "show":
            return _show(err)
        private, public, key = new_key(args.out or key_dir())
    except (ConfigError, ValueError, OSError) as exc:  # OSError: FileExistsError too
        # A folder checked when parsed (gates.options.output_dir) can still fail: a full disk.
        err.print(f"error: {exc}", style="red", markup=False, highlight=False)
        return 2
    print(f"private key: {private} (mode 0600; keep it on this machine, never in a bundle)")
    print("\n".join(describe(key, public)))
    if args.out and Path(args.out).expanduser().resolve() != key_dir().resolve():
        print(f"sign with it: export {KEY_ENV}={private}")
    return 0
