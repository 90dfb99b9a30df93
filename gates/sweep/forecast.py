"""The KV model's forecast beside a sweep's measured line, from what this site measured.

The candidate's bandwidth is G1's KV-restore bandwidth (the latest G1 record of the site, as
the storage-read proof reads it); the baseline's is [sizing] baseline_bw (or the seed's 0.98
GB/s). The memories that serve both arms' probes are the CPU tier, and the GPU cache when the
sweep does not empty it; the page cache is dropped before every probe.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.configuration import Site
from ..engines import EngineRun, engine_site, proof_context
from ..model import SEED_BASELINE_BPS, SEED_BASELINE_LABEL, SweepForecast, Tier, sweep_forecast
from ..proof import ProofContext
from ..session import GateSession


def proofs_of(session: GateSession, run: EngineRun) -> tuple[ProofContext, int | None]:
    """What the storage-read proof holds the sweep's probes against (engines.proof_context)."""
    g1 = session.store.latest_record("g1", session.site.site.name)
    return proof_context(session.site, run, session.thresholds, g1[0] if g1 else None)


def baseline_bandwidth(site: Site) -> tuple[float, str]:
    """The baseline arm's KV read bandwidth as the site states it, and where it was read."""
    if site.sizing.baseline_bw:
        return site.sizing.baseline_bw, "[sizing] baseline_bw"
    return SEED_BASELINE_BPS, SEED_BASELINE_LABEL


def forecast(session: GateSession, run: EngineRun, sizes: Sequence[int],
             tiers: Sequence[Tier]) -> tuple[SweepForecast | None, str]:
    """The forecast at each size, or None and why the model has none to give."""
    baseline = engine_site(session.site, run).arms.get("baseline")
    if baseline is None or baseline.kv_dir is None:
        return None, ("no KV-model forecast: the baseline arm has no KV tier (it recomputes "
                      "every prompt), so the bandwidth model has no baseline bandwidth")
    restore = proofs_of(session, run)[0].restore_bw
    if not restore:
        return None, ("no KV-model forecast: no G1 record of this site gives the candidate's "
                      "KV-restore bandwidth (run `kvgate run g1` first)")
    emptied = "gpu" if session.site.sweep.eviction == "reset" else ""
    memories = [t for t in tiers if t.kind in ("gpu", "cpu") and t.kind != emptied]
    return sweep_forecast(sizes, memories, baseline_bandwidth(session.site),
                          (restore, "G1's KV-restore bandwidth on this site")), ""
