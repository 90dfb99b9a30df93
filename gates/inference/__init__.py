"""The arms G2 and G3 measure: launched engines, KV directories, the page cache, cold-recovery
phases, repetitions, the machine as a control, the paired comparison and the G2/G3 rules."""

from .comparison import (
    ORDERS,
    Pair,
    baseline_shift,
    design_text,
    level_done,
    level_looks,
    look_plan,
    measured_pair,
)
from .correctness import correctness
from .errors import PhaseError
from .g2g3 import by_concurrency, g2_measurements, g3_chains, g3_measurements, starved
from .kv_dir import prepare_kv_dir
from .kv_files import WRITE_QUIET_S, read_back, stored_bytes
from .looks import level_tables
from .machine import DeviceReference, MachineReadings
from .pagecache import drop_page_cache, read_bytes_delta, tree_read_bytes
from .phases import (
    TARGET_LABEL,
    ColdRecovery,
    HttpMetrics,
    MetricsSource,
    evict,
    run_cold_recovery,
    scrape_all,
)
from .process import ArmProcess
from .repetitions import Repetition, repetition
from .sweep import SweepPoint, break_even, proof_from, sweep_figure, sweep_point

__all__ = [
    "ArmProcess",
    "ColdRecovery",
    "DeviceReference",
    "HttpMetrics",
    "MachineReadings",
    "MetricsSource",
    "ORDERS",
    "Pair",
    "PhaseError",
    "Repetition",
    "SweepPoint",
    "TARGET_LABEL",
    "WRITE_QUIET_S",
    "baseline_shift",
    "break_even",
    "by_concurrency",
    "correctness",
    "design_text",
    "drop_page_cache",
    "evict",
    "g2_measurements",
    "g3_chains",
    "g3_measurements",
    "level_done",
    "level_looks",
    "level_tables",
    "look_plan",
    "measured_pair",
    "prepare_kv_dir",
    "proof_from",
    "read_back",
    "read_bytes_delta",
    "repetition",
    "run_cold_recovery",
    "scrape_all",
    "starved",
    "stored_bytes",
    "sweep_figure",
    "sweep_point",
    "tree_read_bytes",
]
