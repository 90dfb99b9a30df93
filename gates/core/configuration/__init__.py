"""The configuration room of the core: thresholds.toml and site.toml read, validated
and cross-checked (arms, targets, the soak and the sweep), the shipped defaults.

No I/O beyond reading the TOML files."""

from .arms import ADAPTER_NAMES, Arm, ArmError, real_path, render, validate_arms
from .config import (
    ConfigError,
    LoadedFile,
    load_config,
    load_site,
    load_thresholds,
    read_document,
    validate,
    workload_warnings,
)
from .cross_checks import soak_problem
from .settings import (
    LLAMACPP_PINNED,
    VLLM_PINNED,
    Ceilings,
    EngineChoice,
    FioSettings,
    Site,
    SiteInfo,
    Target,
    Topology,
    VllmChoice,
    WorkloadSettings,
)
from .shipped import CHECKOUT, in_checkout, shipped
from .stability import CvPlan
from .thresholds import Decision, G1Limits, G2Limits, G3Limits, G4Limits, Thresholds

__all__ = [
    "ADAPTER_NAMES",
    "Arm",
    "ArmError",
    "CHECKOUT",
    "Ceilings",
    "ConfigError",
    "CvPlan",
    "Decision",
    "EngineChoice",
    "FioSettings",
    "G1Limits",
    "G2Limits",
    "G3Limits",
    "G4Limits",
    "LLAMACPP_PINNED",
    "LoadedFile",
    "Site",
    "SiteInfo",
    "Target",
    "Thresholds",
    "Topology",
    "VLLM_PINNED",
    "VllmChoice",
    "WorkloadSettings",
    "in_checkout",
    "load_config",
    "load_site",
    "load_thresholds",
    "read_document",
    "real_path",
    "render",
    "shipped",
    "soak_problem",
    "validate",
    "validate_arms",
    "workload_warnings",
]
