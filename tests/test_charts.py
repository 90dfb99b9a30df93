"""Report charts: inline SVG from matplotlib, no script, one series per arm."""

from gates._charts import throughput_by_concurrency, ttft_cdf
from gates._repetition import Repetition


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
    from gates._charts import envelope, time_series

    points = [(float(t), float(t % 600)) for t in range(259_200)]
    ts, mean, low, high = envelope(points, buckets=1000)
    assert len(ts) == 1000 and min(low) == 0 and max(high) == 599
    svg = time_series([("Output throughput", "tok/s", points), ("Empty", "x", [])])
    assert svg.startswith("<svg") and "Output throughput" in svg and "Empty" not in svg
