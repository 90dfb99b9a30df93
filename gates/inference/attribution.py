"""Did the KV come from storage? Server counters by engine, per rank and per tier.

The adapters (adapters, adapters_vllm) name each engine's series as its published source spells
them, most trusted first. An absent family, or one without the rule's label values, answers
None ("not exposed"), never 0. DRAM tiers are never storage; a counter that cannot tell them
apart, or that counts before the transfer, answers with a caveat. The devices' own read bytes
are in disks. Pure, apart from ``PsutilDiskCounters``.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field

from .adapters import (
    ADAPTERS,
    BLOCK_SIZE,
    QUANTITIES,
    SIGNATURES,
    WORST,
)
from .disks import AttributionError
from .promtext import MetricSet
from .rules import Found, Rule, answer


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
    # Failed storage reads the engine counted (its own unit: jobs, tokens or blocks); any > 0
    # means some KV the probe needed did not come from storage.
    storage_read_failures: float | None = None
    cpu_hit_tokens: float | None = None  # served from a CPU/DRAM tier: never a storage read
    matched: dict[str, list[str]] = Field(default_factory=dict)  # quantity -> series/derivation
    # Per rank (TP / DP / PP series), the storage-read tokens of each: "worker_id=3" -> tokens.
    # "shard": every rank counts every token of its own shard (storage_read_tokens is then the
    # least of them, never the sum); "split": ranks serve different requests (the sum).
    rank_reads: dict[str, float] = Field(default_factory=dict)
    rank_mode: Literal["", "shard", "split"] = ""
    # quantity -> why its counter cannot tell storage from memory on its own ("tier-blind: …",
    # "counted before the transfer: …"); the proof then needs a control to rule memory out.
    caveats: dict[str, str] = Field(default_factory=dict)
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
    for engine, prefix in SIGNATURES:
        if any(re.match(prefix, n) for n in names):
            return engine
    return None


def _first(rules: list[Rule], after: MetricSet, delta: MetricSet,
           worst: bool) -> tuple[Found | None, int]:
    for i, r in enumerate(rules):
        if (found := answer(r, after, delta, worst)) is not None:
            return found, i
    return None, len(rules)


def _storage_reads(rules: list[Rule], after: MetricSet, delta: MetricSet) -> Found | None:
    found, i = _first(rules, after, delta, worst=False)
    if found is None or found.ranks:
        return found
    # The answer came from a counter without ranks (SGLang's per-request count, from the entry
    # rank's view): a per-rank counter further down still speaks, and the least wins, so one
    # rank that read nothing is not hidden behind another rank's view.
    for later in rules[i + 1:]:
        ranked = answer(later, after, delta) if later.shard or later.split else None
        if ranked is not None and ranked.ranks:
            series = found.series + ranked.series
            if ranked.value < found.value:
                series.append(f"derived: least of {rules[i].describe()} and the per-rank "
                              f"{later.describe()}")
            return found.model_copy(update={"value": min(found.value, ranked.value),
                                            "series": series, "ranks": ranked.ranks,
                                            "mode": ranked.mode})
    return found


def _block_size(engine: str, after: MetricSet, given: int | None) -> tuple[int | None, str]:
    if given:
        return given, f"{given}"
    r = BLOCK_SIZE.get(engine)
    values = {s.value for s in after.select(r.pattern)} if r else set()
    if len(values) != 1 or not (size := values.pop()) > 0 or not float(size).is_integer():
        return None, ""  # unknown, or models of different block sizes behind one frontend
    return int(size), f"{int(size)} ({r.pattern})"


def attribute(engine: str, before: MetricSet, after: MetricSet,
              block_tokens: int | None = None) -> StorageAttribution:
    """Deltas of one phase by engine; block_tokens converts block counters (KVBM) to tokens."""
    if engine not in ADAPTERS:
        raise AttributionError(f"unknown engine {engine!r}; known: {', '.join(ADAPTERS)}")
    delta = after.delta(before)
    v: dict[str, float | None] = dict.fromkeys(QUANTITIES)
    matched: dict[str, list[str]] = {}
    caveats: dict[str, str] = {}
    ranks: Found | None = None
    for quantity, rules in ADAPTERS[engine].items():
        found = _storage_reads(rules, after, delta) if quantity == "storage_read_tokens" \
            else _first(rules, after, delta, quantity in WORST)[0]
        if found is None:
            continue
        v[quantity], matched[quantity] = found.value, found.series
        if found.caveat:
            caveats[quantity] = found.caveat
        if quantity == "storage_read_tokens":
            ranks = found

    # Blocks name their tier; a token counter that adds DRAM and disk up (KVBM's) does not.
    size, how = _block_size(engine, after, block_tokens)
    if v["storage_read_blocks"] is not None and size:
        v["storage_read_tokens"] = v["storage_read_blocks"] * size
        matched["storage_read_tokens"] = [f"derived: storage_read_blocks x {how}"]
        caveats.pop("storage_read_tokens", None)
        if "storage_read_blocks" in caveats:
            caveats["storage_read_tokens"] = caveats["storage_read_blocks"]
        ranks = None

    def derive(quantity: str, value: float | None, how: str) -> None:
        if v[quantity] is None and value is not None:
            v[quantity], matched[quantity] = value, [f"derived: {how}"]

    if v["gpu_hit_tokens"] is not None and v["storage_read_tokens"] is not None:
        derive("cached_tokens", v["gpu_hit_tokens"] + v["storage_read_tokens"],
               "gpu_hit_tokens + storage_read_tokens")
    if v["recomputed_tokens"] is not None and v["cached_tokens"] is not None:
        derive("prompt_tokens", v["recomputed_tokens"] + v["cached_tokens"],
               "recomputed_tokens + cached_tokens")
    if v["prompt_tokens"] is not None and v["cached_tokens"] is not None:
        derive("recomputed_tokens", v["prompt_tokens"] - v["cached_tokens"],
               "prompt_tokens - cached_tokens")
    return StorageAttribution(
        engine=engine, **v, matched=matched, rank_reads=ranks.ranks if ranks else {},
        rank_mode=ranks.mode if ranks else "", caveats=caveats, resets=delta.resets,
        unknown=[q for q in QUANTITIES if v[q] is None])
