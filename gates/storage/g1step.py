"""What the pure G1 rules read: a fio step's outcome, and the G1 bandwidth jobs. Pure."""

from __future__ import annotations

from pydantic import BaseModel

from ..core.verdicts import G1
from .fio import FioReport
from .fioerrors import VerifyFailure

# fio job → (declared measurement id, its thresholds key, direction). The steady-state ids are
# the bandwidth id's stem + "_steady_spread" / "_steady_slope".
BW_JOBS = {
    "seqread": ("g1.seq_read_bw", "seq_read_bw_min", "read"),
    "seqwrite": ("g1.seq_write_bw", "seq_write_bw_min", "write"),
    "kvrestore": ("g1.kv_restore_bw", "kv_restore_bw_min", "read"),
}
BW_TITLES = {key: (G1[id].title, limit_key, direction)
             for key, (id, limit_key, direction) in BW_JOBS.items()}


class StepOutcome(BaseModel):
    """What the suite hands the pure G1 rules: fio's report, or why there is none."""

    report: FioReport | None = None
    error: str = ""
    evidence: list[str] = []
    verify_failures: list[VerifyFailure] = []

    def problem(self) -> str:
        """Why no figure can be taken from this step, or ""."""
        return self.error or ("" if self.report else "fio produced no report")


def no_job(*names: str) -> str:
    """A job missing from the report measured nothing: an ERROR, never a 0 that FAILs."""
    return f"fio reported no job named {', '.join(repr(n) for n in names)}"


def mib(n: float) -> str:
    """Bytes as whole MiB with thousands separators, for notes."""
    return f"{n / 1024**2:,.0f} MiB"
