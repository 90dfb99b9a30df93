"""Charts for the reports: matplotlib figures as inline SVG, drawn from plain data (no I/O)."""

from .charts import (
    Bar,
    LatencyCurve,
    SweepPoint,
    bandwidth_vs_ceiling,
    latency_percentiles,
    queue_depth_sweep,
    throughput_by_concurrency,
    time_series,
    ttft_cdf,
)
from .hosts import ClientsPoint, neighbour_comparison, scaling_curve
from .workingset import GainBand, WorkingSetPoint, working_set_chart

__all__ = [
    "Bar",
    "ClientsPoint",
    "GainBand",
    "LatencyCurve",
    "SweepPoint",
    "WorkingSetPoint",
    "bandwidth_vs_ceiling",
    "latency_percentiles",
    "neighbour_comparison",
    "queue_depth_sweep",
    "scaling_curve",
    "throughput_by_concurrency",
    "time_series",
    "ttft_cdf",
    "working_set_chart",
]
