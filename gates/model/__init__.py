"""The KV / bandwidth / cost model: KV geometry, bandwidth predictions, array prices. Pure."""

from .bandwidth import (
    SEED_BASELINE_BPS,
    SEED_BASELINE_LABEL,
    ModelInputError,
    RestoreModel,
    fit_calibration,
    fmt_rate,
    predict,
    preflight,
    recompute_time,
)
from .cost import (
    RANK_KEYS,
    SHIPPED_CATALOG,
    ArrayOption,
    Catalog,
    CatalogError,
    evaluate,
    load_catalog,
    rank,
)
from .kv import (
    LMCACHE_CHUNK_TOKENS,
    chunking,
    fmt_bytes,
    fmt_tokens,
    kv_geometry,
    parse_tokens,
    size_workload,
)
from .spec import CATALOGUE, ModelError

__all__ = [
    "ArrayOption",
    "CATALOGUE",
    "Catalog",
    "CatalogError",
    "LMCACHE_CHUNK_TOKENS",
    "ModelError",
    "ModelInputError",
    "RANK_KEYS",
    "RestoreModel",
    "SEED_BASELINE_BPS",
    "SEED_BASELINE_LABEL",
    "SHIPPED_CATALOG",
    "chunking",
    "evaluate",
    "fit_calibration",
    "fmt_bytes",
    "fmt_rate",
    "fmt_tokens",
    "kv_geometry",
    "load_catalog",
    "parse_tokens",
    "predict",
    "preflight",
    "rank",
    "recompute_time",
    "size_workload",
]
