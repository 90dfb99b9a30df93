"""Did the KV come from storage? Server counters by engine, per rank and per tier.

The adapters (adapters, adapters_vllm) name each engine's series as its published source spells
them, most trusted first. An absent family, or one without the rule's label values, answers
None ("not exposed"), never 0. Only a tier classified as storage (tiers) is read as storage; a
counter that cannot tell tiers apart, or that counts before the transfer, answers with a caveat.
A series whose delta cannot be taken (pairing) leaves its quantity None with the error, a label
the rules cannot place with the reason: never a fallback to the next rule. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, Field

from .adapters import (
    ADAPTERS,
    BLOCK_SIZE,
    QUANTITIES,
    SIGNATURES,
    SPLITS,
    WORST,
)
from .disks import AttributionError
from .pairing import START_TIME, Pairing, PairingError
from .promtext import MetricSet
from .rules import Found, Rule, Unclassified, answer, named
from .split import Split, attributes, check_void, split_reads

# What the storage-read proof reads of an attribution: a problem in any of them is the proof's.
PROOF_QUANTITIES = ("prompt_tokens", "gpu_hit_tokens", "storage_read_tokens",
                    "storage_read_bytes", "storage_read_blocks", "storage_read_failures",
                    "cpu_hit_tokens")


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
    # quantity -> why its delta cannot be taken (a series unpaired, reset, not a count ...)
    errors: dict[str, str] = Field(default_factory=dict)
    # quantity -> a label the rules cannot place (an unknown tier or rank label): INCONCLUSIVE
    unclassified: dict[str, str] = Field(default_factory=dict)

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


@lru_cache(maxsize=16)
def families(engine: str) -> Callable[[str], bool]:
    """Whether a sample or family name is one the engine's rules read (with start times)."""
    rules = [r for rs in ADAPTERS[engine].values() for r in rs]
    if engine in BLOCK_SIZE:
        rules.append(BLOCK_SIZE[engine])
    if split := SPLITS.get(engine):
        rules += [split.tiers, *(r for b in split.blind for r in (b.rule, *b.minus, *b.void))]
    patterns = [re.compile(p) for p in {START_TIME, *(r.pattern for r in rules),
                                        *(r.roster for r in rules if r.roster)}]

    @lru_cache(maxsize=4096)
    def wanted(name: str) -> bool:
        # A family (TYPE, HELP) or its samples: _total, _sum, _created ... and the bare name.
        base = next((name[:-len(x)] for x in ("_total", "_created", "_sum", "_count", "_bucket")
                     if name.endswith(x)), name)
        return any(named(p, n) for p in patterns for n in (name, base, base + "_sum"))
    return wanted


def _first(rules: list[Rule], p: Pairing, worst: bool) -> tuple[Found | None, int]:
    for i, r in enumerate(rules):
        if (found := answer(r, p, worst)) is not None:
            return found, i
    return None, len(rules)


def _storage_reads(rules: list[Rule], p: Pairing, split: Split | None) -> Found | None:
    # The engine's own attribution first (split); without it, the rules in order, a blind
    # counter that counted a memory tier in an unknown amount refused (Unclassified).
    if split and attributes(split, p):
        found = split_reads(split, p)
        i = rules.index(split.tiers) if split.tiers in rules else len(rules)
    else:
        found, i = _first(rules, p, worst=False)
        blind = [b for b in (split.blind if split else []) if i < len(rules)
                 and b.rule == rules[i]]
        for b in blind:
            check_void(b, p)
    if found is None or found.ranks:
        return found
    # The answer came from a counter without ranks (SGLang's per-request count, from the entry
    # rank's view): a per-rank counter further down still speaks, and the least wins, so one
    # rank that read nothing is not hidden behind another rank's view.
    for later in rules[i + 1:]:
        ranked = answer(later, p) if later.shard or later.split else None
        if ranked is not None and ranked.ranks:
            series = found.series + ranked.series
            if ranked.value < found.value:
                series.append(f"derived: least of {rules[i].describe()} and the per-rank "
                              f"{later.describe()}")
            # No rank read more than the engine's own count of the storage tier's tokens.
            return found.model_copy(update={
                "value": min(found.value, ranked.value), "series": series, "mode": ranked.mode,
                "ranks": {k: min(v, found.value) for k, v in ranked.ranks.items()}})
    return found


def _block_size(engine: str, after: MetricSet, given: int | None) -> tuple[int | None, str]:
    r = BLOCK_SIZE.get(engine)
    values = {s.value for s in after.select(r.pattern)} if r else set()
    said = values.pop() if len(values) == 1 else None
    if given:
        if said is not None and said != given:  # the user's figure against the engine's own
            raise PairingError(f"the block size given ({given} tokens: --block-tokens, or "
                               f"the arm's kv_block_tokens) contradicts the engine's own "
                               f"{r.pattern} = {said:g}")
        return given, f"{given}"
    if said is None or not said > 0 or not float(said).is_integer():
        return None, ""  # unknown, or models of different block sizes behind one frontend
    return int(said), f"{int(said)} ({r.pattern})"


def attribute(engine: str, before: MetricSet | None, after: MetricSet,
              block_tokens: int | None = None,
              restart_expected: bool = False) -> StorageAttribution:
    """Deltas of one phase by engine; block_tokens converts block counters (KVBM) to tokens.

    before None: totals since the engine started (settle), not a phase. restart_expected: the
    protocol restarted the engine between the scrapes (its start time must show it)."""
    if engine not in ADAPTERS:
        raise AttributionError(f"unknown engine {engine!r}; known: {', '.join(ADAPTERS)}")
    pairing = Pairing(before, after, restart_expected)
    reads = families(engine)
    pairing.same_engine = any(pairing.has(s) for s in after.samples if reads(s.name))
    v: dict[str, float | None] = dict.fromkeys(QUANTITIES)
    matched: dict[str, list[str]] = {}
    caveats: dict[str, str] = {}
    errors: dict[str, str] = {}
    unclassified: dict[str, str] = {}
    ranks: Found | None = None
    named: dict[str, dict[str, float]] = {}  # quantity -> its ranks, where it names several
    for quantity, rules in ADAPTERS[engine].items():
        try:
            found = _storage_reads(rules, pairing, SPLITS.get(engine)) \
                if quantity == "storage_read_tokens" \
                else _first(rules, pairing, quantity in WORST)[0]
        except PairingError as exc:
            errors[quantity] = str(exc)
            continue
        except Unclassified as exc:
            unclassified[quantity] = str(exc)
            continue
        if found is None:
            continue
        v[quantity], matched[quantity] = found.value, found.series
        named[quantity] = found.ranks
        if found.caveat:
            caveats[quantity] = found.caveat
        if quantity == "storage_read_tokens":
            ranks = found

    for quantity, why in _unmatched(named).items():
        v[quantity], errors[quantity] = None, why
    # Blocks name their tier; a token counter that adds DRAM and disk up (KVBM's) does not.
    try:
        size, how = _block_size(engine, after, block_tokens)
    except PairingError as exc:
        size, how, errors["storage_read_tokens"] = None, "", str(exc)
        v["storage_read_tokens"] = None
    if v["storage_read_blocks"] is not None and size:
        v["storage_read_tokens"] = v["storage_read_blocks"] * size
        matched["storage_read_tokens"] = [f"derived: storage_read_blocks x {how}"]
        caveats.pop("storage_read_tokens", None)
        if "storage_read_blocks" in caveats:
            caveats["storage_read_tokens"] = caveats["storage_read_blocks"]
        ranks = None

    def derive(quantity: str, value: float | None, how: str) -> None:
        if v[quantity] is None and value is not None and quantity not in errors:
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
        rank_mode=ranks.mode if ranks else "", caveats=caveats, errors=errors,
        unclassified=unclassified, unknown=[q for q in QUANTITIES if v[q] is None])



def _unmatched(named: dict[str, dict[str, float]]) -> dict[str, str]:
    """Proof quantities whose counters lack a rank another's name: that rank's figure was not
    read (its series in neither scrape), so their sum or least over the others is refused."""
    def labels(ranks: dict[str, float]) -> frozenset[str]:
        return frozenset(x.split("=", 1)[0] for k in ranks for x in k.split(","))

    ranked = {q: r for q, r in named.items() if q in PROOF_QUANTITIES and len(r) > 1}
    out = {}
    for q, ranks in ranked.items():
        # Only counters that name their ranks by the same labels say the same ranks.
        others = {k: o for o, r in ranked.items() if labels(r) == labels(ranks) for k in r
                  if k not in ranks}
        if others:
            out[q] = "; ".join(f"rank {k} is in the {o} counter but in neither scrape of this "
                               "one: its figure was not read, and the other ranks' cannot "
                               "stand for it" for k, o in others.items())
    return out
