"""Charts for the reports, drawn by matplotlib as inline SVG (no JavaScript, no files)."""

from __future__ import annotations

import io
import math
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel

from ..core.configuration import Ceilings
from ..core.quantities import bandwidth_unit

if TYPE_CHECKING:
    from matplotlib.figure import Figure


class ArmRepetition(Protocol):
    """What a chart reads of one repetition (gates.inference.Repetition has these)."""

    concurrency: int
    ttfts: list[float]
    output_throughput: float | None

COLOURS = {"baseline": "#7f7f7f", "candidate": "#1f77b4", "recompute": "#d62728"}


def to_svg(fig: Figure) -> str:
    """The figure as an <svg> element to paste into HTML."""
    import matplotlib  # here, not at the top: see figure()

    buffer = io.StringIO()
    # Text stays text (searchable, small); no metadata block pointing at outside schemas.
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "kvgate"}):
        fig.savefig(buffer, format="svg", bbox_inches="tight",
                    metadata={"Creator": None, "Date": None, "Format": None, "Type": None})
    text = buffer.getvalue()
    return text[text.index("<svg"):]


def figure() -> tuple[Figure, object]:
    """The reports' standard figure (7 × 3.2 in) and its one axes."""
    # matplotlib (with numpy) is a third of every `kvgate` command's start-up (0.5 of 1.5 s,
    # python -X importtime): imported when a report draws, not by a command that draws none.
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 3.2))
    return fig, fig.add_subplot()


def ttft_cdf(arms: dict[str, list[ArmRepetition]]) -> str:
    """Cumulative distribution of probe TTFTs per arm and concurrency level."""
    fig, ax = figure()
    styles = ["-", "--", ":", "-."]
    for arm, reps in arms.items():
        levels = sorted({r.concurrency for r in reps})
        for style, level in zip(styles * 4, levels, strict=False):
            values = sorted(t for r in reps if r.concurrency == level for t in r.ttfts)
            if values:
                ax.step(values, [(i + 1) / len(values) for i in range(len(values))],
                        where="post", linestyle=style, color=COLOURS.get(arm),
                        label=f"{arm} @ {level}")
    ax.set_xlabel("TTFT (s)")
    ax.set_ylabel("fraction of requests")
    ax.set_title("TTFT distribution (probe phase, all repetitions)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return to_svg(fig)


def throughput_by_concurrency(arms: dict[str, list[ArmRepetition]]) -> str:
    """Output throughput per repetition against concurrency, one line per arm (medians)."""
    fig, ax = figure()
    for arm, reps in arms.items():
        levels = sorted({r.concurrency for r in reps})
        points = {c: sorted(r.output_throughput for r in reps
                            if r.concurrency == c and r.output_throughput) for c in levels}
        xs = [c for c in levels if points[c]]
        medians = [points[c][len(points[c]) // 2] for c in xs]
        ax.plot(xs, medians, marker="o", color=COLOURS.get(arm), label=arm)
        for c in xs:
            ax.scatter([c] * len(points[c]), points[c], color=COLOURS.get(arm), s=10, alpha=0.5)
    ax.set_xlabel("concurrency")
    ax.set_ylabel("output throughput (tok/s)")
    ax.set_title("Throughput vs concurrency (dots: repetitions, line: median)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return to_svg(fig)


def envelope(points: list[tuple[float, float]], buckets: int = 1500) -> tuple[list, ...]:
    """Down-sample a long series to per-bucket (t, mean, min, max): a 72 h run stays fast."""
    if len(points) <= buckets:
        ts = [t for t, _ in points]
        vs = [v for _, v in points]
        return ts, vs, vs, vs
    step = len(points) / buckets
    out: tuple[list, list, list, list] = ([], [], [], [])
    for b in range(buckets):
        chunk = points[int(b * step):int((b + 1) * step)] or points[-1:]
        values = [v for _, v in chunk]
        for column, value in zip(out, (chunk[0][0], sum(values) / len(values), min(values),
                                       max(values)), strict=True):
            column.append(value)
    return out


def time_series(panels: list[tuple[str, str, list[tuple[float, float]]]]) -> str:
    """Stacked panels sharing the time axis (hours since the first point); min-max shaded."""
    from matplotlib.figure import Figure

    panels = [p for p in panels if p[2]]
    fig = Figure(figsize=(7.0, 1.6 * max(1, len(panels))))
    axes = fig.subplots(max(1, len(panels)), 1, sharex=True, squeeze=False)[:, 0]
    origin = min((p[2][0][0] for p in panels), default=0.0)
    for ax, (title, unit, points) in zip(axes, panels, strict=False):
        ts, mean, low, high = envelope(points)
        hours = [(t - origin) / 3600 for t in ts]
        ax.plot(hours, mean, color=COLOURS["candidate"], linewidth=1)
        if low is not mean:
            ax.fill_between(hours, low, high, color=COLOURS["candidate"], alpha=0.2)
        ax.set_ylabel(unit, fontsize=8)
        ax.set_title(title, fontsize=9, loc="left")
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("hours since the soak began")
    return to_svg(fig)


# G1: fio bandwidth against minimum and ceiling, latency percentiles, the queue-depth sweep.

NINES = {50: "p50", 90: "p90", 99: "p99", 99.9: "p99.9", 99.99: "p99.99", 99.999: "p99.999"}


class Bar(BaseModel):
    """One bandwidth job: what fio measured (None: not measured) and its floor, in bytes/s."""

    label: str
    direction: str  # "read" or "write": which ceiling applies
    measured: float | None
    floor: float


class LatencyCurve(BaseModel):
    """One job's completion-latency percentiles in ns, keyed by percentile (0-100)."""

    label: str
    samples: int
    percentiles: dict[float, float]


class SweepPoint(BaseModel):
    """One queue depth of the 4 KiB random-read sweep."""

    depth: int
    iops: float
    p99_ns: float | None = None


def _ceiling_lines(tops: dict[str, float | None]) -> dict[str, float]:
    # One line for a link that is as fast both ways; two when read and write differ.
    found = {name: value for name, value in tops.items() if value}
    if len(found) == 2 and len(set(found.values())) == 1:
        return {"read/write": found["read"]}
    return found


def _legend_below(ax, **kw) -> None:
    # Under the axis label, never over a bar or a curve; the page width stays the figure's.
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2,
              frameon=False, **kw)


def bandwidth_vs_ceiling(bars: list[Bar], ceilings: Ceilings) -> str:
    """Measured bandwidth per job as bars, its minimum as a mark, the site's ceilings as lines."""
    tops = {"read": ceilings.read_bw, "write": ceilings.write_bw}
    unit, scale = bandwidth_unit(max([b.floor for b in bars] + [b.measured or 0 for b in bars]
                                     + [c or 0 for c in tops.values()]))
    fig, ax = figure()
    xs = list(range(len(bars)))
    ax.bar(xs, [(b.measured or 0) / scale for b in bars], width=0.6,
           color=COLOURS["candidate"], label="measured")
    ax.hlines([b.floor / scale for b in bars], [x - 0.4 for x in xs], [x + 0.4 for x in xs],
              colors="black", linewidth=2, label="minimum (thresholds.toml)")
    for x, bar in zip(xs, bars, strict=True):
        text = f"{bar.measured / scale:.3g}" if bar.measured is not None else "not measured"
        ax.annotate(text, (x, (bar.measured or 0) / scale), ha="center", va="bottom",
                    fontsize=8, xytext=(0, 2), textcoords="offset points")
    for (name, ceiling), style in zip(_ceiling_lines(tops).items(), (":", "-."), strict=False):
        label = f"{name} ceiling {ceiling / scale:.3g} {unit}"
        ax.axhline(ceiling / scale, color=COLOURS["recompute"], linestyle=style,
                   label=label + (f" ({ceilings.label})" if ceilings.label else ""))
    ax.set_xticks(xs, [b.label for b in bars], fontsize=8)
    ax.set_ylabel(f"bandwidth ({unit})")
    ax.set_title("fio bandwidth vs minimum and ceiling" if _ceiling_lines(tops) else
                 "fio bandwidth vs minimum (no site.toml [ceilings] given)")
    ax.grid(alpha=0.3, axis="y")
    _legend_below(ax)
    return to_svg(fig)


def _number(x: float) -> str:
    # "500", "12.5", "20,000": never "2e+04" on a limit a reader compares against.
    return f"{x:,.0f}" if abs(x) >= 1e4 else f"{x:.4g}"


def _nines(p: float) -> float:
    # p50 → 0.3, p90 → 1, p99 → 2, p99.9 → 3: the tail gets the room it needs.
    return -math.log10(1 - p / 100)


def latency_percentiles(curves: list[LatencyCurve], p99_limit_ns: float) -> str:
    """Completion-latency percentiles per job on log axes, with the QD1 p99 limit marked."""
    fig, ax = figure()
    styles = ["-", "--", ":", "-."]
    for style, curve in zip(styles * (len(curves) // 4 + 1), curves, strict=False):
        ps = sorted(p for p in curve.percentiles if p >= 50)  # the tail is what a gate judges
        ax.plot([_nines(p) for p in ps], [curve.percentiles[p] / 1e3 for p in ps],
                marker=".", linestyle=style, label=f"{curve.label} (N = {curve.samples:,})")
    ax.axhline(p99_limit_ns / 1e3, color=COLOURS["recompute"], linestyle="--",
               label=f"QD1 p99 limit {_number(p99_limit_ns / 1e3)} µs")
    ax.axvline(_nines(99), color="black", alpha=0.3, linewidth=1)
    top = max((p for c in curves for p in c.percentiles), default=99.9)
    ticks = [p for p in NINES if p <= max(top, 99)]
    ax.set_xticks([_nines(p) for p in ticks], [NINES[p] for p in ticks])
    ax.set_yscale("log")
    ax.set_xlabel("percentile (fio clat_ns, p50 and above, as far as the sample count supports)")
    ax.set_ylabel("completion latency (µs)")
    ax.set_title("4 KiB random-read latency percentiles")
    ax.grid(alpha=0.3, which="both")
    _legend_below(ax)
    return to_svg(fig)


def queue_depth_sweep(points: list[SweepPoint], iops_floor: float) -> str:
    """IOPS (left) and p99 latency (right) against queue depth, with the IOPS minimum."""
    fig, ax = figure()
    depths = [p.depth for p in points]
    lines = ax.plot(depths, [p.iops for p in points], marker="o", color=COLOURS["candidate"],
                    label="IOPS")
    lines.append(ax.axhline(iops_floor, color=COLOURS["candidate"], linestyle="--",
                            label=f"IOPS minimum at QD{max(depths)}: {iops_floor:,.0f}"))
    ax.set_xscale("log", base=2)
    ax.set_xticks(depths, [str(d) for d in depths])
    ax.set_xlabel("queue depth")
    ax.set_ylabel("IO/s")
    right = ax.twinx()
    measured = [p for p in points if p.p99_ns]
    if measured:
        lines += right.plot([p.depth for p in measured], [p.p99_ns / 1e3 for p in measured],
                            marker="s", color=COLOURS["recompute"], label="p99 latency")
        right.set_ylim(0, max(p.p99_ns for p in measured) / 1e3 * 1.15)
    right.set_ylabel("p99 completion latency (µs)")
    ax.set_ylim(0, max([p.iops for p in points] + [iops_floor]) * 1.15)
    ax.set_title("4 KiB random read: queue-depth sweep")
    ax.grid(alpha=0.3)
    _legend_below(ax, handles=lines)
    return to_svg(fig)
