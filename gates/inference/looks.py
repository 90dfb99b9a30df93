"""G3's pairs and the looks made at them, as the report's tables. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from ..core.configuration import Decision, G3Limits
from ..core.statistics import Sequential
from ..core.verdicts import Table
from .comparison import METRICS, Pair, level_looks
from .machine import device_variation, speed_variation


def looks_table(pairs: Sequence[Pair], looks: dict[str, Sequential]) -> Table:
    """Every look of one level: pairs, each figure with its interval, what it decided, and
    the look's own level (a cut-short last look's is not one of the plan's)."""
    rows = []
    made = [looks[id].looks for id, _, _ in METRICS]
    for i in range(max(map(len, made))):
        n, level = next((x[i].pairs, x[i].level) for x in made if i < len(x))
        speed = speed_variation([x for p in pairs[:n] for r in p for x in r.machine])
        device = device_variation([x for p in pairs[:n] for r in p for x in r.device])
        rows.append([str(i + 1), str(n)] + [
            f"{x[i].point:.1f} % [{x[i].lo:.1f}, {x[i].hi:.1f}] → {x[i].outcome}"
            if i < len(x) else "decided" for x in made]
            + ["—" if speed is None else f"{speed:.0f} %",
               "—" if device is None else f"{device:.0f} %", f"{100 * level:.4g} %"])
    return Table(columns=["look", "pairs"] + [title for _, _, title in METRICS]
                 + ["machine speed moved (CPU reference)",
                    "KV device read speed moved (device reference)", "interval's level"],
                 rows=rows)


def level_tables(c: int, pairs: Sequence[Pair], limits: G3Limits,
                 decision: Decision) -> dict[str, Table]:
    """A level's pairs as they ran and the looks made at them, titled for the report."""
    if not pairs:
        return {}
    tables = {f"Pairs @ concurrency {c} (ABBA)": pairs_table(pairs)}
    try:
        looks = level_looks(c, pairs, limits, decision, spent=True)
    except ValueError:  # the comparison's own ERROR says which pair has no figure
        return tables
    return tables | {f"Sequential looks @ concurrency {c}":
                     looks_table(pairs, looks)}


def pairs_table(pairs: Sequence[Pair]) -> Table:
    """Each pair as it ran: order, both arms' TTFT p50 and throughput, the ratio."""
    rows = []
    for i, (b, c) in enumerate(pairs):
        order = "baseline, candidate" if i % 2 == 0 else "candidate, baseline"
        rows.append([str(i + 1), order, _s(b.ttft_p50), _s(c.ttft_p50),
                     _tok(b.output_throughput), _tok(c.output_throughput)])
    return Table(columns=["pair", "order", "baseline TTFT p50", "candidate TTFT p50",
                          "baseline throughput", "candidate throughput"], rows=rows)


def _s(x: float | None) -> str:
    return "—" if x is None else f"{x:.4g} s"


def _tok(x: float | None) -> str:
    return "—" if x is None else f"{x:.4g} tok/s"
