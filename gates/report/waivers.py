"""Waivers: a named person's signed decision that an open deviation leaves a verdict's meaning.

ACCEPT means nothing is open: every deviation that can change what a verdict means (one whose
cause's effect is blocking, gates.core.verdicts.CAUSES) blocks it until the performer re-runs,
or a named person waives it with a reason (`kvgate waive`). A waiver names the deviation by its
record (run, gate) and its whole text, is signed with the performer's key like the records, is kept
in the store's waivers table, and travels inside summary.json, where `kvgate verify` checks
its hash, its signature, and that the record it names carries that deviation.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

from pydantic import BaseModel, computed_field, model_validator

from ..core.configuration import ConfigError
from ..core.verdicts import CAUSES, Cause, Deviation, Effect, SignedWaiver, Waiver
from .signing import (
    PRIVATE_NAME,
    PUBLIC_NAME,
    TRUSTED_DIR,
    SignatureProblem,
    Signer,
    check_signature,
    grouped,
    key_dir,
    load_public,
    load_signer,
)

WAIVER_KIND = "kvgate waiver"


class ChainDeviation(BaseModel):
    """A deviation a chain record carries, as the procurement summary lists it: its cause, the
    effect that follows from the cause alone (gates.core.verdicts.CAUSES) and its waiver."""

    gate: str
    run_id: str
    text: str
    cause: Cause
    waiver: SignedWaiver | None = None  # a blocking one is open until waived

    @model_validator(mode="before")
    @classmethod
    def _older(cls, data: object) -> object:
        # A summary.json written before deviations were typed names no cause: its record's
        # bare text had the cause its words were classified by then (Deviation's legacy path).
        if isinstance(data, dict) and "cause" not in data and isinstance(data.get("text"), str):
            return data | {"cause": Deviation.model_validate(data["text"]).cause}
        return data

    @computed_field
    @property
    def kind(self) -> Effect:
        """Blocking, rehearsal or note: what its cause does to ACCEPT."""
        return CAUSES[self.cause][0]

    @property
    def open(self) -> bool:
        """Whether it keeps the summary from ACCEPT (a blocking deviation nobody waived)."""
        return self.kind is Effect.BLOCKING and self.waiver is None


class WaiverRefused(Exception):
    """A waiver that cannot be given: the message says why and what is open."""


def sign_waiver(waiver: Waiver, signer: Signer) -> SignedWaiver:
    """The waiver signed with the performer's key: its SHA-256 is what the signature covers."""
    digest = waiver.sha256()
    return SignedWaiver(waiver=waiver, sha256=digest,
                        signature=signer.sign({"kind": WAIVER_KIND, "sha256": digest}))


def check_waiver(signed: SignedWaiver) -> tuple[str, str]:
    """(problem, signer's fingerprint) of a signed waiver; problem "" when it holds."""
    if signed.waiver.sha256() != signed.sha256:
        return (f"the waiver was altered (its SHA-256 no longer matches "
                f"{signed.sha256[:16]}…)"), ""
    try:
        statement, key = check_signature(signed.signature)
    except SignatureProblem as exc:
        return f"its signature: {exc}", ""
    if statement.get("kind") != WAIVER_KIND or statement.get("sha256") != signed.sha256:
        return "its signature signs another statement than this waiver", key.fingerprint
    return "", key.fingerprint


def machine_keys() -> set[str]:
    """The keys this machine trusts by its own folders: its own key (the key folder's) and
    every trusted/*.pub. $KVGATE_SIGNING_KEY is not one of them unless those name it: a key
    brought in by the environment signs nothing another reader here would call trusted."""
    folder, found = key_dir(), []
    # No own key (or an unusable one): only trusted/ counts.
    with contextlib.suppress(OSError, ValueError, ConfigError):
        found.append(load_public(folder / PUBLIC_NAME) if (folder / PUBLIC_NAME).is_file()
                     else load_signer(folder / PRIVATE_NAME).public)
    trusted = folder / TRUSTED_DIR
    for pub in sorted(trusted.glob("*.pub")) if trusted.is_dir() else []:
        try:
            found.append(load_public(pub))
        except ValueError:
            continue  # `kvgate verify` names an unreadable trusted key
    return {k.fingerprint for k in found}


def untrusted(fingerprint: str, keys: set[str]) -> str:
    """Why a waiver signed by that key is not taken ("" when this machine trusts it)."""
    if fingerprint in keys:
        return ""
    return (f"signed by {grouped(fingerprint) if fingerprint else 'no valid signature'}, "
            f"which is not one this machine trusts (its own key in {key_dir()}, or a .pub "
            f"in {key_dir() / TRUSTED_DIR}/)")


def trusted_waivers(waivers: Sequence[SignedWaiver],
                    keys: set[str]) -> tuple[list[SignedWaiver], list[str]]:
    """(the waivers that hold and are signed by a trusted key, a line per one set aside)."""
    kept, aside = [], []
    for signed in waivers:
        problem, fingerprint = check_waiver(signed)
        why = problem or untrusted(fingerprint, keys)
        if why:
            w = signed.waiver
            aside.append(f"waiver of {w.gate.upper()} (run {w.run_id}) {w.deviation!r} by "
                         f"{w.by!r} set aside: {why}")
        else:
            kept.append(signed)
    return kept, aside


def waiver_for(waivers: Sequence[SignedWaiver], gate: str, run_id: str,
               text: str) -> SignedWaiver | None:
    """The first waiver of exactly this deviation of this record, if any."""
    return next((w for w in waivers if (w.waiver.gate, w.waiver.run_id, w.waiver.deviation)
                 == (gate, run_id, text)), None)


def choose_deviation(deviations: Sequence[ChainDeviation], wanted: str,
                     gate: str = "") -> ChainDeviation:
    """The one open, waivable deviation that `wanted` names (its text, or how it begins)."""
    mine = [d for d in deviations if not gate or d.gate == gate]
    named = [d for d in mine if d.text == wanted] or [d for d in mine
                                                      if d.text.startswith(wanted)]
    if not named:
        raise WaiverRefused(f"no deviation reads {wanted!r}{f' in {gate.upper()}' if gate else ''};"
                            + _open_list(deviations))
    waivable = [d for d in named if d.open]
    if not waivable:
        d = named[0]
        why = ("is a rehearsal mark: no waiver turns it into a sign-off (re-run for real)"
               if d.kind is Effect.REHEARSAL else "is already waived"
               if d.waiver is not None else "is a note: it does not block ACCEPT")
        raise WaiverRefused(f"{d.gate.upper()} deviation {d.text!r} {why}")
    if len(waivable) > 1:
        raise WaiverRefused(f"{wanted!r} names {len(waivable)} open deviations: give more of "
                            "the text, or --gate;" + _open_list(waivable))
    return waivable[0]


def _open_list(deviations: Sequence[ChainDeviation]) -> str:
    open_ = [d for d in deviations if d.open]
    if not open_:
        return " nothing is open"
    return " open: " + "; ".join(f"{d.gate.upper()} (run {d.run_id}): {d.text!r}" for d in open_)


def waiver_problems(waivers: Sequence[SignedWaiver],
                    carried: Callable[[str, str], list[str] | None]) -> tuple[list[str], list[str]]:
    """(problems, signer fingerprints) of a summary's waivers; ``carried(run, gate)`` is the
    deviations' texts of the record a waiver names, or None when that record is not there."""
    problems, signers = [], []
    for n, signed in enumerate(waivers, 1):
        w = signed.waiver
        problem, fingerprint = check_waiver(signed)
        signers.append(fingerprint)
        if problem:
            problems.append(f"waiver {n} ({w.gate.upper()}, by {w.by}): {problem}")
        deviations = carried(w.run_id, w.gate)
        if deviations is not None and w.deviation not in deviations:
            problems.append(f"waiver {n} ({w.gate.upper()}, by {w.by}): the {w.gate} record of "
                            f"run {w.run_id} carries no deviation {w.deviation!r}")
    return problems, signers
