"""G3 main gate: does the candidate tier deliver the promised gain over the G2 baseline, did
the KV really come from the candidate storage, and are the outputs still correct?

The candidate arm runs the same seeded workload as G2 (same workload hash, or G3 is BLOCKED);
the baseline figures are G2's stored repetitions, checked against G2's evidence manifest.
"""

import pytest

from gates._charts import throughput_by_concurrency, ttft_cdf
from gates._g2g3 import correctness, g3_measurements
from gates._verdict import Measurement

pytestmark = [pytest.mark.gate, pytest.mark.g3]


@pytest.fixture(scope="module")
def g3(g3_reference, g3_candidate, g3_recompute, kvgate, compare_with_preflight):
    """Every G3 measurement; BLOCKED or ERROR ones say why."""
    for runs in (g3_reference, g3_candidate):
        if runs.blocked:
            return [Measurement.blocked("G3 comparison", runs.blocked)]
        if runs.error:
            return [Measurement.error("G3 comparison", runs.error)]
    recompute = g3_recompute.reps if not g3_recompute.error else []
    out = g3_measurements(g3_reference.reps, g3_candidate.reps, recompute,
                          kvgate.thresholds.g3, kvgate.thresholds.decision)
    if g3_recompute.error:
        out.append(Measurement.error("Recompute reference", g3_recompute.error))
    measured = {int(m.name.rsplit(" ", 1)[1]): m.value for m in out
                if m.name.startswith("TTFT p50 reduction") and m.value is not None}
    arms = {"baseline": g3_reference.reps, "candidate": g3_candidate.reps,
            "recompute": g3_recompute.reps}
    kvgate.charts["g3"] = [("TTFT CDF, baseline (G2) vs candidate", ttft_cdf(arms)),
                           ("Throughput vs concurrency", throughput_by_concurrency(arms))]
    note = compare_with_preflight(measured)
    if note:
        kvgate.facts.setdefault("g3", {})["predicted vs measured"] = note
    return out


def pick(measurements, *prefixes):
    chosen = [m for m in measurements if m.name.startswith(prefixes + ("G3 comparison",
                                                                       "Recompute reference"))]
    assert chosen, f"no measurement named {prefixes}"
    return chosen


def test_candidate_request_errors(g3, check):
    check(*pick(g3, "Candidate request errors"))


def test_ttft_p50_reduction(g3, check):
    check(*pick(g3, "TTFT p50 reduction"))


def test_output_throughput_gain(g3, check):
    check(*pick(g3, "Output-throughput gain"))


def test_kv_came_from_the_candidate_storage(g3, check):
    check(*pick(g3, "KV tokens read from", "KV tokens served from the GPU cache",
                "Engine process's storage reads", "KV devices' read bytes"))


def test_speedup_over_recompute(g3, check):
    check(*pick(g3, "TTFT speed-up vs recompute", "Throughput speed-up vs recompute"))


def test_load_generator_fit(g3, check):
    check(*pick(g3, "Load generator fit"))


def test_outputs_match_recompute(g3_correctness, kvgate, check):
    candidate, recompute = g3_correctness
    name = "Outputs identical to recompute"
    for runs in (candidate, recompute):
        if runs.blocked:
            return check(Measurement.blocked(name, runs.blocked))
        if runs.error:
            return check(Measurement.error(name, runs.error))
    check(correctness(candidate.reps[0], recompute.reps[0],
                      kvgate.thresholds.g3.correctness_tokens))
