"""What the procurement summary shows per gate: key figures picked by id, and the cost lines.

Pure: records and a catalogue entry in, pydantic rows out. Nothing here invents a number: a
figure the records do not hold is shown as "—", a price the site does not name is not shown.
"""

from __future__ import annotations

from pydantic import BaseModel

from ..core.verdicts import DECLARED, GateRecord, Measurement
from ..model import ArrayOption, Catalog
from .report import format_value

ABSENT = "—"
NO_COST = "no cost model configured"

# (gate, label, the declared measurement ids it shows: gates.core.declared); an id taken per
# concurrency level shows one row per level.
KEY_FIGURES: list[tuple[str, str, tuple[str, ...]]] = [
    ("g1", "Sequential read bandwidth", ("g1.seq_read_bw",)),
    ("g1", "KV-restore bandwidth", ("g1.kv_restore_bw",)),
    ("g1", "QD1 random-read p99 latency", ("g1.randread_qd1_p99",)),
    ("g2", "TTFT p50", ("g2.ttft_p50",)),
    ("g2", "Output throughput", ("g2.output_throughput",)),
    ("g3", "TTFT p50 reduction", ("g3.ttft_p50_reduction",)),
    ("g3", "Output-throughput gain", ("g3.throughput_gain",)),
    ("g3", "Storage-read proof", ("g3.storage_read_fraction", "g3.device_reads")),
    ("g3", "Correctness", ("g3.outputs_differing", "g3.correctness")),
    ("g4", "Effective duration", ("g4.effective_duration",)),
    ("g4", "Request errors", ("g4.request_errors",)),
    ("g4", "Data errors (fio verify)", ("g4.verify_errors",)),
    ("g4", "Throughput floor", ("g4.throughput_floor",)),
    ("g4", "TTFT drift", ("g4.ttft_drift",)),
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
    for figure_gate, label, ids in KEY_FIGURES:
        if figure_gate != gate:
            continue
        found = DECLARED[gate].select(record.measurements if record else [], *ids)
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
