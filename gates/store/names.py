"""Run ids, the store's one timestamp form, and files written once and hashed."""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from pathlib import Path

from ..core.verdicts import check_run_id

__all__ = ["check_run_id", "new_run_id", "sha256_file", "utc_now", "write_new"]


def utc_now() -> str:
    """The current UTC time as ISO 8601, the only timestamp form the store holds."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def new_run_id(now: dt.datetime | None = None) -> str:
    """A fresh run id: UTC time plus random suffix, e.g. 20261129T170000Z-3f9a1c.

    An aware ``now`` is converted to UTC; a naive one is taken to be UTC already.
    """
    now = now or dt.datetime.now(dt.UTC)
    if now.tzinfo is not None:
        now = now.astimezone(dt.UTC)
    return f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def sha256_file(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_new(path: Path, text: str) -> Path:
    """Write a file that must not exist yet: the store never overwrites."""
    with path.open("x", encoding="utf-8") as handle:
        handle.write(text)
    return path
