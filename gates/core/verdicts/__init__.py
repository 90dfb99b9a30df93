"""The verdict room of the core: limits, measurements, outcomes, declared measurement
ids, gate records, deviations, request records, coverage. Pure."""

from .coverage import Coverage
from .declared import DECLARED, G1, G2, G3, G4
from .deviation import CAUSES, SHORTENED, Cause, Deviation, Effect
from .measures import INCOMPLETE, Declared, Scope
from .record import (
    GATE_TITLES,
    GATES,
    ChecklistAnswer,
    DutItem,
    GateRecord,
    SignedWaiver,
    Table,
    UpstreamRef,
    Waiver,
    check_run_id,
    json_digest,
    upstream_gate,
)
from .requests import RequestOutcome, RequestRecord
from .verdict import EXIT_CODES, Limit, Measurement, Outcome, gate_verdict

__all__ = [
    "CAUSES",
    "Cause",
    "ChecklistAnswer",
    "Coverage",
    "DECLARED",
    "Declared",
    "Deviation",
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
    "Outcome",
    "RequestOutcome",
    "RequestRecord",
    "SHORTENED",
    "Scope",
    "SignedWaiver",
    "Table",
    "UpstreamRef",
    "Waiver",
    "check_run_id",
    "gate_verdict",
    "json_digest",
    "upstream_gate",
]
