"""Sign-off reports rendered from records: per-gate HTML + JSON, seals, summary, verify."""

from .compare import compare
from .comparison_model import GAINS, CompareError, Comparison
from .comparison_page import write_comparison
from .given import NotVerifiable
from .report import ReportContext, arm_row, format_value, retest_rows, write_reports
from .signing import (
    KEY_DIR_ENV,
    KEY_ENV,
    PRIVATE_NAME,
    PUBLIC_NAME,
    TRUSTED_DIR,
    PublicKey,
    Signer,
    configured_signer,
    grouped,
    key_dir,
    load_public,
    new_key,
    trusted_fingerprint,
    trusted_here,
)
from .summary import build_summary, reissue_summary, write_summary
from .sweep_page import SweepRecord, write_sweep
from .trust import BAD_INPUT, VERIFY_EXIT_TEXT
from .verification import examine
from .waivers import (
    WaiverRefused,
    choose_deviation,
    machine_keys,
    sign_waiver,
    trusted_waivers,
    untrusted,
)

__all__ = [
    "BAD_INPUT",
    "CompareError",
    "Comparison",
    "GAINS",
    "KEY_DIR_ENV",
    "KEY_ENV",
    "NotVerifiable",
    "PRIVATE_NAME",
    "PUBLIC_NAME",
    "PublicKey",
    "ReportContext",
    "Signer",
    "SweepRecord",
    "TRUSTED_DIR",
    "VERIFY_EXIT_TEXT",
    "WaiverRefused",
    "arm_row",
    "build_summary",
    "choose_deviation",
    "compare",
    "configured_signer",
    "examine",
    "format_value",
    "grouped",
    "key_dir",
    "load_public",
    "machine_keys",
    "new_key",
    "reissue_summary",
    "retest_rows",
    "sign_waiver",
    "trusted_fingerprint",
    "trusted_here",
    "trusted_waivers",
    "untrusted",
    "write_comparison",
    "write_reports",
    "write_summary",
    "write_sweep",
]
