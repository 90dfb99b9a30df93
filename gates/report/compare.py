"""kvgate compare: candidate arrays' chains side by side, ranked only where intervals part.

Each column is one run's chain, followed by its own citations (G4 -> G3 -> G2 -> G1), never a
"latest for the site" record: on a store holding several candidates of one site, that would
be another array's. G3's gains come with their intervals and levels; two candidates are put in
an order only where those intervals do not overlap (gates.core.ranking, which states the risk
of a wrong order), and columns measured on different workloads are not ranked at all.
First step of issue #28: the comparison as JSON and text; the HTML page, its signature and
`kvgate verify` of it come next.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from ..core import GATES, GateRecord, Measurement, upstream_gate
from ..model import (
    Catalog,
    Estimate,
    PricePerPoint,
    Ranked,
    price_per_point,
    rank_by_interval,
    ranking_lines,
    wrong_order_risk,
)
from ..store import Store, utc_now
from .chain import Found, link_status

GAINS = {"g3.ttft_p50_reduction": "TTFT p50 reduction", "g3.throughput_gain": "throughput gain"}
G1_FIGURES = ("g1.seq_read_bw", "g1.kv_restore_bw", "g1.randread_qd1_p99", "g1.randread_iops")
NO_RECORD = "NO RECORD"


class CompareError(ValueError):
    """A comparison that cannot be made from what was named (a run, an array)."""


class Gain(BaseModel):
    """One G3 gain of one candidate at one concurrency level, as its record states it."""

    id: str
    at: int
    outcome: str
    estimate: Estimate | None  # None: the record states no interval (or no level) for it
    note: str = ""


class Figure(BaseModel):
    """One G1 figure of a candidate."""

    id: str
    name: str
    value: float | None
    unit: str
    outcome: str


class Column(BaseModel):
    """One candidate: its chain's verdicts, G1 figures, G3 gains and prices."""

    run_id: str
    array: str
    site: str
    verdicts: dict[str, str]  # gate -> verdict, or NO RECORD
    chain: list[str]  # how each link holds (or why not)
    thresholds_sha256: str = ""
    workload_hash: str = ""
    limits_profile: str = ""
    g1: list[Figure] = []
    gains: list[Gain] = []
    price: float | None = None
    price_per_tb: float | None = None
    price_per_point: dict[int, PricePerPoint] = {}  # concurrency -> per point of TTFT p50
    price_note: str = ""


class Ranking(BaseModel):
    """One gain at one level, across the candidates that state it."""

    id: str
    at: int
    ranked: list[Ranked] = []
    lines: list[str] = []
    unranked: list[str] = []  # candidates whose record gives no interval here, and why


class Comparison(BaseModel):
    """What `kvgate compare` writes (compare-*.json) and prints."""

    kind: str = "kvgate comparison"
    created: str
    columns: list[Column]
    differences: list[str]  # what the chains do not share; a workload difference stops ranking
    rankings: list[Ranking] = []
    risk: str = ""


def run_chain(store: Store, run_id: str) -> tuple[dict[str, Found | None], list[str]]:
    """A run's records, each gate's its own or the one the gate above cites; link notes."""
    chosen: dict[str, Found | None] = {}
    below: Found | None = None
    for gate in reversed(GATES):
        found = store.record(run_id, gate)
        ref = below.record.upstream if below else None
        if found is None and ref and ref.gate == gate:
            found = store.record(ref.run_id, gate)
        chosen[gate] = Found(*found) if found else None
        below = chosen[gate] or below
    notes = []
    for gate in GATES:
        up = upstream_gate(gate)
        ok, note = link_status(chosen[gate], chosen[up] if up else None)
        if chosen[gate] is not None and ok is not None:
            notes.append(f"{gate.upper()}: {note}" if ok else f"{gate.upper()}: BROKEN, {note}")
    if all(f is None for f in chosen.values()):
        raise CompareError(f"run {run_id} has no gate record in {store.out_dir}")
    return chosen, notes


def gain_of(m: Measurement, name: str) -> Gain:
    """A G3 gain measurement as the candidate's estimate, when its record gives the interval."""
    why, estimate = "", None
    if m.value is None or m.interval is None:
        why = f"no interval ({m.outcome.value})"
    elif m.interval_level is None:
        why = "its record gives no interval level (written before kvgate stated it)"
    else:
        try:
            estimate = Estimate(name=name, point=m.value, lo=m.interval[0], hi=m.interval[1],
                                level=m.interval_level)
        except ValueError as exc:  # a record altered or broken: not a figure to rank
            why = f"its interval is no interval ({str(exc).splitlines()[-1].strip()})"
    return Gain(id=m.id or "", at=m.at or 0, outcome=m.outcome.value, estimate=estimate,
                note=why)


def column(store: Store, run_id: str, array: str, catalog: Catalog | None) -> Column:
    """One candidate's column, from its run's chain."""
    chosen, notes = run_chain(store, run_id)
    records: dict[str, GateRecord | None] = {g: f.record if f else None
                                             for g, f in chosen.items()}
    g1, g3 = records["g1"], records["g3"]
    col = Column(
        run_id=run_id, array=array or run_id,
        site=next(r.site for r in records.values() if r is not None),
        verdicts={g: records[g].verdict.value if records[g] else NO_RECORD for g in GATES},
        chain=notes,
        thresholds_sha256=g3.thresholds_sha256 if g3 else "",
        workload_hash=g3.facts.get("workload_hash", "") if g3 else "",
        limits_profile=g3.limits_profile if g3 else "",
        g1=[Figure(id=m.id, name=m.name, value=m.value, unit=m.unit, outcome=m.outcome.value)
            for m in (g1.measurements if g1 else []) if m.id in G1_FIGURES],
        gains=[gain_of(m, array or run_id) for m in (g3.measurements if g3 else [])
               if m.id in GAINS])
    return priced(col, catalog)


def priced(col: Column, catalog: Catalog | None) -> Column:
    """The column with its array's catalogue price, per TB and per point of TTFT reduction."""
    option = next((a for a in catalog.arrays if a.name == col.array), None) if catalog else None
    if option is None:
        return col.model_copy(update={"price_note": "no price: " + (
            f"{col.array!r} is not in the catalogue" if catalog else "no catalogue given")})
    per_point = {g.at: price_per_point(option.price, g.estimate.lo, g.estimate.point,
                                       g.estimate.hi)
                 for g in col.gains if g.id == "g3.ttft_p50_reduction" and g.estimate}
    return col.model_copy(update={"price": option.price,
                                  "price_per_tb": option.price / option.capacity_tb,
                                  "price_per_point": per_point})


def differences(columns: Sequence[Column]) -> list[str]:
    """What the chains do not share, named with each candidate's value."""
    out = []
    for field, what in (("workload_hash", "workload hash"),
                        ("thresholds_sha256", "thresholds file"),
                        ("limits_profile", "limits profile")):
        values = {getattr(c, field) for c in columns}
        if len(values) > 1:
            each = ", ".join(f"{c.array}: {getattr(c, field)[:16] or 'none'}" for c in columns)
            out.append(f"different {what} ({each})")
    return out


def rankings(columns: Sequence[Column]) -> list[Ranking]:
    """Every gain at every level, ranked across the candidates whose records give it."""
    keys = sorted({(g.id, g.at) for c in columns for g in c.gains})
    out = []
    for id, at in keys:
        have, unranked = [], []
        for c in columns:
            g = next((g for g in c.gains if (g.id, g.at) == (id, at)), None)
            if g is None or g.estimate is None:
                unranked.append(f"{c.array}: {g.note if g else 'not measured'}")
            else:
                have.append(g.estimate)
        ranked = rank_by_interval(have) if have else []
        out.append(Ranking(id=id, at=at, ranked=ranked, lines=ranking_lines(ranked),
                           unranked=unranked))
    return out


def compare(store: Store, runs: Sequence[tuple[str, str]],
            catalog: Catalog | None = None) -> Comparison:
    """The comparison of the named (run id, array name) candidates."""
    ids = [run_id for run_id, _ in runs]
    if len(set(ids)) < 2 or len(set(ids)) < len(ids):
        raise CompareError(f"compare needs two or more different runs, not {', '.join(ids)}")
    columns = [column(store, run_id, array, catalog) for run_id, array in runs]
    names = [c.array for c in columns]
    if len(set(names)) < len(names):
        raise CompareError(f"two candidates have one name ({', '.join(names)}): name each "
                           "run's array, RUN_ID=ARRAY")
    diff = differences(columns)
    comparable = not any(d.startswith("different workload") for d in diff)
    ranked = rankings(columns) if comparable else []
    levels = sorted({g.estimate.level for c in columns for g in c.gains if g.estimate})
    risk = (f"Two candidates are ordered only where their intervals do not overlap; the chance "
            f"that such an order is wrong is at most "
            f"{100 * max(wrong_order_risk(_at(lv), _at(levels[-1])) for lv in levels):.3g} % "
            f"for each order (the two intervals' one-sided misses, levels "
            f"{', '.join(f'{100 * lv:.4g} %' for lv in levels)})." if levels and comparable
            else "No ranking: the candidates ran different workloads." if not comparable
            else "No ranking: no G3 record gives an interval with its level.")
    return Comparison(created=utc_now(), columns=columns, differences=diff, rankings=ranked,
                      risk=risk)


def _at(level: float) -> Estimate:
    return Estimate(name="x", point=0.0, lo=0.0, hi=0.0, level=level)


def text_lines(c: Comparison) -> list[str]:
    """The comparison for the terminal: verdicts, rankings, prices, differences."""
    out = [f"{col.array} (run {col.run_id}): " + ", ".join(
        f"{g.upper()} {v}" for g, v in col.verdicts.items()) for col in c.columns]
    out += [f"not comparable as run: {d}" for d in c.differences]
    for r in c.rankings:
        out.append(f"{GAINS[r.id]} @ concurrency {r.at}:")
        out += [f"  {line}" for line in r.lines] + [f"  unranked: {u}" for u in r.unranked]
    for col in c.columns:
        for at, p in sorted(col.price_per_point.items()):
            span = (f"{p.low:,.0f} … {p.high:,.0f}" if p.high is not None else
                    f"from {p.low:,.0f}, no upper bound" if p.low is not None else "none")
            out.append(f"{col.array}: price per point of TTFT p50 reduction @ {at}: "
                       f"{'—' if p.point is None else f'{p.point:,.0f}'} ({span})")
        if col.price_note:
            out.append(f"{col.array}: {col.price_note}")
    return out + [c.risk]


def write_comparison(out_dir: Path, c: Comparison) -> Path:
    """compare-<created>.json in the output folder; never overwrites one."""
    stamp = c.created.replace(":", "").replace("-", "").replace("+0000", "Z")
    path = out_dir / f"compare-{stamp}-{'-'.join(col.run_id[-6:] for col in c.columns)}.json"
    with path.open("x", encoding="utf-8") as handle:
        handle.write(json.dumps(c.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")
    return path
