"""What the procurement summary shows per gate: key figures picked by name, and the cost lines.

Pure: records and a catalogue entry in, pydantic rows out. Nothing here invents a number: a
figure the records do not hold is shown as "—", a price the site does not name is not shown.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from ._cost import ArrayOption, Catalog
from ._record import GateRecord
from ._report import format_value
from ._verdict import Measurement

ABSENT = "—"
NO_COST = "no cost model configured"

# (gate, label, pattern of the measurement names it shows); a pattern may match one row per
# concurrency level. Names come from gates/_g1.py, _g2g3.py and _soak.py.
KEY_FIGURES: list[tuple[str, str, str]] = [
    ("g1", "Sequential read bandwidth", r"^Sequential read .*bandwidth$"),
    ("g1", "KV-restore bandwidth", r"^KV-restore read bandwidth$"),
    ("g1", "QD1 random-read p99 latency", r"random read QD1 p99 latency$"),
    ("g2", "TTFT p50", r"^Baseline TTFT p50 @"),
    ("g2", "Output throughput", r"^Baseline output throughput @"),
    ("g3", "TTFT p50 reduction", r"^TTFT p50 reduction @"),
    ("g3", "Output-throughput gain", r"^Output-throughput gain @"),
    ("g3", "Storage-read proof", r"^(KV tokens read from the candidate storage|KV devices' read "
                                 r"bytes vs the engine's storage reads) @"),
    ("g3", "Correctness", r"^Outputs (differing from|identical to) recompute"),
    ("g4", "Effective duration", r"^Effective soak duration$"),
    ("g4", "Request errors", r"^Soak request errors$"),
    ("g4", "Data errors (fio verify)", r"^fio verify errors$"),
    ("g4", "Throughput floor", r"^Lowest window throughput$"),
    ("g4", "TTFT drift", r"^TTFT p50 drift$"),
]
MODEL_FACTS = {"g1": ("pre-flight prediction for G3", "pre-flight predicted TTFT reduction"),
               "g3": ("predicted vs measured",)}
_RATE = {"GB/s": 1e9, "MB/s": 1e6}


class KeyFigure(BaseModel):
    """One key figure of a gate as the record holds it."""

    label: str
    name: str  # the measurement's own name, or the label when it is absent
    value: float | None = None
    unit: str = ""
    text: str = ABSENT
    outcome: str = "not measured"


class CostFigure(BaseModel):
    """One cost line: a catalogue price, or a price divided by a measured figure."""

    label: str
    value: float
    text: str
    basis: str


class CostSection(BaseModel):
    """The cost figures, or why there are none; and the model's prediction beside the result."""

    configured: bool
    note: str
    array: str = ""
    currency: str = ""
    figures: list[CostFigure] = []
    model: dict[str, str] = {}


def _figure(label: str, m: Measurement) -> KeyFigure:
    return KeyFigure(label=label, name=m.name, value=m.value, unit=m.unit, text=format_value(m),
                     outcome=m.outcome.value)


def key_figures(gate: str, record: GateRecord | None) -> list[KeyFigure]:
    """The gate's key figures in a fixed order; "—" for each one the record does not hold."""
    rows = []
    for figure_gate, label, pattern in KEY_FIGURES:
        if figure_gate != gate:
            continue
        found = [m for m in (record.measurements if record else [])
                 if re.search(pattern, m.name)]
        rows += [_figure(label, m) for m in found] or [KeyFigure(label=label, name=label)]
    return rows


def measured(figures: list[KeyFigure], label: str) -> list[KeyFigure]:
    """The figures of one label that hold a value."""
    return [f for f in figures if f.label == label and f.value is not None]


def model_facts(records: dict[str, GateRecord | None]) -> dict[str, str]:
    """What the model predicted (G1 pre-flight) and how G3 compared, as the records state it."""
    out = {}
    for gate, keys in MODEL_FACTS.items():
        record = records.get(gate)
        for key in keys:
            if record and record.facts.get(key):
                out[f"{gate.upper()} {key}"] = record.facts[key]
    return out


def _money(symbol: str, amount: float) -> str:
    return f"{symbol}{amount:,.0f}"


def cost_figures(option: ArrayOption, symbol: str, kv_restore: list[KeyFigure],
                 ttft_cut: list[KeyFigure]) -> list[CostFigure]:
    """Catalogue price, per TB, per GB/s measured by G1, per point of TTFT cut measured by G3."""
    rows = [CostFigure(label="Array price", value=option.price, basis="catalogue",
                       text=_money(symbol, option.price)),
            CostFigure(label="Price per TB", value=option.price / option.capacity_tb,
                       basis=f"catalogue ({option.capacity_tb:g} TB)",
                       text=_money(symbol, option.price / option.capacity_tb))]
    rates = [f.value * _RATE[f.unit] for f in kv_restore if f.unit in _RATE and f.value > 0]
    if rates:
        per = option.price / (min(rates) / 1e9)
        rows.append(CostFigure(label="Price per GB/s of KV-restore bandwidth", value=per,
                               basis=f"G1 measured {min(rates) / 1e9:.3g} GB/s",
                               text=_money(symbol, per)))
    cuts = [f.value for f in ttft_cut if f.unit == "%" and f.value > 0]
    if cuts:
        per = option.price / min(cuts)
        rows.append(CostFigure(label="Price per percentage point of TTFT p50 reduction",
                               value=per, basis=f"G3 measured {min(cuts):.3g} % (lowest level)",
                               text=_money(symbol, per)))
    return rows


def cost_section(array: str, catalog: Catalog | None, catalog_note: str,
                 figures: dict[str, list[KeyFigure]],
                 model: dict[str, str]) -> CostSection:
    """Cost lines for the array the site names, or the reason there are none."""
    if not array or catalog is None:
        why = catalog_note or "the site names no array from the catalogue"
        return CostSection(configured=False, note=f"{NO_COST}: {why}", model=model)
    option = next((a for a in catalog.arrays if a.name == array), None)
    if option is None:
        names = ", ".join(a.name for a in catalog.arrays)
        return CostSection(configured=False, model=model,
                           note=f"{NO_COST}: array {array!r} is not in the catalogue "
                                f"({catalog_note or 'catalogue'}: {names})")
    rows = cost_figures(option, catalog.symbol,
                        measured(figures.get("g1", []), "KV-restore bandwidth"),
                        measured(figures.get("g3", []), "TTFT p50 reduction"))
    return CostSection(configured=True, array=array, currency=catalog.currency, figures=rows,
                       model=model, note=f"prices: {catalog.source or catalog_note}; "
                       "per-figure prices divide the catalogue price by what the gates measured")
