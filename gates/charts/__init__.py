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

__all__ = [
    "Bar",
    "LatencyCurve",
    "SweepPoint",
    "bandwidth_vs_ceiling",
    "latency_percentiles",
    "queue_depth_sweep",
    "throughput_by_concurrency",
    "time_series",
    "ttft_cdf",
]
