"""Adapter rules: which series of a scrape answer a quantity, and how an engine's ranks add up.

A rule answers only when the after-scrape holds a series of its family with its label values;
an absent family, or one without those label values, is "not exposed" (None), never 0. Ranks:
"shard" ranks each count every token of their own KV shard (the least of them is what was read
for every shard, never the sum); "split" ranks serve different requests (their sum). Pure.
"""

from __future__ import annotations

import re
from collections import defaultdict

from pydantic import BaseModel, Field

from .promtext import MetricSet, Sample, add_up


class Rule(BaseModel):
    """A metric family by name regex (full match), with label-value regexes and its ranks."""

    pattern: str
    labels: dict[str, str] = Field(default_factory=dict)
    shard: tuple[str, ...] = ()  # rank labels whose ranks each count every token of a shard
    split: tuple[str, ...] = ()  # rank labels whose ranks serve different requests
    # Families whose series name every rank that exists, so a rank missing from the rule's own
    # family (a labelled child never incremented) counts 0; "" = the rule's own family.
    roster: str = ""
    # Series of the same family whose rise in the phase means the label split is incomplete
    # (vLLM re-labels a hit it cannot attribute external_unspecified): then the rule does not
    # answer and the next one is asked.
    unless: dict[str, str] = Field(default_factory=dict)
    caveat: str = ""  # why this counter alone cannot prove a storage read

    def describe(self) -> str:
        """The rule as ``pattern{label=~"regex"}``."""
        inner = ",".join(f'{k}=~"{v}"' for k, v in self.labels.items())
        return self.pattern + (f"{{{inner}}}" if inner else "")


def rule(pattern: str, *, shard: tuple[str, ...] = (), split: tuple[str, ...] = (),
         roster: str = "", unless: dict[str, str] | None = None, caveat: str = "",
         **labels: str) -> Rule:
    """A rule; keyword arguments other than the named ones are label-value regexes."""
    return Rule(pattern=pattern, labels=labels, shard=shard, split=split, roster=roster,
                unless=unless or {}, caveat=caveat)


class Found(BaseModel):
    """What one rule answered: the value, the series it added up, and the ranks, if several."""

    value: float
    series: list[str]
    ranks: dict[str, float] = Field(default_factory=dict)  # "tp_rank=5" -> value
    mode: str = ""  # "shard" | "split" | "" (one rank, or no rank labels)
    caveat: str = ""


def _compile(labels: dict[str, str]) -> dict[str, re.Pattern[str]]:
    return {k: re.compile(v) for k, v in labels.items()}


def answer(r: Rule, after: MetricSet, delta: MetricSet, worst: bool = False) -> Found | None:
    """The rule's phase delta, or None when the after-scrape has no series it matches.

    worst: shard ranks give their largest value (failures: the worst rank), not the least."""
    pattern, labels = re.compile(r.pattern), _compile(r.labels)
    present = after.select(pattern, labels)
    if not present:
        return None
    if r.unless and (delta.sum(pattern, _compile(r.unless)) or 0) > 0:
        return None
    chosen = delta.select(pattern, labels)
    found = Found(value=add_up([s.value for s in chosen]), series=[s.key for s in chosen],
                  caveat=r.caveat)
    names = (*r.shard, *r.split)
    if not names:
        return found
    roster = after.select(re.compile(r.roster)) if r.roster else present
    ranks = _by_rank(chosen, roster, names)
    if len(ranks) <= 1:
        return found
    return found.model_copy(update=_aggregate(ranks, names, len(r.shard), worst))


def _key(s: Sample, names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(s.labels.get(n, "") for n in names)  # a label the sample lacks is ""


def _by_rank(chosen: list[Sample], roster: list[Sample],
             names: tuple[str, ...]) -> dict[tuple[str, ...], float]:
    # Other labels (model_name, a scrape_target kvgate adds when it merges targets) are
    # summed within a rank. Roster series without any rank label name no rank.
    values: dict[tuple[str, ...], list[float]] = defaultdict(list)
    for s in roster:
        if any(n in s.labels for n in names):
            values.setdefault(_key(s, names), [])
    for s in chosen:
        values[_key(s, names)].append(s.value)
    return {k: add_up(v) for k, v in values.items()}


def _aggregate(ranks: dict[tuple[str, ...], float], names: tuple[str, ...], n_shard: int,
               worst: bool) -> dict:
    varying = [i for i in range(len(names)) if len({k[i] for k in ranks}) > 1]
    order = sorted(varying, key=lambda i: names[i])

    def text(k: tuple[str, ...]) -> str:
        return ",".join(f"{names[i]}={k[i]}" for i in order)

    groups: dict[tuple[str, ...], list[float]] = defaultdict(list)
    for k, v in ranks.items():
        groups[k[n_shard:]].append(v)  # one group per split rank, holding its shard ranks
    pick = max if worst else min
    value = add_up([pick(v) for v in groups.values()])
    split = any(i >= n_shard for i in varying)
    readable = {text(k): v for k, v in sorted(ranks.items(), key=lambda kv: _natural(kv[0]))}
    return {"value": value, "ranks": readable, "mode": "split" if split else "shard"}


def _natural(key: tuple[str, ...]) -> tuple:
    # "tp_rank=10" after "tp_rank=9": ranks are numbers in every engine read.
    return tuple((0, int(v), "") if v.isdigit() else (1, 0, v) for v in key)
