"""The working-set sweep's chart: both gains against the KV working set, tiers marked."""

from __future__ import annotations

from pydantic import BaseModel

from ..core.quantities import format_size
from .charts import _legend_below, to_svg


class GainBand(BaseModel):
    """A gain at one working set: point and interval, %."""

    point: float
    lo: float
    hi: float


class WorkingSetPoint(BaseModel):
    """What the chart reads of one sweep point."""

    working_set: int  # bytes
    ttft_reduction: GainBand | None = None
    throughput_gain: GainBand | None = None
    proven: bool = False  # the evidence chain showed storage reads here
    proof: str = ""  # the chain's word where it did not (INCONCLUSIVE, FAIL, ERROR)


def _panel(ax, points: list[WorkingSetPoint], pick: str, limit: float, title: str,
           tiers: dict[str, int], predicted: list[tuple[int, float]]) -> None:
    have = [(p, g) for p in points if (g := getattr(p, pick)) is not None]
    xs = [p.working_set for p, _ in have]
    if have:
        ax.plot(xs, [g.point for _, g in have], color="#1f77b4", label="measured (median pair)")
        for p, g in have:
            ax.errorbar([p.working_set], [g.point], yerr=[[g.point - g.lo], [g.hi - g.point]],
                        fmt="o", color="#1f77b4", capsize=3,
                        markerfacecolor="#1f77b4" if p.proven else "white")
        if pick == "ttft_reduction":  # said once, on the top panel, beside each hollow marker
            for p, g in have:
                if not p.proven and p.proof:
                    ax.annotate(p.proof, (p.working_set, g.point), textcoords="offset points",
                                xytext=(0, -12), ha="center", fontsize=6, color="#555555")
    if predicted:
        ax.plot([x for x, _ in predicted], [y for _, y in predicted], linestyle="--",
                color="#2ca02c", label="KV model prediction")
    ax.axhline(limit, color="#b00020", linestyle=":")
    # Said on each panel: the two figures have their own limits, and one legend serves both.
    ax.text(0.01, limit, f"G3 limit {limit:g} %", transform=ax.get_yaxis_transform(),
            color="#b00020", fontsize=7, va="bottom")
    for i, (name, size) in enumerate(sorted(tiers.items(), key=lambda t: t[1])):
        ax.axvline(size, color="#7f7f7f", linestyle=["-.", "--", ":"][i % 3],
                   label=f"{name} ({format_size(size)})")
    ax.set_xscale("log")
    ax.set_xlabel("KV working set (bytes, log scale)")
    ax.set_ylabel("%")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)


def working_set_chart(points: list[WorkingSetPoint], reduction_limit: float,
                      gain_limit: float, tiers: dict[str, int],
                      predicted: list[tuple[int, float]] | None = None) -> str:
    """TTFT p50 reduction and throughput gain against the working set, one panel each.

    A filled marker is a point whose evidence chain proved storage reads, a hollow one a point
    where it could not (memory could hold the working set, or a signal disagreed); predicted:
    the KV model's TTFT reduction at each working set, dashed on the top panel.
    """
    from matplotlib.figure import Figure  # at draw time: see charts.figure()

    fig = Figure(figsize=(7.0, 6.4))
    top, bottom = fig.add_subplot(2, 1, 1), fig.add_subplot(2, 1, 2)
    _panel(top, points, "ttft_reduction", reduction_limit, "TTFT p50 reduction", tiers,
           predicted or [])
    _panel(bottom, points, "throughput_gain", gain_limit, "Output-throughput gain", tiers, [])
    # One legend for both panels: the forecast is drawn on the top one only (its throughput
    # gain is an unbounded upper bound that would flatten the measured line).
    handles = dict(zip(*reversed(bottom.get_legend_handles_labels()), strict=True))
    handles.update(zip(*reversed(top.get_legend_handles_labels()), strict=True))
    _legend_below(bottom, handles=list(handles.values()), labels=list(handles))
    fig.tight_layout()
    return to_svg(fig)
