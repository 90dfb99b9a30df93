"""A crippled baseline reads as a great array: G3's gain held against both arms' storage. Pure.

A baseline slower than its own storage (an engine throttled, a connector with one reader, a
tier misconfigured) makes any candidate look great, and a gain far above the vendor's claimed
band is the sign of it. G3 measures each arm's storage with the same short KV-restore job
(gates.engines.armstorage), and the KV model (gates.model.predict, the ideal case: restore time
= KV bytes / bandwidth, nothing else in TTFT, no decode time) turns the two bandwidths into the
most throughput gain storage alone can give: candidate / baseline - 1. Every other part of TTFT
and the decode time are the same on both arms and only shrink it, so it is an upper bound.

A gain above the claimed band and beyond that bound is a blocking deviation: nothing measured
explains it, and only a named person's signed waiver (`kvgate waive`) or a re-run clears it.
Where no bound can be made (a baseline that recomputes, or storage that could not be read),
nothing explains a gain above the band either, and the deviation stands the same way: a
recompute baseline's gain would need the engine's prefill rate, which G3 does not measure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from ..core.configuration import G3Limits
from ..core.statistics import above_claimed_band
from ..core.verdicts import Cause, Deviation, Measurement
from ..model import fmt_rate, predict

# How a deviation of this kind begins: words for people; its cause, Cause.GAIN_BEYOND_STORAGE
# (blocking), is what classifies it.
UNEXPLAINED = "gain beyond the arms' storage"


class ArmStorage(BaseModel):
    """One arm's storage as G3 read it: where, and at what speed, or why not."""

    arm: str
    directory: str = ""  # "": the arm names no kv_dir (it recomputes, or kvgate cannot see it)
    bytes_per_s: float | None = None
    error: str = ""

    def line(self) -> str:
        """The reading in words, for the record's facts and the deviation."""
        if self.bytes_per_s:
            return f"{self.arm} {fmt_rate(self.bytes_per_s)} in {self.directory}"
        if not self.directory:
            return f"{self.arm}: no kv_dir"
        return f"{self.arm} in {self.directory}: not read ({self.error})"


class GainBound(BaseModel):
    """The most output-throughput gain (%) the KV model allows from the arms' storage, and
    what it stands on; gain_pct None: no bound could be made (basis says why)."""

    gain_pct: float | None
    basis: str


def gain_bound(storage: Mapping[str, ArmStorage], kv_bytes: float) -> GainBound:
    """The KV model's bound on G3's throughput gain from both arms' measured read bandwidth."""
    base, cand = storage.get("baseline"), storage.get("candidate")
    if base is None or cand is None:
        return GainBound(gain_pct=None, basis="the arms' storage was not measured")
    if not base.directory:
        return GainBound(gain_pct=None, basis=(
            "the baseline arm names no kv_dir: it recomputes (or reads a tier kvgate cannot "
            "see), and no read bandwidth bounds a gain over recompute (that needs the engine's "
            "prefill rate, which G3 does not measure)"))
    for arm, what in ((base, "baseline"), (cand, "candidate")):
        if not arm.bytes_per_s:
            return GainBound(gain_pct=None, basis=f"the {what}'s storage could not be measured: "
                             f"{arm.error or 'no reading'}")
    # predict's default RestoreModel is the ideal case the bound needs.
    p = predict(kv_bytes, cand.bytes_per_s, baseline_bps=base.bytes_per_s)
    return GainBound(gain_pct=100 * p.throughput_gain, basis=(
        f"{cand.line()}, {base.line()}, the same KV-restore read in each; the ideal case: "
        "restore time = KV bytes / bandwidth, nothing else in TTFT, no decode time"))


def unexplained_gains(gains: Sequence[Measurement], limits: G3Limits,
                      bound: GainBound) -> list[Deviation]:
    """A deviation for each level whose throughput gain is above the claimed band and beyond
    what the arms' storage allows (or where nothing bounds it)."""
    out = []
    for m in gains:
        if m.value is None or not above_claimed_band(m.value, limits.throughput_gain_claimed_max):
            continue
        if bound.gain_pct is not None and m.value <= bound.gain_pct:
            continue
        interval = f" [{m.interval[0]:+.0f}, {m.interval[1]:+.0f} %]" if m.interval else ""
        beyond = (f"above the {bound.gain_pct:+.0f} % the KV model allows at most from the "
                  f"arms' measured storage ({bound.basis})" if bound.gain_pct is not None else
                  f"no prediction can be made: {bound.basis}; nothing measured explains it")
        out.append(Deviation(cause=Cause.GAIN_BEYOND_STORAGE, text=(
            f"{UNEXPLAINED} at concurrency {m.at}: output throughput {m.value:+.0f} %{interval} "
            f"is above the claimed band (+{limits.throughput_gain_min:g}…"
            f"+{limits.throughput_gain_claimed_max:g} %, g3.throughput_gain_claimed_max) and "
            f"{beyond}. A baseline slower than its own storage (an engine throttled or "
            "misconfigured) makes any array look great: re-run with a fairly configured "
            "baseline, or a named person waives it (kvgate waive)")))
    return out
