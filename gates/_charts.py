"""Charts for the reports, drawn by matplotlib as inline SVG (no JavaScript, no files)."""

from __future__ import annotations

import io

import matplotlib
from matplotlib.figure import Figure

from ._repetition import Repetition

COLOURS = {"baseline": "#7f7f7f", "candidate": "#1f77b4", "recompute": "#d62728"}


def to_svg(fig: Figure) -> str:
    """The figure as an <svg> element to paste into HTML."""
    buffer = io.StringIO()
    # Text stays text (searchable, small); no metadata block pointing at outside schemas.
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "kvgate"}):
        fig.savefig(buffer, format="svg", bbox_inches="tight",
                    metadata={"Creator": None, "Date": None, "Format": None, "Type": None})
    text = buffer.getvalue()
    return text[text.index("<svg"):]


def _figure() -> tuple[Figure, object]:
    fig = Figure(figsize=(7.0, 3.2))
    return fig, fig.add_subplot()


def ttft_cdf(arms: dict[str, list[Repetition]]) -> str:
    """Cumulative distribution of probe TTFTs per arm and concurrency level."""
    fig, ax = _figure()
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


def throughput_by_concurrency(arms: dict[str, list[Repetition]]) -> str:
    """Output throughput per repetition against concurrency, one line per arm (medians)."""
    fig, ax = _figure()
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
