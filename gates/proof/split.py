"""The engine's own split of its cache hits by tier bounds what a tier-blind counter may claim.

Where an engine attributes its hits to tiers (vLLM's prompt_tokens_cached_by_source, SGLang's
cache_source), the tokens it names as memory or another host's memory are never storage,
whatever a tier-blind counter says. The storage-read tokens are the ones it attributes to
storage, plus at most the ones it left unattributed, and of those only what a tier-blind counter
itself saw beyond the tiers it also counts; a blind counter that is known to count a memory tier
in an unknown amount (an LMCache MP L2 adapter in memory moved) cannot show any of them to be
storage: Unclassified, INCONCLUSIVE. Unknown is never storage. Pure.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from .pairing import Pairing
from .promtext import add_up
from .rules import Found, Rule, Unclassified, answer, named
from .tiers import MEMORY, PEER, STORAGE, UNATTRIBUTED, tier_class


class Blind(BaseModel):
    """A tier-blind counter, the attributed series it also counts, and what makes it unusable."""

    rule: Rule
    # Series (tokens) the engine attributed to a tier that this counter also counts: they are
    # taken off what it saw before it may claim any of the unattributed remainder.
    minus: list[Rule] = Field(default_factory=list)
    # Tier-labelled series (not tokens) whose memory or peer tiers moving mean this counter
    # counted memory hits in a number nobody can read: it then proves nothing.
    void: list[Rule] = Field(default_factory=list)


class Split(BaseModel):
    """An engine's tier-labelled hit counter (its rule reads the storage class) and its blind
    counters, most trusted first."""

    tiers: Rule
    blind: list[Blind] = Field(default_factory=list)


def _series(r: Rule, p: Pairing) -> list:
    pattern = re.compile(r.pattern)
    return [s for s in p.after.samples if named(pattern, s.name)
            and all(re.fullmatch(v, s.labels.get(k, "")) for k, v in r.labels.items())]


def _said(r: Rule, p: Pairing) -> str:
    """What the engine attributed in the phase, by label value: "disk 5, host 994 (memory)"."""
    by: dict[str, list[float]] = {}
    for s in _series(r, p):
        by.setdefault(s.labels.get(r.tier, ""), []).append(p.delta(s, r.lazy))
    return ", ".join(f"{v or '(none)'} {add_up(x):,.0f} ({tier_class(r.space, v)})"
                     for v, x in sorted(by.items()))


def _class(s: Split, cls: str, p: Pairing) -> Found | None:
    return answer(s.tiers.model_copy(update={"cls": cls, "unless": {}}), p)


def _by_rank(f: Found | None) -> dict[str, float]:
    if f is None:
        return {}
    return f.ranks or {"": f.value}


def _aligned(ranks: dict[str, float], *counters: Found | None) -> bool:
    """Whether every counter is split by the blind counter's ranks: an absent one, or a zero
    without ranks (no disk series), takes no share of any rank."""
    keys = set(ranks) - {""}
    return bool(keys) and all(
        c is None or set(c.ranks) == keys or (not c.ranks and c.value == 0) for c in counters)


def check_void(b: Blind, p: Pairing) -> None:
    """Unclassified when a memory or peer tier this blind counter also counts moved."""
    for gate in b.void:
        # A gate without a tier label is a memory tier by its name (KVBM's h2d onboards).
        moved = [f"{gate.pattern}{{{gate.tier}}} {cls} {f.value:,.0f}"
                 if gate.tier else f"{gate.pattern} {f.value:,.0f}"
                 for cls in ((MEMORY, PEER) if gate.tier else (MEMORY,))
                 if (f := answer(gate.model_copy(update={"cls": cls}), p)) and f.value > 0]
        if moved:
            raise Unclassified(f"{b.rule.pattern} counts every tier of its kind, and the engine "
                               f"says memory served some of them ({'; '.join(moved)}) without "
                               "saying how many tokens: none of it can be shown to be storage")


def attributes(s: Split, p: Pairing) -> bool:
    """Whether the engine's tier-labelled counter is in the after scrape: it then decides."""
    return bool(_series(s.tiers, p))


def split_reads(s: Split, p: Pairing) -> Found | None:
    """The storage-read tokens under the engine's own attribution (attributes() must hold).

    None: it names no storage tier (no series of one), and no blind counter may claim any."""
    disk, rest = _class(s, STORAGE, p), _class(s, UNATTRIBUTED, p)
    for cls in (MEMORY, PEER):  # an unknown tier that moved is Unclassified, whatever is read
        _class(s, cls, p)
    base = disk or Found(value=0.0, series=[], caveat=s.tiers.caveat)
    said = f"{s.tiers.pattern}{{{s.tiers.tier}}}: {_said(s.tiers, p)}"
    head = f"derived: {base.value:,.0f} tokens the engine attributes to storage; its split {said}"
    if rest is None or not rest.value > 0:  # all attributed: not exposed stays not exposed
        return None if disk is None else disk.model_copy(update={"series": [*disk.series, head]})
    for b in s.blind:
        seen = answer(b.rule, p)
        if seen is None:
            continue
        check_void(b, p)
        return _claim(base, rest, seen, b, p, head, said)
    return base.model_copy(update={"series": [*base.series, head + (
        f"; its {rest.value:,.0f} unattributed tokens are not counted as storage: no tier-blind "
        "counter bounds them")]})


def _claim(disk: Found, rest: Found, seen: Found, b: Blind, p: Pairing, head: str,
           said: str) -> Found:
    """Disk + min(unattributed, what the blind counter saw beyond the attributed tiers)."""
    minus = [answer(m, p) for m in b.minus]
    d, u, m = _by_rank(disk), _by_rank(rest), [_by_rank(x) for x in minus]
    ranks = _by_rank(seen)
    if seen.mode == "shard":
        # Ranks of another kind than the engine's attribution (LMCache's TP shards): each
        # rank's claim is capped by the engine's totals.
        d, u = {k: disk.value for k in ranks}, {k: rest.value for k in ranks}
        m = [{k: x.value for k in ranks} for x in minus if x is not None]
    elif not _aligned(ranks, disk, rest, *minus):
        # One counter split by ranks the others lack (one LMCache MP server behind several DP
        # engines, disk tokens on one engine only): rank by rank would lose what the others
        # hold under no rank, or count one engine's remainder once per rank. Totals instead.
        ranks, d, u = {"": seen.value}, {"": disk.value}, {"": rest.value}
        m = [{"": x.value} for x in minus if x is not None]
    claims = {k: d.get(k, 0.0) + min(u.get(k, 0.0), max(0.0, v - add_up(
        [x.get(k, 0.0) for x in m]))) for k, v in ranks.items()}
    value = min(claims.values()) if seen.mode == "shard" else add_up(list(claims.values()))
    blind = max(value - disk.value, 0.0)
    taken = f" less {add_up([x.value for x in minus if x]):,.0f} attributed" if b.minus else ""
    how = (f"{head}; of the {rest.value:,.0f} unattributed tokens {blind:,.0f} claimed by the "
           f"tier-blind {b.rule.describe()} ({seen.value:,.0f} seen{taken})")
    caveat = disk.caveat
    if blind > 0:  # the blind share keeps the blind counter's caveat, with the split said
        caveat = (f"tier-blind: {blind:,.0f} of the {value:,.0f} tokens are the engine's "
                  f"unattributed remainder as {b.rule.pattern} saw it ({seen.value:,.0f}"
                  f"{taken}), {disk.value:,.0f} it attributed to storage (its split {said}); "
                  + seen.caveat.removeprefix("tier-blind: "))
    # The table names the first series: the counter that carried most of the claim.
    series = [*seen.series, *disk.series] if blind > disk.value else [*disk.series, *seen.series]
    return disk.model_copy(update={
        "value": value, "series": [*series, how], "caveat": caveat, "mode": seen.mode,
        "ranks": {k: v for k, v in claims.items() if k}})
