"""G2 single-node baseline: what inference looks like without the candidate tier, and whether
that baseline is stable enough to compare against (run-to-run CV within the limit).

The baseline arm runs the seeded cold-recovery workload at every concurrency level in
thresholds.toml [g2], R repetitions each, on a freshly started arm with an emptied KV directory.
"""

import pytest

from gates._charts import throughput_by_concurrency, ttft_cdf
from gates._g2g3 import g2_measurements
from gates._verdict import Measurement

pytestmark = [pytest.mark.gate, pytest.mark.g2]


@pytest.fixture(scope="module")
def g2(g2_baseline, kvgate):
    """Every G2 measurement, or one ERROR naming the arm, phase and log tail."""
    if g2_baseline.error:
        return [Measurement.error("Baseline arm protocol", g2_baseline.error)]
    arms = {"baseline": g2_baseline.reps}
    kvgate.charts["g2"] = [("Baseline TTFT CDF", ttft_cdf(arms)),
                           ("Baseline throughput vs concurrency", throughput_by_concurrency(arms))]
    return g2_measurements(g2_baseline.reps, kvgate.thresholds.g2)


def pick(measurements, *prefixes):
    chosen = [m for m in measurements if m.name.startswith(prefixes) or m.name.endswith(
        "protocol")]
    assert chosen, f"no measurement named {prefixes}"
    return chosen


def test_baseline_request_errors(g2, check):
    check(*pick(g2, "Baseline request errors"))


def test_baseline_ttft(g2, check):
    check(*pick(g2, "Baseline TTFT p50 @", "Baseline TTFT p99 @"))


def test_baseline_throughput(g2, check):
    check(*pick(g2, "Baseline output throughput"))


def test_baseline_stability(g2, check):
    check(*pick(g2, "Baseline TTFT p50 run-to-run CV", "Baseline throughput run-to-run CV"))


def test_load_generator_fit(g2, check):
    check(*pick(g2, "Load generator fit"))
