"""GateRecord: one gate's measurements, verdict and the traceability that makes it signable."""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import BaseModel, Field, computed_field

from .deviation import Deviation
from .verdict import Measurement, Outcome, failures_first, gate_verdict

GATES = ("g1", "g2", "g3", "g4")


def check_run_id(run_id: str) -> str:
    """A run id names a folder under the output directory: a plain name, nothing more."""
    if (not run_id or run_id in (".", "..") or "/" in run_id or "\\" in run_id
            or any(ord(c) < 32 or c == "\x7f" for c in run_id)):
        raise ValueError(f"invalid run id {run_id!r}: it must be a plain folder name")
    return run_id


GATE_TITLES = {
    "g1": "G1 arrival acceptance",
    "g2": "G2 single-node baseline",
    "g3": "G3 main gate",
    "g4": "G4 stability soak",
}


def json_digest(body: dict, without: tuple[str, ...] = ()) -> str:
    """SHA-256 of a JSON object with sorted keys (minus the named keys), as kvgate hashes it."""
    kept = {k: v for k, v in body.items() if k not in without}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, indent=2).encode()).hexdigest()


def upstream_gate(gate: str) -> str | None:
    """The gate that must have passed before this one: g2 needs g1, and so on."""
    index = GATES.index(gate)
    return GATES[index - 1] if index else None


class UpstreamRef(BaseModel):
    """Which upstream record a gate stood on, by id and hash."""

    gate: str
    run_id: str
    verdict: Outcome
    record_sha256: str


class DutItem(BaseModel):
    """One identified part of the device under test: an NVMe drive, an md array, a NIC…"""

    role: str  # "NVMe controller", "md array", "block device", "NIC", "RDMA port"
    name: str
    model: str = ""
    serial: str = ""
    firmware: str = ""
    detail: str = ""  # size, level, link speed: what tells two such parts apart


class ChecklistAnswer(BaseModel):
    """One manual checklist item as the on-site engineer answered it."""

    gate: str
    item_id: str  # stable id from the checklist file, e.g. "g1.serial-matches-po"
    text: str  # the question as the engineer saw it
    answer: Literal["pass", "fail", "n.a."]
    note: str = ""
    operator: str
    answered_at: str  # UTC, ISO 8601


class Table(BaseModel):
    """A table a report shows as it is: column headings and rows of text."""

    columns: list[str]
    rows: list[list[str]] = Field(default_factory=list)


class Waiver(BaseModel):
    """A named person's decision that one deviation of one record leaves its verdict's meaning
    intact: it no longer blocks ACCEPT (`kvgate waive`)."""

    kind: Literal["kvgate waiver"] = "kvgate waiver"
    run_id: str  # the run whose record carries the deviation
    gate: str
    deviation: str  # the deviation's whole text, as the record carries it (Deviation.text)
    reason: str
    by: str  # the person who decided, by name
    waived_at: str  # UTC, ISO 8601

    def sha256(self) -> str:
        """SHA-256 of the waiver's canonical JSON: what its signature covers."""
        return json_digest(self.model_dump(mode="json"))


class SignedWaiver(BaseModel):
    """A waiver with its SHA-256 and the performer's signature of it (a .sig body)."""

    waiver: Waiver
    sha256: str
    signature: dict


class GateRecord(BaseModel):
    """A gate's result: the verdict is computed from the measurements, never set by hand."""

    gate: str
    run_id: str
    site: str
    started: str
    finished: str = ""
    measurements: list[Measurement] = Field(default_factory=list)
    thresholds_revision: str = ""
    thresholds_sha256: str = ""
    site_sha256: str = ""
    limits_profile: str = ""
    tool_versions: dict[str, str] = Field(default_factory=dict)
    upstream: UpstreamRef | None = None
    forced: bool = False
    # Each of a declared cause, which alone decides its effect on ACCEPT (deviation.py); an
    # older record's bare text is read with the cause its words were classified by then.
    deviations: list[Deviation] = Field(default_factory=list)
    evidence: dict[str, str] = Field(default_factory=dict)  # relative path -> SHA-256
    # The DUT identity (models, serials, firmware) collected by G1's configuration checks.
    inventory: list[DutItem] = Field(default_factory=list)
    facts: dict[str, str] = Field(default_factory=dict)  # e.g. the workload hash G3 must match
    checklist: list[ChecklistAnswer] = Field(default_factory=list)  # the gate's manual items
    # Tables the report shows as they are, e.g. G3's storage-read evidence chain per level,
    # by title. Left out of the JSON when a gate has none.
    tables: dict[str, Table] = Field(default_factory=dict, exclude_if=lambda v: not v)

    @computed_field
    @property
    def verdict(self) -> Outcome:
        """The gate verdict; an empty gate or an all-ERROR gate is never PASS."""
        return gate_verdict([m.outcome for m in self.measurements])

    @property
    def title(self) -> str:
        """Human title of the gate, e.g. "G1 arrival acceptance"."""
        return GATE_TITLES.get(self.gate, self.gate.upper())

    def ordered(self) -> list[Measurement]:
        """Measurements with failures first."""
        return failures_first(self.measurements)

    def counts(self) -> dict[str, int]:
        """How many measurements ended in each outcome."""
        return {o.value: sum(m.outcome is o for m in self.measurements) for o in Outcome
                if any(m.outcome is o for m in self.measurements)}

    def canonical_json(self) -> str:
        """The record as stable, strict JSON: sorted keys, so its hash is reproducible.

        Built from pydantic's JSON (NaN and infinities become null, as in the store), so the
        text is valid JSON for every reader, not Python's ``NaN`` extension.
        """
        return json.dumps(json.loads(self.model_dump_json()), sort_keys=True, indent=2,
                          allow_nan=False)

    def sha256(self) -> str:
        """SHA-256 of the canonical JSON."""
        return json_digest(json.loads(self.canonical_json()))
