"""The engine's ranks in the evidence chain: each rank's row, and which ranks were read.

Shard ranks each read their shard of every token (each is held to the floor); replicas (split
ranks) serve different requests, so an idle one is fine. Which ranks were read is a Coverage
over "ranks" (gates.core.verdicts): the ranks the engine's counters name in any of the level's
probes, and any more the site expects (ProofContext.expected_ranks: the engine's TP x PP x DP as
labelled_ranks counts them), each read only if every probe's counters name it. A rank missing
from one probe (a reset, a replica gone between repetitions, a series never created) or one the
site expects and no counter names is not read, and the row says so ("ranks read 2 of 3; not
read: engine=2 ..."): an ERROR, never a rank dropped from a sum or a least. Pure.
"""

from __future__ import annotations

import re

from ..core.verdicts import Coverage
from .evidence import Agreement, Kind, Signal, bounded
from .levels import RANKS
from .probe import ProbeEvidence, ProofContext

ONE_SERIES = "the engine's one series"  # the unit where the counters name no rank apart


def _natural(rank: str) -> tuple:
    # "tp_rank=10" after "tp_rank=9": ranks are numbers in every engine read.
    return tuple((0, int(x), "") if x.isdigit() else (1, 0, x) for x in re.split(r"(\d+)", rank))


def rank_rows(p: ProbeEvidence, ctx: ProofContext, floor: float,
              ceiling: float) -> list[Signal]:
    """Each rank's row, then the ranks read (where the site names them or a probe lacked one)."""
    rows = []
    for rank, value in sorted(p.rank_reads.items()):
        if p.rank_mode == "shard":  # every rank reads its shard of every token
            ok, note = bounded(value, floor, ceiling)
            expected = f"≥ {floor:,.0f}, ≤ {ceiling:,.0f} (every rank reads its shard of " \
                "every token)"
        else:  # replicas serve different requests: an idle one read nothing, and that is fine
            ok, note = bounded(value, 0.0, ceiling)
            expected = "≥ 0 (replicas serve different requests; their sum carries the proof)"
            if ok is Agreement.AGREES and value == 0:
                ok, note = Agreement.ABSENT, "idle: this replica served none of the probe"
        if rank in p.rank_gaps:  # summed over the probes that named it: not its reads
            note = "; ".join(filter(None, [note, f"{p.rank_gaps[rank]}: its sum is not the "
                                           "level's"]))
        rows.append(Signal(kind=Kind.ENGINE, signal=f"rank {rank}", value=value, unit="tokens",
                           expected=expected, agreement=ok, caveat=p.caveat, note=note))
    if ctx.expected_ranks or p.rank_gaps:
        rows.append(ranks_row(p, ctx.expected_ranks))
    return rows


def rank_coverage(p: ProbeEvidence, expected_ranks: int | None) -> Coverage:
    """The ranks named (or the one series), and any more the site expects, read or not."""
    named = sorted(p.rank_reads, key=_natural) or [ONE_SERIES]
    failed = {r: why for r, why in p.rank_gaps.items() if r in named}
    more = [f"rank {k} of the site's {expected_ranks}" for k in
            range(len(named) + 1, (expected_ranks or 0) + 1)]
    for unit in more:
        failed[unit] = f"no counter names it (the engine's counters name {len(named)})"
    units = named + more
    return Coverage(units, [u for u in units if u not in failed], failed, what=RANKS)


def ranks_row(p: ProbeEvidence, expected_ranks: int | None) -> Signal:
    """The ranks read, against those the site expects: every one, or an ERROR naming them."""
    cov = rank_coverage(p, expected_ranks)
    seen = len(p.rank_reads) or 1
    if expected_ranks and seen > expected_ranks:  # more than the site has: not a coverage gap
        return Signal(kind=Kind.CONTROL, signal="ranks the engine's counters name", value=seen,
                      unit="ranks", expected=f"{expected_ranks}", agreement=Agreement.ERROR,
                      note=f"the site's {expected_ranks} ranks contradict the {seen} the "
                      "engine's counters name", coverage=cov)
    return Signal(kind=Kind.CONTROL, signal="ranks the engine's counters name",
                  value=len(cov.read), unit="ranks",
                  expected=f"{len(cov.expected)}, each in every probe",
                  agreement=Agreement.AGREES if cov.complete else Agreement.ERROR,
                  note=cov.describe(), coverage=cov)
