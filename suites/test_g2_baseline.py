"""G2 single-node baseline: what inference looks like without the candidate tier, and whether
that baseline is stable enough to compare against (run-to-run CV within the limit).

The baseline arm runs the seeded cold-recovery workload at every concurrency level in
thresholds.toml [g2], R repetitions each, on a freshly started arm with an emptied KV directory.
"""

import pytest

from gates.charts import throughput_by_concurrency, ttft_cdf
from gates.core.verdicts import G2
from gates.inference import g2_measurements, starved

pytestmark = [pytest.mark.gate, pytest.mark.g2]


@pytest.fixture(scope="module")
def g2(g2_baseline, kvgate):
    """Every G2 measurement, or one ERROR naming the arm, phase and log tail."""
    if g2_baseline.error:
        return [G2["g2.arm_protocol"].error(g2_baseline.error)]
    arms = {"baseline": g2_baseline.reps}
    kvgate.charts["g2"] = [("Baseline TTFT CDF", ttft_cdf(arms)),
                           ("Baseline throughput vs concurrency", throughput_by_concurrency(arms))]
    for found in starved(g2_baseline.reps, kvgate.thresholds.g2):
        kvgate.deviate("g2", found)
    return g2_measurements(g2_baseline.reps, kvgate.thresholds.g2)


def pick(measurements, *ids):
    """The measurements of these ids, and the arm's protocol error if there was one."""
    chosen = G2.select(measurements, *ids, "g2.arm_protocol")
    assert chosen, f"no measurement of {ids}"
    return chosen


def test_baseline_request_errors(g2, check):
    check(*pick(g2, "g2.request_errors"))


def test_baseline_ttft(g2, check):
    check(*pick(g2, "g2.ttft_p50", "g2.ttft_p99"))


def test_baseline_throughput(g2, check):
    check(*pick(g2, "g2.output_throughput"))


def test_baseline_stability(g2, check):
    check(*pick(g2, "g2.ttft_p50_cv", "g2.throughput_cv"))


def test_load_generator_fit(g2, check):
    check(*pick(g2, "g2.loadgen_fit"))
