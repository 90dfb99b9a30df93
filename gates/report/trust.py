"""What `kvgate verify` adds to the hashes: signatures, who signed, and reports bound to records.

The hashes alone show only that nobody changed a file *without recomputing them*. A signature
by the performer's key and a report that names the digest of the JSON it renders close that:
a JSON edited and rehashed apart from its report is named, and a chain nobody signed, or one
signed by a key the reader does not trust, is never called intact.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .sealing import check_seal, content_hash, embedded_records
from .signing import RULE_KEY, SignatureProblem, digest_text, grouped, read_signature, sig_path

# `kvgate verify` exit codes; 2 and 3 keep the meanings `kvgate run` gives them (2: bad input).
INTACT, ALTERED, BAD_INPUT, UNTRUSTED = 0, 1, 2, 4
VERIFY_EXIT_TEXT = ("exit codes: 0 intact and signed by the given (or a trusted) key, 1 something "
                    "was altered, is missing or a signature is invalid, 2 bad input (an "
                    "unreadable --key), 4 intact but unsigned or signed by an unknown key")


# The JSONs whose own digest covers all they say: their signature names no decision rule.
WHOLLY_HASHED = ("summary.json", "comparison.json", "sweep.json")


def rel(path: Path, root: Path | None) -> str:
    """A file's name as verify prints it: relative to what was given (or its bare name)."""
    return Path(os.path.relpath(path, root)).as_posix() if root else path.name


def _read_html(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None  # check_report_seal names an unreadable report


def check_binding(path: Path, digest: str, root: Path | None) -> list[str]:
    """A report beside a JSON must name exactly the JSON's digest (when it names one)."""
    html_path = path.with_suffix(".html")
    html = _read_html(html_path) if html_path.is_file() else None
    if html is None:
        return []
    shown = embedded_records(html)
    if len(shown) > 1:
        return [f"{rel(html_path, root)}: names {len(shown)} records, not one"]
    if shown and shown[0] != digest:
        return [f"{path.name} does not match {html_path.name}: report shows record "
                f"{shown[0][:16]}…, JSON is {digest[:16]}…"]
    return []


def _rule_signed(path: Path, signed: dict, rule: object, root: Path | None) -> list[str]:
    """A gate record's decision rule (outside its hash) must be the one its signature names."""
    if not isinstance(rule, str):
        return [f"{rel(path, root)}: has no decision_rule text for its signature to cover"]
    if signed.get(RULE_KEY) is None:
        return [f"{rel(path, root)}: its signature does not cover the decision rule (the rule "
                "beside the record could have been rewritten after signing)"]
    if signed[RULE_KEY] != digest_text(rule):
        return [f"{rel(path, root)}: signature invalid: the decision rule was altered (it no "
                f"longer hashes to the {str(signed[RULE_KEY])[:16]}… that was signed)"]
    return []


def check_signed(path: Path, digest: str, root: Path | None,
                 rule: object = None) -> tuple[list[str], str | None]:
    """(problems, signer's fingerprint; None unsigned, "" invalid) of a JSON, report and .sig.

    rule: a gate record's decision_rule text, which its signature must cover (None for the
    summary and a comparison, whose digests cover all of them: WHOLLY_HASHED).
    """
    problems = check_binding(path, digest, root)
    sig = sig_path(path)
    if not sig.is_file():
        return problems, None
    try:
        signed, key = read_signature(sig)
    except SignatureProblem as exc:
        return problems + [f"{rel(sig, root)}: {exc}"], ""
    if signed.get("file") != path.name:
        problems.append(f"{rel(sig, root)}: signs {signed.get('file')!r}, not {path.name}")
    if signed.get("sha256") != digest:
        problems.append(f"{rel(path, root)}: signature invalid: {sig.name} signs record "
                        f"{str(signed.get('sha256'))[:16]}…, the JSON is {digest[:16]}…")
    if path.name not in WHOLLY_HASHED:
        problems += _rule_signed(path, signed, rule, root)
    name = str(signed.get("report") or "")
    if not name or Path(name).name != name:
        return problems + [f"{rel(sig, root)}: signs no report beside {path.name}"], key.fingerprint
    report = path.with_name(name)
    html = _read_html(report) if report.is_file() else None
    if html is None:
        problems.append(f"{rel(report, root)}: missing or unreadable ({sig.name} signs it)")
    elif check_seal(html):
        pass  # an unsealed or altered report is named once, by check_report_seal
    elif (actual := content_hash(html)) != signed.get("report_sha256"):
        problems.append(f"{rel(report, root)}: signature invalid: {sig.name} signs report "
                        f"{str(signed.get('report_sha256'))[:16]}…, the report is "
                        f"{actual[:16]}…")
    return problems, key.fingerprint


def stray_signatures(folder: Path, root: Path | None) -> list[str]:
    """.sig files whose signed file is gone: a record or summary removed from the run."""
    return [f"{rel(sig, root)}: a signature without {sig.name.removesuffix('.sig')} beside it"
            for sig in sorted(folder.glob("*.json.sig"))
            if not sig.with_name(sig.name.removesuffix(".sig")).is_file()]


def signer_of(path: Path, digest: str) -> str:
    """Who signed a stored record, for the summary: a fingerprint, "unsigned" or "invalid"."""
    sig = sig_path(path)
    if not sig.is_file():
        return "unsigned"
    try:
        signed, key = read_signature(sig)
    except SignatureProblem:
        return "invalid"
    return key.fingerprint if signed.get("sha256") == digest else "invalid"


@dataclass
class Verification:
    """Everything verify found: files checked, problems, and who signed each signed JSON."""

    files: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    signers: dict[str, str | None] = field(default_factory=dict)  # None unsigned, "" invalid

    def add(self, other: Verification) -> Verification:
        """This verification with another's findings appended (a bundle's runs)."""
        self.files += other.files
        self.problems += other.problems
        self.signers |= other.signers
        return self

    def judge(self, trusted: set[str], given: bool) -> tuple[int, list[tuple[str, str]]]:
        """(exit code, (label, line) pairs): ALTERED, UNSIGNED, UNKNOWN SIGNER or signed by."""
        lines = [("ALTERED", p) for p in self.problems]
        unsigned = [name for name, fp in self.signers.items() if fp is None]
        by: dict[str, list[str]] = {}
        for name, fp in self.signers.items():
            if fp:
                by.setdefault(fp, []).append(name)
        if unsigned:
            lines.append(("UNSIGNED", f"{', '.join(unsigned)}: no signature (.sig) beside "
                          "them; their hashes hold, but anyone who can edit the files can "
                          "recompute those, so nothing shows who wrote them (sign with a key "
                          "from `kvgate key new`)"))
        whose = "the key given with --key" if given else "a key this machine trusts (give " \
            "the performer's public key with --key PUB)"
        for fp, names in by.items():
            if fp not in trusted:
                lines.append(("UNKNOWN SIGNER", f"{', '.join(names)}: signed by "
                              f"{grouped(fp)}, not by {whose}"))
        if self.problems:
            return ALTERED, lines
        if lines:
            return UNTRUSTED, lines
        if not by:
            return UNTRUSTED, [("UNSIGNED", "nothing here is signed")]
        signers = " and ".join(grouped(fp) + (f" ({', '.join(n)})" if len(by) > 1 else "")
                               for fp, n in by.items())
        return INTACT, [("", f"signed by {signers}, intact: {', '.join(self.files)} and every "
                         "evidence file they list")]
