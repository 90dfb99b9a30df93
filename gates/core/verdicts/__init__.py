"""The verdict room of the core: limits, measurements, outcomes, declared measurement
ids, gate records, deviations, request records, coverage. Pure."""

from .coverage import Coverage
from .declared import DECLARED, G1, G2, G3, G4
from .deviation import CAUSES, Cause, Deviation, Effect
from .measures import INCOMPLETE, ONE_READING, Declared, Scope
from .record import (
    BLOCKING,
    GATE_TITLES,
    GATES,
    REHEARSAL,
    SHORTENED,
    SIMULATED_ENGINE,
    ChecklistAnswer,
    DutItem,
    GateRecord,
    SignedWaiver,
    Table,
    UpstreamRef,
    Waiver,
    check_run_id,
    deviation_kind,
    json_digest,
    upstream_gate,
)
from .requests import RequestOutcome, RequestRecord
from .verdict import EXIT_CODES, Covered, Limit, Measurement, Outcome, gate_verdict

__all__ = [
    "BLOCKING",
    "CAUSES",
    "Cause",
    "ChecklistAnswer",
    "Coverage",
    "Covered",
    "DECLARED",
    "Deviation",
    "Declared",
    "DutItem",
    "EXIT_CODES",
    "Effect",
    "G1",
    "G2",
    "G3",
    "G4",
    "GATES",
    "GATE_TITLES",
    "GateRecord",
    "INCOMPLETE",
    "Limit",
    "Measurement",
    "ONE_READING",
    "Outcome",
    "REHEARSAL",
    "RequestOutcome",
    "RequestRecord",
    "SHORTENED",
    "SIMULATED_ENGINE",
    "Scope",
    "SignedWaiver",
    "Table",
    "UpstreamRef",
    "Waiver",
    "check_run_id",
    "deviation_kind",
    "gate_verdict",
    "json_digest",
    "upstream_gate",
]
