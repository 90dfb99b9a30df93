"""Did the KV come from storage? Server counters by engine, and the devices' own read bytes.

Engine adapters match metric names by pattern, because names drift between versions
(``vllm:`` vs ``vllm_``, with or without ``_total``, ``gpu_prefix_cache_*`` renamed
``prefix_cache_*``). Where an engine does not expose a quantity the answer is None, never 0.
Pure, apart from ``PsutilDiskCounters`` (the real side of the disk-counter seam).
"""

from __future__ import annotations

import math
import re
from typing import Protocol

from pydantic import BaseModel, Field

from ..core import ADAPTER_NAMES
from .promtext import MetricSet, add_up

QUANTITIES = ("prompt_tokens", "cached_tokens", "gpu_hit_tokens", "storage_read_tokens",
              "storage_read_bytes", "storage_read_blocks", "storage_write_tokens",
              "storage_write_bytes", "storage_write_blocks", "recomputed_tokens")

# The reference simulator's counters. `kvgate sim` serves exactly these (labels: model_name);
# every prompt token is counted in exactly one of gpu_hit, storage_read and recomputed.
SIM_METRICS = {
    "kvgate_sim_prompt_tokens_total": "Prompt tokens received.",
    "kvgate_sim_gpu_hit_tokens_total": "Prompt tokens whose KV was found in the GPU LRU cache.",
    "kvgate_sim_storage_read_tokens_total":
        "Prompt tokens whose KV was read from chunk files in the storage tier.",
    "kvgate_sim_storage_read_bytes_total": "Bytes read from chunk files in the storage tier.",
    "kvgate_sim_recomputed_tokens_total": "Prompt tokens prefilled by computation.",
    "kvgate_sim_storage_write_bytes_total": "Bytes written to chunk files in the storage tier.",
}
# vLLM-style aliases the simulator also serves, so vLLM dashboards and scripts work on it.
SIM_VLLM_ALIASES = {
    "vllm:prompt_tokens_total": "kvgate_sim_prompt_tokens_total",
    "vllm:prefix_cache_hits_total": "kvgate_sim_gpu_hit_tokens_total",
}


class Rule(BaseModel):
    """A metric family by name regex (full match), with optional label-value regexes."""

    pattern: str
    labels: dict[str, str] = Field(default_factory=dict)

    def describe(self) -> str:
        """The rule as ``pattern{label=~"regex"}``."""
        inner = ",".join(f'{k}=~"{v}"' for k, v in self.labels.items())
        return self.pattern + (f"{{{inner}}}" if inner else "")


def _r(pattern: str, **labels: str) -> Rule:
    return Rule(pattern=pattern, labels=labels)


# Prefix ':' or '_' (some exporters rewrite colons); the counter suffix may or may not be there.
_V = "vllm[:_]"
_T = "(?:_total)?"
_VLLM = {
    "prompt_tokens": [_r(f"{_V}prompt_tokens{_T}")],
    # prompt_tokens_by_source is counted once per scheduled prefill; prefix_cache_* is
    # re-counted when the scheduler retries a waiting request, so it is only a fallback.
    "gpu_hit_tokens": [_r(f"{_V}prompt_tokens_by_source{_T}", source="local_cache_hit"),
                       _r(f"{_V}(?:gpu_)?prefix_cache_hits{_T}")],
    "storage_read_tokens": [_r(f"{_V}prompt_tokens_by_source{_T}", source="external_kv_transfer"),
                            _r(f"{_V}external_prefix_cache_hits{_T}")],
    "recomputed_tokens": [_r(f"{_V}prompt_tokens_by_source{_T}", source="local_compute")],
    "cached_tokens": [_r(f"{_V}prompt_tokens_cached{_T}")],
}
_L = "lmcache[:_]"
_NOT_CPU = "(?!LocalCPUBackend$).*"  # LMCache's DRAM tier is not storage
_LMCACHE = {
    **_VLLM,
    "storage_read_tokens": [
        _r(f"{_L}num_retrieve_retrieved_tokens_by_backend{_T}", backend=_NOT_CPU),
        _r(f"{_L}num_retrieve_retrieved_tokens{_T}"), _r(f"{_L}num_hit_tokens{_T}"),
        *_VLLM["storage_read_tokens"]],
    "storage_read_bytes": [_r(f"{_L}(?:num_remote_read_bytes|weka_gds_read_bytes){_T}")],
    "storage_write_tokens": [
        _r(f"{_L}num_store_stored_tokens_by_backend{_T}", backend=_NOT_CPU),
        _r(f"{_L}num_store_stored_tokens{_T}"), _r(f"{_L}num_stored_tokens{_T}")],
    "storage_write_bytes": [_r(f"{_L}num_remote_write_bytes{_T}")],
}
_VLLM_NATIVE = {
    **_VLLM,
    "storage_read_bytes": [_r(f"{_V}kv_offload_tiering_read_bytes{_T}"),
                           _r(f"{_V}kv_offload_total_bytes{_T}",
                              transfer_type="(?i)(?!cpu_to_gpu$).*_to_gpu")],
    "storage_write_bytes": [_r(f"{_V}kv_offload_tiering_write_bytes{_T}"),
                            _r(f"{_V}kv_offload_total_bytes{_T}",
                               transfer_type="(?i)gpu_to_(?!cpu$).*")],
}
_S = "sglang[:_]"
_SGLANG = {
    "prompt_tokens": [_r(f"{_S}prompt_tokens{_T}")],
    "cached_tokens": [_r(f"{_S}cached_tokens{_T}")],
    # Newer SGLang splits cached tokens by cache_source: device, host, storage_<backend>.
    "gpu_hit_tokens": [_r(f"{_S}cached_tokens{_T}", cache_source="device")],
    "storage_read_tokens": [_r(f"{_S}prefetched_tokens{_T}"),
                            _r(f"{_S}cached_tokens{_T}", cache_source="storage.*")],
    "storage_write_tokens": [_r(f"{_S}backuped_tokens{_T}")],
}
_KVBM = {
    **_VLLM,
    "storage_read_tokens": [],  # from blocks, when the block size is known
    "storage_read_blocks": [_r(f"(?:dynamo_)?kvbm_onboard_blocks_d2d{_T}")],
    "storage_write_blocks": [_r(f"(?:dynamo_)?kvbm_offload_blocks_(?:h2d|d2d){_T}")],
}
_LLAMACPP = {
    # llama.cpp counts only the prompt tokens it evaluated; reused ones are counted apart.
    "recomputed_tokens": [_r(f"llamacpp[:_]prompt_tokens{_T}")],
    "cached_tokens": [_r(f"llamacpp[:_]prompt_tokens_cached{_T}")],
    "gpu_hit_tokens": [_r(f"llamacpp[:_]prompt_tokens_cached{_T}")],
}
_SIM = {q: [_r(f"kvgate_sim_{q}_total")] for q in QUANTITIES
        if f"kvgate_sim_{q}_total" in SIM_METRICS}
ADAPTERS: dict[str, dict[str, list[Rule]]] = {
    "vllm": _VLLM, "lmcache": _LMCACHE, "vllm-native": _VLLM_NATIVE, "sglang": _SGLANG,
    "dynamo-kvbm": _KVBM, "llamacpp": _LLAMACPP, "kvgate-sim": _SIM}
if tuple(ADAPTERS) != ADAPTER_NAMES:  # the site's `engine =` values are validated against these
    raise ImportError(f"adapters {tuple(ADAPTERS)} differ from core.ADAPTER_NAMES {ADAPTER_NAMES}")
# Most specific first: an LMCache or KVBM server also serves vllm:* metrics.
_SIGNATURES = [("kvgate-sim", "kvgate_sim_"), ("lmcache", "lmcache[:_]"),
               ("vllm-native", f"{_V}kv_offload_"), ("dynamo-kvbm", "(?:dynamo_)?kvbm_"),
               ("sglang", _S), ("llamacpp", "llamacpp[:_]"), ("vllm", _V)]


class AttributionError(ValueError):
    """An unknown engine, or device counters that cannot be compared."""


class StorageAttribution(BaseModel):
    """Where a phase's prompt tokens came from, by server counters. None means not exposed."""

    engine: str
    prompt_tokens: float | None = None
    cached_tokens: float | None = None  # reused from any tier, GPU included
    gpu_hit_tokens: float | None = None
    storage_read_tokens: float | None = None
    storage_read_bytes: float | None = None
    storage_read_blocks: float | None = None
    storage_write_tokens: float | None = None
    storage_write_bytes: float | None = None
    storage_write_blocks: float | None = None
    recomputed_tokens: float | None = None
    matched: dict[str, list[str]] = Field(default_factory=dict)  # quantity -> series/derivation
    unknown: list[str] = Field(default_factory=list)
    resets: list[str] = Field(default_factory=list)  # counters that restarted in the phase

    @property
    def storage_fraction(self) -> float | None:
        """Share of prompt tokens read from storage, when both are known."""
        if self.storage_read_tokens is None or not self.prompt_tokens:
            return None
        return self.storage_read_tokens / self.prompt_tokens


def detect_engine(metrics: MetricSet) -> str | None:
    """The most specific engine whose metric names appear in a scrape, or None."""
    names = metrics.names()
    for engine, prefix in _SIGNATURES:
        if any(re.match(prefix, n) for n in names):
            return engine
    return None


def _apply(rules: list[Rule], after: MetricSet, delta: MetricSet) -> tuple[float, list[str]] | None:
    for rule in rules:
        pattern = re.compile(rule.pattern)
        # A family that exists and carries the rule's labels answers, even with 0: LMCache
        # listing only its CPU backend means nothing came from storage, not "ask the next rule".
        family = after.select(pattern)
        if not family or not all(any(k in s.labels for s in family) for k in rule.labels):
            continue
        labels = {k: re.compile(v) for k, v in rule.labels.items()}
        chosen = delta.select(pattern, labels)
        return add_up([s.value for s in chosen]), [s.key for s in chosen] or [rule.describe()]
    return None


def attribute(engine: str, before: MetricSet, after: MetricSet,
              block_tokens: int | None = None) -> StorageAttribution:
    """Deltas of one phase by engine; block_tokens converts block counters (KVBM) to tokens."""
    if engine not in ADAPTERS:
        raise AttributionError(f"unknown engine {engine!r}; known: {', '.join(ADAPTERS)}")
    delta = after.delta(before)
    values: dict[str, float | None] = dict.fromkeys(QUANTITIES)
    matched: dict[str, list[str]] = {}
    for quantity, rules in ADAPTERS[engine].items():
        found = _apply(rules, after, delta)
        if found is not None:
            values[quantity], matched[quantity] = found

    def derive(quantity: str, value: float | None, how: str) -> None:
        if values[quantity] is None and value is not None:
            values[quantity], matched[quantity] = value, [f"derived: {how}"]

    v = values
    if v["storage_read_blocks"] is not None and block_tokens:
        derive("storage_read_tokens", v["storage_read_blocks"] * block_tokens,
               f"storage_read_blocks x {block_tokens}")
    if v["gpu_hit_tokens"] is not None and v["storage_read_tokens"] is not None:
        derive("cached_tokens", v["gpu_hit_tokens"] + v["storage_read_tokens"],
               "gpu_hit_tokens + storage_read_tokens")
    if v["recomputed_tokens"] is not None and v["cached_tokens"] is not None:
        derive("prompt_tokens", v["recomputed_tokens"] + v["cached_tokens"],
               "recomputed_tokens + cached_tokens")
    if v["prompt_tokens"] is not None and v["cached_tokens"] is not None:
        derive("recomputed_tokens", v["prompt_tokens"] - v["cached_tokens"],
               "prompt_tokens - cached_tokens")
    return StorageAttribution(engine=engine, **values, matched=matched, resets=delta.resets,
                              unknown=[q for q in QUANTITIES if values[q] is None])


# ---- the storage devices' own counters ----------------------------------------------------

class DiskIO(BaseModel):
    """One block device's cumulative counters, as psutil reports them."""

    read_bytes: int = 0
    write_bytes: int = 0
    read_count: int = 0
    write_count: int = 0


class DiskCounters(Protocol):
    """The seam: a snapshot of every block device's counters, by name (``nvme0n1``)."""

    def read(self) -> dict[str, DiskIO]: ...


class PsutilDiskCounters:
    """The real seam: ``psutil.disk_io_counters(perdisk=True)``."""

    def read(self) -> dict[str, DiskIO]:
        """A snapshot of every block device's counters."""
        import psutil  # imported here so the pure part of this module needs no psutil

        try:
            found = psutil.disk_io_counters(perdisk=True) or {}
        except (OSError, RuntimeError) as exc:  # no /proc/diskstats, e.g. in some containers
            raise AttributionError(f"cannot read the disks' I/O counters: {exc}") from None
        return {name: DiskIO(read_bytes=c.read_bytes, write_bytes=c.write_bytes,
                             read_count=c.read_count, write_count=c.write_count)
                for name, c in found.items()}


class FakeDiskCounters:
    """The test double: returns scripted snapshots in turn, then repeats the last."""

    def __init__(self, snapshots: list[dict[str, DiskIO]]):
        if not snapshots:
            raise ValueError("FakeDiskCounters needs at least one snapshot")
        self._snapshots, self.calls = list(snapshots), 0

    def read(self) -> dict[str, DiskIO]:
        """The next scripted snapshot."""
        snapshot = self._snapshots[min(self.calls, len(self._snapshots) - 1)]
        self.calls += 1
        return snapshot


def device_read_bytes(before: dict[str, DiskIO], after: dict[str, DiskIO],
                      devices: list[str]) -> int:
    """Bytes read from the named devices (``nvme0n1`` or ``/dev/nvme0n1``) between snapshots."""
    # Name the devices that carry the KV tier, and not both an md array and its members, or
    # the same reads count twice.
    total = 0
    for device in devices:
        name = device.removeprefix("/dev/")
        if name not in before or name not in after:
            raise AttributionError(f"device {device!r} has no I/O counters; present: "
                                   f"{', '.join(sorted(after)) or 'none'}")
        read = after[name].read_bytes - before[name].read_bytes
        if read < 0:
            raise AttributionError(f"device {device!r}: read bytes went down ({read}); "
                                   f"was the device re-attached?")
        total += read
    return total


def restore_gbps(nbytes: float, seconds: float) -> float | None:
    """Effective KV restore rate in GB/s (10^9 bytes/s); None for an empty interval."""
    if not (math.isfinite(seconds) and seconds > 0) or not math.isfinite(nbytes):
        return None
    return nbytes / seconds / 1e9
