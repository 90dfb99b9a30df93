"""The procurement summary's gate chain: which record stands for each gate, and its links.

Each gate's record is this run's when it has one, else the one the next gate stands on, else
the site's latest; a link holds when a record cites exactly the record shown below it. Each
row also says who signed the record (its <gate>.json.sig beside it in the store's run folder).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from ..core.verdicts import GATE_TITLES, GATES, Cause, GateRecord, upstream_gate
from ..store import Store
from .figures import KeyFigure, key_figures
from .trust import signer_of


class ChainLink(BaseModel):
    """One gate of the chain: the record the summary uses and whether its link holds."""

    gate: str
    title: str
    source: str  # "this run", "cited by G3", "latest for the site", "none"
    run_id: str = ""
    verdict: str = "NO RECORD"
    record_sha256: str = ""
    link_ok: bool | None = None  # None: first gate, or no record
    link_note: str = ""
    report: str = ""  # relative to the summary
    limits_profile: str = ""
    forced: bool = False
    simulated: bool = False
    shortened: bool = False
    signer: str = ""  # the signing key's fingerprint, "unsigned", "invalid"; "" no record
    key_figures: list[KeyFigure] = []


@dataclass
class Found:
    """A record with the SHA-256 the store holds for it (the hash it was cited by)."""

    record: GateRecord
    sha256: str


def _stored(store: Store, run_id: str, gate: str) -> Found | None:
    # The stored hash, not a recomputed one: records written before a field was added to
    # GateRecord re-serialise differently, but were cited by the hash they had.
    found = store.record(run_id, gate)
    return Found(*found) if found else None


def choose_records(store: Store, site: str, run_id: str) -> dict[str, tuple[Found | None, str]]:
    """Per gate, the record the summary uses and where it came from, G4 first."""
    chosen: dict[str, tuple[Found | None, str]] = {}
    below: Found | None = None
    for gate in reversed(GATES):
        found, source = _stored(store, run_id, gate), "this run"
        ref = below.record.upstream if below else None
        if found is None and ref and ref.gate == gate:
            found = _stored(store, ref.run_id, gate)
            source = f"cited by {below.record.gate.upper()}"
        if found is None:
            latest = store.latest_record(gate, site)
            found, source = (Found(*latest), "latest for the site") if latest else (None, "none")
        chosen[gate], below = (found, source), found
    return chosen


def link_status(found: Found | None, upstream: Found | None) -> tuple[bool | None, str]:
    """Whether a record cites exactly the upstream record shown below it in the chain."""
    if found is None:
        return None, "no record"
    before = upstream_gate(found.record.gate)
    ref = found.record.upstream
    if before is None:
        return None, "first gate"
    if ref is None:
        return False, f"cites no {before.upper()} record"
    if upstream is None:
        return False, f"cites {before.upper()} of run {ref.run_id}, which the store lacks"
    if ref.record_sha256 != upstream.sha256:
        return False, (f"cites {before.upper()} run {ref.run_id} ({ref.record_sha256[:16]}…), "
                       f"not the {before.upper()} record shown (run {upstream.record.run_id})")
    return True, f"cites {before.upper()} run {ref.run_id}, SHA-256 matches"


def chain_link(gate: str, found: Found | None, source: str, upstream: Found | None,
               run_id: str, runs: Path | None = None) -> ChainLink:
    """The summary's row for one gate; runs is the folder of the run folders (the signer)."""
    ok, note = link_status(found, upstream)
    base = ChainLink(gate=gate, title=GATE_TITLES[gate], source=source, link_ok=ok,
                     link_note=note, key_figures=key_figures(gate, found and found.record))
    if found is None:
        return base
    r = found.record
    return base.model_copy(update=dict(
        run_id=r.run_id, verdict=r.verdict.value, record_sha256=found.sha256,
        report=f"{gate}.html" if r.run_id == run_id else f"../{r.run_id}/{gate}.html",
        limits_profile=r.limits_profile, forced=r.forced,
        simulated=any(d.cause is Cause.SIMULATED_ENGINE for d in r.deviations),
        shortened=any(d.cause is Cause.SHORTENED for d in r.deviations),
        signer=signer_of(runs / r.run_id / f"{gate}.json", found.sha256) if runs else ""))
