"""The storage-read proof: exposition parsing, each engine's adapter and rules, attribution,
storage-side counters, the evidence chain and its controls, and the server's identity."""

from .attribution import StorageAttribution, attribute, detect_engine, families
from .cachedrop import CacheDrop
from .chain import engine_evidence, labelled_ranks, probe_chain, recompute_row
from .counters import StorageReads, SysfsCounters, double_counted, storage_reads
from .disks import (
    AttributionError,
    DiskCounters,
    PsutilDiskCounters,
    device_read_bytes,
    restore_gbps,
)
from .evidence import ChainWord, Signal, chain_measurement, evidence_table, judge_chain
from .identity import ServerIdentity, server_identity
from .levels import level_evidence
from .measurements import storage_proof
from .probe import ProbeEvidence, ProofContext
from .promtext import (
    MAX_EXPOSITION,
    MetricSet,
    MetricsParseError,
    is_openmetrics,
    merge_targets,
    parse_metrics,
)

__all__ = [
    "AttributionError",
    "CacheDrop",
    "ChainWord",
    "DiskCounters",
    "MAX_EXPOSITION",
    "MetricSet",
    "MetricsParseError",
    "ProbeEvidence",
    "ProofContext",
    "PsutilDiskCounters",
    "ServerIdentity",
    "Signal",
    "StorageAttribution",
    "StorageReads",
    "SysfsCounters",
    "attribute",
    "chain_measurement",
    "detect_engine",
    "device_read_bytes",
    "double_counted",
    "engine_evidence",
    "evidence_table",
    "families",
    "is_openmetrics",
    "judge_chain",
    "labelled_ranks",
    "level_evidence",
    "merge_targets",
    "parse_metrics",
    "probe_chain",
    "recompute_row",
    "restore_gbps",
    "server_identity",
    "storage_proof",
    "storage_reads",
]
