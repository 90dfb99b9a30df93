"""Report charts: inline SVG from matplotlib, no script, one series per arm."""

import re

from gates.charts import throughput_by_concurrency, ttft_cdf
from gates.inference import Repetition


def reps(arm, scale):
    return [Repetition(arm=arm, concurrency=c, repetition=i, ttfts=[scale * c * (1 + k / 10)
                                                                   for k in range(5)],
                       output_throughput=100.0 * c / scale, sent=5, errors=0)
            for c in (8, 16) for i in range(3)]


def test_ttft_cdf_is_inline_svg_with_every_arm_and_level():
    svg = ttft_cdf({"baseline": reps("baseline", 1.0), "candidate": reps("candidate", 0.5)})
    assert svg.startswith("<svg") and "<script" not in svg and "purl.org" not in svg
    for label in ("baseline @ 8", "baseline @ 16", "candidate @ 8", "candidate @ 16"):
        assert label in svg


def test_throughput_chart_names_the_arms():
    svg = throughput_by_concurrency({"baseline": reps("baseline", 1.0),
                                     "candidate": reps("candidate", 0.5)})
    assert "baseline" in svg and "candidate" in svg and "concurrency" in svg


def test_time_series_downsamples_a_72_hour_series():
    from gates.charts import time_series
    from gates.charts.charts import envelope

    points = [(float(t), float(t % 600)) for t in range(259_200)]
    ts, mean, low, high = envelope(points, buckets=1000)
    assert len(ts) == 1000 and min(low) == 0 and max(high) == 599
    svg = time_series([("Output throughput", "tok/s", points), ("Empty", "x", [])])
    assert svg.startswith("<svg") and "Output throughput" in svg and "Empty" not in svg


def bars():
    from gates.charts import Bar

    return [Bar(label="Sequential read 1 MiB", direction="read", measured=6.2e9, floor=5e9),
            Bar(label="Sequential write 1 MiB", direction="write", measured=None, floor=3e9)]


def test_bandwidth_chart_marks_floor_ceiling_and_what_was_not_measured():
    from gates.charts import bandwidth_vs_ceiling
    from gates.core.configuration import Ceilings

    svg = bandwidth_vs_ceiling(bars(), Ceilings(read_bw=12.5e9, write_bw=10e9, label="100GbE"))
    assert svg.startswith("<svg") and "<script" not in svg
    for text in ("Sequential read 1 MiB", "6.2", "not measured", "minimum (thresholds.toml)",
                 "read ceiling 12.5 GB/s (100GbE)", "write ceiling 10 GB/s (100GbE)",
                 "bandwidth (GB/s)"):
        assert text in svg
    same = bandwidth_vs_ceiling(bars(), Ceilings(read_bw=12.5e9, write_bw=12.5e9))
    assert re.findall(r">[a-z/]* ceiling [^<]*<", same) == [">read/write ceiling 12.5 GB/s<"]
    bare = bandwidth_vs_ceiling(bars(), Ceilings())
    assert "no site.toml [ceilings] given" in bare and not re.search(r"ceiling \d", bare)


def test_latency_chart_marks_the_p99_limit_on_a_log_axis():
    from gates.charts import LatencyCurve, latency_percentiles

    curve = LatencyCurve(label="QD1 latency job", samples=20_000,
                         percentiles={10: 40e3, 50: 50e3, 90: 80e3, 99: 150e3, 99.9: 400e3})
    svg = latency_percentiles([curve], p99_limit_ns=500e3)
    for text in ("QD1 latency job (N = 20,000)", "QD1 p99 limit 500 µs", "p99.9", "p50"):
        assert text in svg
    assert "p99.99" not in svg  # no tick beyond what any curve reaches
    assert "QD1 p99 limit 20,000 µs" in latency_percentiles([curve], p99_limit_ns=20e6)


def test_sweep_chart_draws_iops_and_p99_by_depth():
    from gates.charts import SweepPoint, queue_depth_sweep

    points = [SweepPoint(depth=d, iops=20_000.0 * d, p99_ns=100e3 * d) for d in (1, 4, 16)]
    svg = queue_depth_sweep(points, iops_floor=200_000)
    for text in ("IOPS minimum at QD16: 200,000", "p99 latency", "queue depth"):
        assert text in svg


def test_charts_are_byte_for_byte_reproducible():
    from gates.charts import bandwidth_vs_ceiling
    from gates.core.configuration import Ceilings

    first = bandwidth_vs_ceiling(bars(), Ceilings(read_bw=12.5e9))
    assert first == bandwidth_vs_ceiling(bars(), Ceilings(read_bw=12.5e9))
    assert "<metadata" not in first and "<dc:date" not in first


def test_the_working_set_chart_marks_limits_tiers_and_unproven_points():
    from gates.charts import GainBand, WorkingSetPoint, working_set_chart

    band = GainBand(point=60.0, lo=50.0, hi=70.0)

    def chart(first_proven: bool) -> str:
        return working_set_chart(
            [WorkingSetPoint(working_set=2**20, ttft_reduction=band, throughput_gain=band,
                             proven=first_proven),
             WorkingSetPoint(working_set=2**24, ttft_reduction=band, throughput_gain=band,
                             proven=True, proof="storage read"),
             WorkingSetPoint(working_set=2**26)],  # a point without figures is left out
            25.0, 29.0, {"GPU KV cache": 2**21, "host memory (page cache)": 2**34})
    svg = chart(first_proven=False)
    assert svg.startswith("<svg") and "KV model prediction" not in svg
    assert "storage read" not in svg  # a proven point needs no word: its marker is filled
    said = working_set_chart([WorkingSetPoint(working_set=2**20, ttft_reduction=band,
                                              throughput_gain=band, proof="INCONCLUSIVE")],
                             25.0, 29.0, {})
    assert said.count("INCONCLUSIVE") == 1  # on the top panel only
    forecast = working_set_chart([WorkingSetPoint(working_set=2**24, ttft_reduction=band,
                                                  throughput_gain=band, proven=True)],
                                 25.0, 29.0, {}, [(2**20, 0.0), (2**24, 75.0)])
    assert "KV model prediction" in forecast and "measured (median pair)" in forecast
    for text in ("TTFT p50 reduction", "Output-throughput gain", "G3 limit 25 %",
                 "G3 limit 29 %", "GPU KV cache (2 MiB)", "host memory (page cache) (16 GiB)"):
        assert text in svg, text
    # the unproven point's markers (one per panel) are hollow: white where a proven one is blue
    assert svg.count("fill: #ffffff") == chart(first_proven=True).count("fill: #ffffff") + 2
