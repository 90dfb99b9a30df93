"""What the storage-read proof holds a candidate's probes against, for G3 and the sweep alike."""

from __future__ import annotations

import psutil

from ..core.configuration import Site, Thresholds
from ..core.quantities import UnitError, parse_rate
from ..core.verdicts import GateRecord, Measurement
from ..proof import ProofContext, labelled_ranks
from .choice import EngineRun
from .runner import engine_site, kv_bytes_per_token


def _bytes_per_second(m: Measurement | None) -> float | None:
    """A G1 bandwidth in bytes/s (core/units reads its unit); None when absent or unreadable."""
    try:
        return parse_rate(f"{m.value} {m.unit}") if m and m.value is not None else None
    except UnitError:
        return None


def proof_context(site: Site, run: EngineRun, thresholds: Thresholds,
                  g1: GateRecord | None) -> tuple[ProofContext, int | None]:
    """The proof's context (G1's KV-restore bandwidth from ``g1``, the link, the host's
    memory, the candidate's CPU tier and ranks) and the KV bytes per token (None: unknown)."""
    restore = next((m for m in (g1.measurements if g1 else []) if m.id == "g1.kv_restore_bw"),
                   None)
    arms = engine_site(site, run)
    candidate = arms.arms.get("candidate")
    try:
        per_token = kv_bytes_per_token(arms, run)
    except (ValueError, OSError):
        per_token = None
    return ProofContext(
        read_fraction_min=thresholds.g3.storage_read_fraction_min,
        band=(thresholds.g3.storage_side_band_min, thresholds.g3.storage_side_band_max),
        restore_bw=_bytes_per_second(restore),
        link_bw=site.ceilings.read_bw, memory_bytes=psutil.virtual_memory().total,
        cpu_tier_bytes=candidate.cpu_tier if candidate else None,
        expected_ranks=labelled_ranks(candidate.engine, candidate.tp, candidate.pp, candidate.dp)
        if candidate else None), per_token
