"""G1's shared-array charts: the 1 -> N client scaling curve of the KV-restore pattern, and one
host's KV restore with and without a neighbour's writes, side by side. Plain data in, SVG out."""

from __future__ import annotations

from pydantic import BaseModel

from ..core.quantities import bandwidth_unit
from .charts import COLOURS, _legend_below, figure, to_svg


class ClientsPoint(BaseModel):
    """The KV-restore figures with ``clients`` hosts reading at once."""

    clients: int
    aggregate_bw: float  # bytes/s
    p99_ns: float | None = None


def scaling_curve(points: list[ClientsPoint], floor: float | None) -> str:
    """Aggregate bandwidth (left) and merged p99 (right) by client count; ideal linear scaling
    from one host dashed; the site's aggregate minimum at N as a line, when it set one."""
    unit, scale = bandwidth_unit(max([p.aggregate_bw for p in points] + [floor or 0]))
    fig, ax = figure()
    clients = [p.clients for p in points]
    lines = ax.plot(clients, [p.aggregate_bw / scale for p in points], marker="o",
                    color=COLOURS["candidate"], label="aggregate bandwidth")
    one = next((p.aggregate_bw for p in points if p.clients == 1), None)
    if one:
        lines += ax.plot(clients, [one * n / scale for n in clients], linestyle=":",
                         color=COLOURS["baseline"], label="one host x clients (linear)")
    if floor:
        lines.append(ax.axhline(floor / scale, color=COLOURS["candidate"], linestyle="--",
                                label=f"aggregate minimum at {max(clients)} hosts: "
                                f"{floor / scale:.3g} {unit}"))
    ax.set_xticks(clients, [str(n) for n in clients])
    ax.set_xlabel("client hosts reading at once (site.toml [fio] hosts)")
    ax.set_ylabel(f"bandwidth ({unit})")
    right = ax.twinx()
    measured = [p for p in points if p.p99_ns]
    if measured:
        lines += right.plot([p.clients for p in measured], [p.p99_ns / 1e3 for p in measured],
                            marker="s", color=COLOURS["recompute"],
                            label="p99 latency (hosts' histograms merged)")
        right.set_ylim(0, max(p.p99_ns for p in measured) / 1e3 * 1.15)
    right.set_ylabel("p99 completion latency (µs)")
    ax.set_ylim(0, max([p.aggregate_bw for p in points] + [one * max(clients) if one else 0,
                                                             floor or 0]) / scale * 1.15)
    ax.set_title("KV restore: scaling from 1 to N client hosts")
    ax.grid(alpha=0.3)
    _legend_below(ax, handles=lines)
    return to_svg(fig)


def neighbour_comparison(alone_bw: float, loaded_bw: float, alone_p99_ns: float | None,
                         loaded_p99_ns: float | None, rate: float) -> str:
    """Restore bandwidth and p99 of one host alone and beside the neighbour's writes."""
    unit, scale = bandwidth_unit(max(alone_bw, loaded_bw))
    fig = figure()[0]
    fig.clear()
    bw_ax, p99_ax = fig.subplots(1, 2)
    labels = ["alone", f"neighbour writes\n{rate / 1e6:,.0f} MB/s"]
    colours = [COLOURS["candidate"], COLOURS["recompute"]]
    bw_ax.bar(labels, [alone_bw / scale, loaded_bw / scale], color=colours, width=0.6)
    bw_ax.set_ylabel(f"KV-restore bandwidth ({unit})")
    bw_ax.set_title("restore rate", fontsize=9)
    p99s = [alone_p99_ns or 0, loaded_p99_ns or 0]
    p99_ax.bar(labels, [p / 1e3 for p in p99s], color=colours, width=0.6)
    p99_ax.set_ylabel("p99 completion latency (µs)")
    p99_ax.set_title("p99 latency", fontsize=9)
    for ax, values, fmt in ((bw_ax, [alone_bw / scale, loaded_bw / scale], "{:.3g}"),
                            (p99_ax, [p / 1e3 for p in p99s], "{:,.0f}")):
        for x, value in enumerate(values):
            ax.annotate(fmt.format(value) if value else "not measured", (x, value),
                        ha="center", va="bottom", fontsize=8, xytext=(0, 2),
                        textcoords="offset points")
        ax.grid(alpha=0.3, axis="y")
        ax.tick_params(labelsize=8)
    fig.suptitle("KV restore on one host, without and with a neighbour's writes", fontsize=10)
    return to_svg(fig)
