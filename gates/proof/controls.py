"""The evidence chain's physics and controls: can the storage have delivered it, could memory?

- Physics: the KV bytes a probe needed over the probe's duration is a lower bound on the rate
  they were restored at; above what G1 measured the storage deliver (KV-restore bandwidth) or
  the link can carry, the KV came from somewhere else (the vendor's own practice: 114 GB over
  8.12 GB/s is about 14 s, against 11.9-13.3 s measured).
- Working set: a probe whose KV fits in the host's memory could have been served by the page
  cache, and one that fits in the engine's CPU tier by that tier. The chain then cannot tell
  storage from memory unless the bytes provably came off the devices (the devices' own read
  counters agree with the engine) or the page cache of the KV files was dropped before the
  probe, and the CPU tier is off or smaller than the working set. A drop counts only where
  mincore showed it took effect (cachedrop.CacheDrop.verified): DONTNEED is advice. Pure.
"""

from __future__ import annotations

from ..core.quantities import format_size
from .cachedrop import RESIDENT_MAX, CacheDrop
from .evidence import Agreement, Kind, Signal

SLACK = 1.10  # measurement noise between G1's fio run and the probe: 10 % above is still physical


def restore_physics(kv_bytes: float, probe_seconds: float, restore_bw: float | None,
                    link_bw: float | None) -> Signal:
    """KV bytes ÷ probe time against G1's KV-restore bandwidth and the link (bytes/s)."""
    bounds = {k: v for k, v in (("G1 KV-restore bandwidth", restore_bw),
                                ("link", link_bw)) if v}
    name = "KV bytes ÷ probe time (lower bound of the restore rate)"
    if not kv_bytes or not probe_seconds or probe_seconds <= 0:
        return Signal(kind=Kind.PHYSICS, signal=name, note="no KV bytes or probe time measured")
    rate = kv_bytes / probe_seconds
    if not bounds:
        return Signal(kind=Kind.PHYSICS, signal=name, value=rate / 1e9, unit="GB/s",
                      note="no G1 KV-restore bandwidth or link ceiling to hold it against")
    label, ceiling = min(bounds.items(), key=lambda kv: kv[1])
    agreement = Agreement.AGREES if rate <= ceiling * SLACK else Agreement.DISAGREES
    note = ("faster than the storage can deliver: the KV came from somewhere else (memory, "
            "another tier)" if agreement is Agreement.DISAGREES else "")
    return Signal(kind=Kind.PHYSICS, signal=name, value=rate / 1e9, unit="GB/s",
                  expected=f"≤ {ceiling * SLACK / 1e9:.3g} GB/s ({label} {ceiling / 1e9:.3g} "
                  f"GB/s + {SLACK - 1:.0%})", agreement=agreement, note=note)


def working_set(kv_bytes: int, memory_bytes: int | None, cpu_tier_bytes: int | None,
                page_cache: CacheDrop | None, devices_agree: bool) -> Signal:
    """Whether the probe's KV could have been served from memory rather than the storage.

    ``page_cache``: the drop before the probes as measured; only a verified one rules memory
    out, and one that was not says why it does not in the note."""
    name = "Probe KV working set vs memory"
    expected = "larger than memory, or the bytes provably read from the devices"
    if cpu_tier_bytes and cpu_tier_bytes >= kv_bytes:
        return Signal(kind=Kind.CONTROL, signal=name, value=kv_bytes, unit="bytes",
                      expected="CPU tier off or smaller than the working set",
                      agreement=Agreement.INCONCLUSIVE, voids_probe=True,
                      note=f"the engine's CPU tier ({format_size(cpu_tier_bytes)}) can hold the "
                      f"whole working set ({format_size(kv_bytes)}): turn it off or make it "
                      "smaller than the working set, or enlarge the workload")
    if memory_bytes is not None and kv_bytes > memory_bytes:
        return Signal(kind=Kind.CONTROL, signal=name, value=kv_bytes, unit="bytes",
                      expected=expected, agreement=Agreement.AGREES, rules_out_memory=True,
                      note=f"more than the host's {format_size(memory_bytes)} of memory")
    dropped = page_cache is not None and page_cache.verified
    if devices_agree or dropped:
        how = ("the devices' own read counters carried the engine's reads" if devices_agree
               else "the page cache of the KV files was dropped before each probe, verified "
               "by mincore")
        return Signal(kind=Kind.CONTROL, signal=name, value=kv_bytes, unit="bytes",
                      expected=expected, agreement=Agreement.AGREES, rules_out_memory=True,
                      note=(f"fits in memory ({format_size(memory_bytes)}), but {how}"
                            if memory_bytes else how))
    undropped = f"; the page-cache drop does not count: {page_cache.failure()}" \
        if page_cache is not None else ""
    if memory_bytes is None:
        return Signal(kind=Kind.CONTROL, signal=name, value=kv_bytes, unit="bytes",
                      expected=expected, note="the host's memory is not known" + undropped)
    return Signal(kind=Kind.CONTROL, signal=name, value=kv_bytes, unit="bytes",
                  expected=expected, agreement=Agreement.INCONCLUSIVE,
                  note=f"the working set ({format_size(kv_bytes)}) fits in the host's "
                  f"{format_size(memory_bytes)} of memory and nothing shows it was read from "
                  "the devices: name the KV devices in [topology] devices, or drop the page "
                  "cache before each probe (root), or enlarge the workload" + undropped)


def cache_drop_row(drop: CacheDrop | None) -> list[Signal]:
    """The page-cache drop as measured (mincore after the drop), where there was one.

    It agrees when verified; otherwise it is a control that could not do its work, neither for
    nor against the storage: what it would have ruled out, the working set row holds open."""
    if drop is None:
        return []
    return [Signal(kind=Kind.CONTROL, signal="page cache of the KV files after the drop",
                   value=drop.resident_after, unit="bytes resident",
                   expected=f"≤ {drop.allowed:,} ({RESIDENT_MAX:.0%} of {drop.bytes:,} bytes)",
                   agreement=Agreement.AGREES if drop.verified else Agreement.ABSENT,
                   note="; ".join(filter(None, [drop.residency(), drop.failure()])))]
