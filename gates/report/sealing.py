"""A report's own SHA-256, written inside it: the hash of the file with that field zeroed.

A document cannot contain the hash of its exact bytes, so the seal covers the file with the
64 hex digits of the seal itself replaced by zeros; anyone can recompute it by hand with
`sed` and `sha256sum`, and `kvgate verify` does.
"""

from __future__ import annotations

import hashlib
import re

UNSEALED = "0" * 64
SEAL_ID = "report-sha256"
_SEAL = re.compile(rf'(id="{SEAL_ID}">)([0-9a-f]{{64}})(<)')
# The digest of the JSON a report renders, in the report's <head>: verify compares the two.
RECORD_META = "kvgate-record-sha256"
_RECORD = re.compile(rf'<meta name="{RECORD_META}" content="([0-9a-f]{{64}})">')


def seal_placeholder() -> str:
    """The element a template writes where the seal will go."""
    return f'<span class="mono" id="{SEAL_ID}">{UNSEALED}</span>'


def _field(html: str) -> re.Match:
    found = list(_SEAL.finditer(html))
    if len(found) != 1:
        raise ValueError(f"expected one {SEAL_ID} field in the report, found {len(found)}")
    return found[0]


def _with_seal(html: str, match: re.Match, digits: str) -> str:
    return html[:match.start(2)] + digits + html[match.end(2):]


def seal(html: str) -> tuple[str, str]:
    """(sealed HTML, its seal): the placeholder replaced by the hash of the zeroed file."""
    match = _field(html)
    digest = hashlib.sha256(_with_seal(html, match, UNSEALED).encode()).hexdigest()
    return _with_seal(html, match, digest), digest


def content_hash(html: str) -> str:
    """The seal a report's content calls for (its hash with the seal zeroed); "" if no seal."""
    try:
        match = _field(html)
    except ValueError:
        return ""
    return hashlib.sha256(_with_seal(html, match, UNSEALED).encode()).hexdigest()


def record_meta(digest: str) -> str:
    """The <meta> element naming the digest of the JSON record a report renders."""
    return f'<meta name="{RECORD_META}" content="{digest}">'


def embedded_records(html: str) -> list[str]:
    """The record digests a report names in <meta> elements: one, or none if written before."""
    return _RECORD.findall(html)


def check_seal(html: str) -> str:
    """Why a report's seal does not match its content ("" when it does)."""
    try:
        match = _field(html)
    except ValueError as exc:
        return str(exc)
    written = match.group(2)
    actual = hashlib.sha256(_with_seal(html, match, UNSEALED).encode()).hexdigest()
    if actual != written:
        return f"the report was altered (its content hashes to {actual[:16]}…, the seal " \
               f"inside it says {written[:16]}…)"
    return ""
