"""The results store (SQLite, WAL) and evidence bundles."""

from .bundle import (
    COMPARISON_JSON,
    MANIFEST,
    SUFFIX,
    SWEEP_JSON,
    BundleError,
    parse_manifest,
    safe_extract,
    write_bundle,
)
from .faults import StoreError
from .names import check_run_id, new_run_id, sha256_file, utc_now, write_new
from .store import DB_NAME, Store

__all__ = [
    "BundleError",
    "COMPARISON_JSON",
    "DB_NAME",
    "MANIFEST",
    "SUFFIX",
    "SWEEP_JSON",
    "Store",
    "StoreError",
    "check_run_id",
    "new_run_id",
    "parse_manifest",
    "safe_extract",
    "sha256_file",
    "utc_now",
    "write_bundle",
    "write_new",
]
