"""The KV / bandwidth / cost model: KV geometry, bandwidth predictions, array prices, and
candidates ranked by their measured intervals. Pure."""

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
    PricePerPoint,
    evaluate,
    load_catalog,
    price_per_point,
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
from .ranking import Estimate, Ranked, rank_by_interval, ranking_lines, wrong_order_risk
from .spec import CATALOGUE, ModelError
from .workingset import SweepSize, Tier, space_needed, sweep_sizes, tiers

__all__ = [
    "ArrayOption",
    "CATALOGUE",
    "Catalog",
    "CatalogError",
    "Estimate",
    "LMCACHE_CHUNK_TOKENS",
    "ModelError",
    "ModelInputError",
    "PricePerPoint",
    "RANK_KEYS",
    "Ranked",
    "RestoreModel",
    "SEED_BASELINE_BPS",
    "SEED_BASELINE_LABEL",
    "SHIPPED_CATALOG",
    "SweepSize",
    "Tier",
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
    "price_per_point",
    "rank",
    "rank_by_interval",
    "ranking_lines",
    "recompute_time",
    "size_workload",
    "space_needed",
    "sweep_sizes",
    "tiers",
    "wrong_order_risk",
]
