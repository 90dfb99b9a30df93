"""What G1's charts show, taken from recorded fio reports (tests/data/fio/)."""

from __future__ import annotations

import pytest
from test_g1 import KV_BW, QD32_IOPS, SEQREAD_BW, SEQWRITE_BW, limits, step

from gates.core.configuration import Ceilings
from gates.storage import StepOutcome, g1_charts
from gates.storage.g1 import qd1_latency
from gates.storage.g1charts import bandwidth_bars, latency_curves, sweep_points

DEPTHS = [1, 4, 16, 32]


@pytest.fixture(scope="module")
def outcomes() -> dict[str, StepOutcome]:
    """Every G1 step as the fixture hands it over, from the recorded reports."""
    return {"seqread": step("seqread_1m.json"), "seqwrite": step("seqwrite_1m.json"),
            "kvrestore": step("kvrestore.json"),
            "randread-qd1": step("randread_4k_qd1.json", {"randread-4k-qd1": "randread-qd1"}),
            "qd-sweep": step("qd_sweep.json")}


def test_bars_carry_the_judged_bandwidth_and_the_floor(outcomes):
    bars = bandwidth_bars(outcomes, limits())
    assert [(b.label, b.direction, b.measured) for b in bars] == [
        ("Sequential read 1 MiB", "read", SEQREAD_BW),
        ("Sequential write 1 MiB", "write", SEQWRITE_BW),
        ("KV-restore read", "read", KV_BW)]
    assert [b.floor for b in bars] == [1.5e9, 4e9, 1e9]


def test_a_failed_or_missing_job_is_a_bar_without_a_value(outcomes):
    broken = {**outcomes, "seqwrite": StepOutcome(error="fio exited 1"),
              "kvrestore": step("seqread_1m.json")}
    bars = bandwidth_bars(broken, limits())
    assert [b.measured for b in bars] == [SEQREAD_BW, None, None]


def test_latency_curve_agrees_with_the_judged_p99(outcomes):
    qd1, *sweep = latency_curves(outcomes, DEPTHS)
    judged = qd1_latency(outcomes["randread-qd1"], limits())
    assert qd1.label == "QD1 latency job"
    assert qd1.percentiles[99] / 1e3 == pytest.approx(judged.value)
    assert [c.label for c in sweep] == ["QD1 sweep", "QD4 sweep", "QD16 sweep", "QD32 sweep"]


def test_latency_curve_leaves_out_percentiles_the_samples_cannot_support(outcomes):
    curves = latency_curves(outcomes, DEPTHS)
    for curve in curves:
        # p99.9 needs 10,000 I/Os, p99.99 needs 100,000: none of these jobs did that many.
        assert (99.9 in curve.percentiles) == (curve.samples >= 10_000)
        assert 99.99 not in curve.percentiles and curve.samples < 100_000
        assert 50 in curve.percentiles


def test_sweep_points_follow_the_depths_fio_reported(outcomes):
    points = sweep_points(outcomes["qd-sweep"], [1, 4, 16, 32, 64])
    assert [p.depth for p in points] == DEPTHS
    assert points[-1].iops == pytest.approx(QD32_IOPS)
    assert all(p.p99_ns and p.p99_ns > 0 for p in points)
    assert sweep_points(StepOutcome(error="timeout"), DEPTHS) == []


def test_g1_charts_for_a_full_run(outcomes):
    ceilings = Ceilings(read_bw=12.5e9, write_bw=12.5e9, label="100GbE")
    charts = g1_charts(outcomes, limits(), ceilings, DEPTHS)
    assert [title.split(" ")[0] for title, _ in charts] == ["fio", "Completion-latency",
                                                            "Queue-depth"]
    assert all(svg.startswith("<svg") and "<script" not in svg for _, svg in charts)
    assert "read/write ceiling 12.5 GB/s (100GbE)" in charts[0][1]


def test_g1_charts_leave_out_what_measured_nothing():
    failed = {key: StepOutcome(error="fio is missing") for key in
              ("seqread", "seqwrite", "kvrestore", "randread-qd1", "qd-sweep")}
    assert g1_charts(failed, limits(), Ceilings(), DEPTHS) == []
    one_depth = {**failed, "qd-sweep": step("qd_sweep.json")}
    titles = [t for t, _ in g1_charts(one_depth, limits(), Ceilings(), [32])]
    assert titles == ["Completion-latency percentiles, 4 KiB random read"]
