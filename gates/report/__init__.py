"""Sign-off reports rendered from records: per-gate HTML + JSON, seals, summary, verify."""

from .figures import ABSENT, key_figures
from .report import (
    REPORT_REVISION,
    ReportContext,
    arm_row,
    css_string,
    format_value,
    render_html,
    retest_rows,
    write_reports,
)
from .sealing import SEAL_ID, check_seal, seal, seal_placeholder
from .summary import (
    ACCEPT,
    NOT_READY,
    ChainLink,
    Summary,
    build_summary,
    recommend,
    summary_digest,
    write_summary,
)
from .verification import verify

__all__ = [
    "ABSENT",
    "ACCEPT",
    "ChainLink",
    "NOT_READY",
    "REPORT_REVISION",
    "ReportContext",
    "SEAL_ID",
    "Summary",
    "arm_row",
    "build_summary",
    "check_seal",
    "css_string",
    "format_value",
    "key_figures",
    "recommend",
    "render_html",
    "retest_rows",
    "seal",
    "seal_placeholder",
    "summary_digest",
    "verify",
    "write_reports",
    "write_summary",
]
