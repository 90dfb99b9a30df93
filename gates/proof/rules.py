"""Adapter rules: which series of a scrape answer a quantity, and how an engine's ranks add up.

A rule answers only when the after-scrape holds a series of its family with its label values;
an absent family, or one without those label values, is "not exposed" (None), never 0. Ranks:
"shard" ranks each count every token of their own KV shard (the least of them is what was read
for every shard, never the sum); "split" ranks serve different requests (their sum). A tier
label is classified (tiers): only the rule's class is read, and an unknown tier that moved, or a
label that varies within a rank and that the rule does not know, is Unclassified (INCONCLUSIVE);
ranks that appear or vanish between the scrapes, like any unpaired series, are a PairingError.
"""

from __future__ import annotations

import re
from collections import defaultdict
from functools import lru_cache

from pydantic import BaseModel, Field

from .pairing import Pairing, PairingError
from .promtext import Sample, add_up
from .tiers import BY_BACKEND, tier_class

# Labels whose values add up within one rank: the model (one per server; another model's
# traffic would break the prompt-token ceiling), LMCache's role and served name, SGLang's
# engine_type, streaming flag and context-parallel ranks (different tokens of one request:
# metrics_collector.py, storage_attachment.py), LMCache MP's cache_salt (lookup.py), and the
# scrape_target kvgate adds when it merges an arm's targets (different servers: replicas).
SUMMED = frozenset({"model_name", "served_model_name", "model", "role", "engine_type",
                    "is_streaming", "attn_cp_rank", "attn_cp_size", "pp_size", "cache_salt",
                    "scrape_target"})


class Unclassified(ValueError):
    """A label the rules cannot place (an unknown tier, an unknown rank label): INCONCLUSIVE."""


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
    # The label naming the tier, its space in tiers.TIERS, and the class this rule reads;
    # backend: the roster's label naming the backend where the tier value defers to it.
    tier: str = ""
    space: str = ""
    cls: str = ""
    backend: str = ""
    lazy: bool = False  # the engine creates the family on first use: it may be absent before

    def describe(self) -> str:
        """The rule as ``pattern{label=~"regex"}``."""
        inner = ",".join(f'{k}=~"{v}"' for k, v in self.labels.items())
        tier = f'{self.tier} is {self.cls}' if self.tier else ""
        return self.pattern + (f"{{{','.join(filter(None, [inner, tier]))}}}"
                               if inner or tier else "")


def rule(pattern: str, *, shard: tuple[str, ...] = (), split: tuple[str, ...] = (),
         roster: str = "", unless: dict[str, str] | None = None, caveat: str = "",
         tier: str = "", space: str = "", cls: str = "", backend: str = "",
         lazy: bool = False, **labels: str) -> Rule:
    """A rule; keyword arguments other than the named ones are label-value regexes."""
    return Rule(pattern=pattern, labels=labels, shard=shard, split=split, roster=roster,
                unless=unless or {}, caveat=caveat, tier=tier, space=space, cls=cls,
                backend=backend, lazy=lazy)


class Found(BaseModel):
    """What one rule answered: the value, the series it added up, and the ranks, if several."""

    value: float
    series: list[str]
    ranks: dict[str, float] = Field(default_factory=dict)  # "tp_rank=5" -> value
    mode: str = ""  # "shard" | "split" | "" (one rank, or no rank labels)
    caveat: str = ""


@lru_cache(maxsize=256)
def _re(text: str) -> re.Pattern[str]:
    return re.compile(text)


def named(pattern: re.Pattern[str], name: str) -> bool:
    """Whether a sample name is the pattern's family, with or without a counter's "_total"."""
    return bool(pattern.fullmatch(name) or pattern.fullmatch(name + "_total")
                or name.endswith("_total") and pattern.fullmatch(name[:-6]))


def _matching(samples: list[Sample], pattern: str, labels: dict[str, str]) -> list[Sample]:
    p, want = _re(pattern), {k: _re(v) for k, v in labels.items()}
    return [s for s in samples if named(p, s.name)
            and all(w.fullmatch(s.labels.get(k, "")) for k, w in want.items())]


def _classified(r: Rule, p: Pairing, series: list[Sample], moved: bool) -> list[Sample]:
    """The series of the rule's class; unknown tiers that moved are Unclassified."""
    if not r.tier:
        return series
    backends = sorted({s.labels[r.backend] for s in _matching(p.after.samples, r.roster, {})
                       if r.backend in s.labels}) if r.backend else []
    chosen, unknown = [], []
    for s in series:
        value = s.labels.get(r.tier, "")
        kind = tier_class(r.space, value)
        if kind == BY_BACKEND:  # one backend per server; none named is unknown
            kind = tier_class(r.space.split(".")[0] + "." + r.backend, backends[0]) \
                if len(backends) == 1 else "unknown"
            value += f'" with {r.backend}="{"|".join(backends) or "(not named)"}'
        if kind == r.cls:
            chosen.append(s)
        elif kind == "unknown" and moved and p.delta(s, r.lazy) > 0:
            unknown.append(f'{r.tier}="{value}"')
    if unknown:
        raise Unclassified(f"{r.pattern}: {', '.join(unknown)} moved in the probe, and the "
                           "engine's source read for kvgate does not say whether that tier is "
                           "storage, memory or another host's memory")
    return chosen


def answer(r: Rule, p: Pairing, worst: bool = False) -> Found | None:
    """The rule's phase delta, or None when the after-scrape has no series it matches.

    worst: shard ranks give their largest value (failures: the worst rank), not the least."""
    present = _classified(r, p, _matching(p.after.samples, r.pattern, r.labels), True)
    was = [] if p.before is None else \
        _classified(r, p, _matching(p.before.samples, r.pattern, r.labels), False)
    if not present and not was:
        return None
    if present and r.unless and any(p.delta(s, r.lazy) > 0 for s in
                                    _matching(p.after.samples, r.pattern, r.unless)):
        return None
    values = [p.delta(s, r.lazy) for s in present]  # an unpairable one names itself first
    if gone := p.vanished(present, was):  # even all of them: never "not exposed" instead
        raise PairingError(f"{gone[0]} is in the before scrape but not in the after scrape")
    names = (*r.shard, *r.split)
    _unknown_labels(r, present, names)
    found = Found(value=add_up(values), series=[s.key for s in present], caveat=r.caveat)
    if not names:
        return found
    roster = _matching(p.after.samples, r.roster, {}) if r.roster else present
    if p.before is not None:
        _same_ranks(roster, _matching(p.before.samples, r.roster, {}) if r.roster else was,
                    names)
    ranks = _by_rank(present, values, roster, names)
    if len(ranks) <= 1:
        return found
    return found.model_copy(update=_aggregate(ranks, names, len(r.shard), worst))


def _unknown_labels(r: Rule, present: list[Sample], names: tuple[str, ...]) -> None:
    known = SUMMED | set(r.labels) | set(names) | {r.tier}
    groups: dict[tuple[str, ...], list[Sample]] = defaultdict(list)
    for s in present:
        groups[_key(s, names)].append(s)
    odd = sorted({k for group in groups.values() for k in {k for s in group for k in s.labels}
                  if k not in known and len({s.labels.get(k) for s in group}) > 1})
    if odd:
        raise Unclassified(f"{r.pattern}: label {', '.join(odd)} takes several values within "
                           "one rank; the rules for this engine do not say whether those are "
                           "ranks that each count every token (the least counts) or replicas "
                           "serving different requests (they add up), so they are not added")


def _ranks_of(samples: list[Sample], names: tuple[str, ...]) -> set[tuple[str, ...]]:
    return {_key(s, names) for s in samples if any(n in s.labels for n in names)}


def _same_ranks(after: list[Sample], before: list[Sample], names: tuple[str, ...]) -> None:
    now, was = _ranks_of(after, names), _ranks_of(before, names)
    if was and now != was:  # a family first created in the probe has no ranks before
        def text(ranks: set) -> str:
            return "; ".join(",".join(f"{n}={v}" for n, v in zip(names, k, strict=True))
                             for k in sorted(ranks))
        parts = [f"rank {text(now - was)} appears in the after scrape only" if now - was else "",
                 f"rank {text(was - now)} vanished from the after scrape" if was - now else ""]
        raise PairingError("; ".join(filter(None, parts)) + ": the engine's ranks changed "
                           "between the scrapes (a restart or a different deployment?)")


def _key(s: Sample, names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(s.labels.get(n, "") for n in names)  # a label the sample lacks is ""


def _by_rank(chosen: list[Sample], values: list[float], roster: list[Sample],
             names: tuple[str, ...]) -> dict[tuple[str, ...], float]:
    # Other labels are summed within a rank. Roster series without any rank label name none.
    out: dict[tuple[str, ...], list[float]] = defaultdict(list)
    for s in roster:
        if any(n in s.labels for n in names):
            out.setdefault(_key(s, names), [])
    for s, v in zip(chosen, values, strict=True):
        out[_key(s, names)].append(v)
    return {k: add_up(v) for k, v in out.items()}


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
    # "tp_rank=10" after "tp_rank=9": ranks are numbers in every engine read. isdecimal, not
    # isdigit: a label such as "²" is a digit that int() refuses, and a server sends any text.
    return tuple((0, int(v), "") if v.isdecimal() else (1, 0, v) for v in key)
