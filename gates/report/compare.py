"""kvgate compare: candidate arrays' chains side by side, ranked only where intervals part.

Each column is one run's chain, followed by its own citations (G4 -> G3 -> G2 -> G1), never a
"latest for the site" record: on a store holding several candidates of one site, that would
be another array's. G3's gains come with their intervals and levels; two candidates are put in
an order only where those intervals do not overlap (gates.model.ranking, which states the risk
of a wrong order); columns of different workloads, or a simulated engine beside a real one, are
not ranked. The page: comparison_page.py; `kvgate verify` of it: comparison_check.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..core.verdicts import GATES, Cause, GateRecord, Measurement, upstream_gate
from ..model import (
    Catalog,
    Estimate,
    rank_by_interval,
    ranking_lines,
    wrong_order_risk,
)
from ..store import Store, utc_now
from .chain import Found, link_status
from .citing import read_json
from .compare_cost import prices
from .compare_sweep import with_sweeps
from .comparison_model import (
    GAINS,
    NO_RECORD,
    Cited,
    Column,
    CompareError,
    Comparison,
    Figure,
    Gain,
    Ranking,
)
from .record_check import check_cited_records

G1_FIGURES = ("g1.seq_read_bw", "g1.kv_restore_bw", "g1.randread_qd1_p99", "g1.randread_iops")


def run_chain(store: Store, run_id: str) -> tuple[dict[str, Found | None], list[str]]:
    """A run's records, each gate's its own or the one the gate above cites; link notes."""
    chosen: dict[str, Found | None] = {}
    below: Found | None = None
    for gate in reversed(GATES):
        ref = below.record.upstream if below else None
        # The record the gate above stands on, where it cites one: the run's own record of
        # that gate, if different, belongs to another chain.
        source = ref.run_id if ref and ref.gate == gate else run_id
        try:
            found = store.record(source, gate)
        except ValueError as exc:  # a stored body that is not a record (altered, or broken)
            raise CompareError(f"run {source}'s {gate.upper()} record in {store.out_dir} "
                               f"cannot be read: {_first_line(exc)}") from None
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
    elif m.interval_miss is None:
        why = "its record does not say how often its interval may miss (written before " \
              "kvgate stated it)"
    else:
        try:
            estimate = Estimate(name=name, point=m.value, lo=m.interval[0], hi=m.interval[1],
                                miss=m.interval_miss)
        except ValueError as exc:  # a record altered or broken: not a figure to rank
            why = f"its interval is no interval ({_first_line(exc)})"
    return Gain(id=m.id or "", at=m.at or 0, outcome=m.outcome.value, estimate=estimate,
                note=why)


def column(store: Store, run_id: str, array: str, catalog: Catalog | None,
           capacity_needed: int = 0) -> Column:
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
        records=[Cited(gate=g, run_id=f.record.run_id, record_sha256=f.sha256)
                 for g, f in sorted(chosen.items()) if f is not None],
        thresholds_sha256=g3.thresholds_sha256 if g3 else "",
        workload_hash=g3.facts.get("workload_hash", "") if g3 else "",
        limits_profile=g3.limits_profile if g3 else "",
        simulated=bool(g3) and any(d.cause is Cause.SIMULATED_ENGINE for d in g3.deviations),
        g1=[Figure(id=m.id, name=m.name, value=m.value, unit=m.unit, outcome=m.outcome.value,
                   limit=str(m.limit) if m.limit else "", note=m.note)
            for m in (g1.measurements if g1 else []) if m.id in G1_FIGURES],
        gains=[gain_of(m, array or run_id) for m in (g3.measurements if g3 else [])
               if m.id in GAINS])
    return priced(col, catalog, capacity_needed)


def priced(col: Column, catalog: Catalog | None, capacity_needed: int = 0) -> Column:
    """The column with its array's catalogue price, capacity and what they come to."""
    option = next((a for a in catalog.arrays if a.name == col.array), None) if catalog else None
    if option is None:
        return col.model_copy(update={"price_note": "no price: " + (
            f"{col.array!r} is not in the catalogue" if catalog else "no catalogue given")})
    try:
        figures = prices(option.price, option.capacity_tb, col.gains, capacity_needed)
    except ValueError as exc:  # a catalogue price that is no price
        return col.model_copy(update={"price_note": f"no price: {col.array}: {exc}"})
    return col.model_copy(update={"price": option.price, "capacity_tb": option.capacity_tb,
                                  **dict(figures)})


def differences(columns: Sequence[Column]) -> list[str]:
    """What the chains do not share, named with each candidate's value."""
    out = []
    measured = [c for c in columns if c.verdicts["g3"] != NO_RECORD]
    for field, what in (("workload_hash", "workload hash"),
                        ("simulated", "engine kind (simulated or real)"),
                        ("thresholds_sha256", "thresholds file"),
                        ("limits_profile", "limits profile")):
        values = {getattr(c, field) for c in measured}
        if len(values) > 1:
            each = ", ".join(f"{c.array}: {_shown(getattr(c, field))}" for c in measured)
            out.append(f"different {what} ({each})")
    return out


STOPS_RANKING = ("different workload hash", "different engine kind")


def _shown(value: str | bool) -> str:
    if isinstance(value, bool):
        return "simulated" if value else "real"
    return value[:16] or "none"


def _first_line(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)  # pydantic: its first message, not its help URL
    return errors()[0]["msg"] if callable(errors) else str(exc).splitlines()[0]


def rankings(columns: Sequence[Column]) -> list[Ranking]:
    """Every gain at every level, ranked across the candidates whose records give it."""
    keys = sorted({(g.id, g.at) for c in columns for g in c.gains})
    out = []
    for id, at in keys:
        have, unranked = [], []
        for c in columns:
            g = next((g for g in c.gains if (g.id, g.at) == (id, at)), None)
            if g is None or g.estimate is None:
                why = g.note if g else ("no G3 record" if c.verdicts["g3"] == NO_RECORD
                                        else "not measured")
                unranked.append(f"{c.array}: {why}")
            else:
                have.append(g.estimate)
        ranked = rank_by_interval(have) if have else []
        out.append(Ranking(id=id, at=at, ranked=ranked, lines=ranking_lines(ranked),
                           unranked=unranked))
    return out


def judged(columns: Sequence[Column]) -> tuple[list[str], list[Ranking], str]:
    """(differences, rankings, risk) the columns give: what compare states and verify re-derives."""
    diff = differences(columns)
    stop = [d for d in diff if d.startswith(STOPS_RANKING)]
    ranked = [] if stop else rankings(columns)
    return diff, ranked, risk_text(ranked, stop)


def compare(store: Store, runs: Sequence[tuple[str, str]], catalog: Catalog | None = None,
            capacity_needed: int = 0, sweeps: Mapping[str, str] | None = None) -> Comparison:
    """The comparison of the named (run id, array name) candidates (capacity_needed: bytes of
    KV the site must hold, for each array's count and price; 0 when not given; sweeps: array
    -> the sweep that measured its tier, for its break-even size)."""
    ids = [run_id for run_id, _ in runs]
    if len(set(ids)) < 2 or len(set(ids)) < len(ids):
        raise CompareError(f"compare needs two or more different runs, not {', '.join(ids)}")
    columns = [column(store, run_id, array, catalog, capacity_needed) for run_id, array in runs]
    names = [c.array for c in columns]
    if len(set(names)) < len(names):
        raise CompareError(f"two candidates have one name ({', '.join(names)}): name each "
                           "run's array, RUN_ID=ARRAY")
    verify_cited(store, columns)
    columns = with_sweeps(columns, store.out_dir, sweeps or {})
    diff, ranked, risk = judged(columns)
    return Comparison(created=utc_now(), columns=columns, differences=diff, rankings=ranked,
                      risk=risk, capacity_needed=capacity_needed,
                      currency=catalog.currency if catalog else "",
                      symbol=catalog.symbol if catalog else "")


def verify_cited(store: Store, columns: Sequence[Column]) -> None:
    """Every record the columns cite, as `kvgate verify` checks it, and as the store holds it:
    a record file edited (or edited and rehashed) after its run is refused, never ranked."""
    paths, problems = [], []
    for col in columns:
        for ref in col.records:
            path = store.run_dir(ref.run_id) / f"{ref.gate}.json"
            shown = f"{ref.run_id}/{ref.gate}.json"
            if not path.is_file() or path.is_symlink():
                problems.append(f"{shown}: missing (run {ref.run_id}'s {ref.gate.upper()} "
                                f"record, which {col.array}'s column cites)")
                continue
            paths.append(path)
            written = (read_json(path)[0] or {}).get("record_sha256")
            if written != ref.record_sha256:
                problems.append(f"{shown}: not the record the store holds for run "
                                f"{ref.run_id}'s {ref.gate.upper()} (it names SHA-256 "
                                f"{str(written)[:16]}…, the store {ref.record_sha256[:16]}…)")
    problems += check_cited_records(paths, store.out_dir).problems
    if problems:
        raise CompareError("nothing was ranked: the records it would cite do not hold: "
                           + "; ".join(dict.fromkeys(problems)))


def risk_text(ranked: Sequence[Ranking], stop: Sequence[str]) -> str:
    """The most that any one order the rankings state is wrong, or why nothing is ranked."""
    if stop:
        return f"No ranking: {'; '.join(stop)}."
    pairs = [wrong_order_risk(r.estimate, o.estimate) for x in ranked for r in x.ranked
             for o in x.ranked if o.name in r.ahead_of]
    if not any(x.ranked for x in ranked):
        return "No ranking: no G3 record gives an interval with how often it may miss."
    if not pairs:
        return "No order: every candidate's interval overlaps the others'."
    return (f"Two candidates are ordered only where their intervals do not overlap; the chance "
            f"that any one such order is wrong is at most {100 * max(pairs):.3g} % (the sum of "
            "the two intervals' one-sided misses, each G3 plan's risk over all its looks).")
