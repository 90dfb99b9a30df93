"""gates.model.bandwidth: restore time, break-even, predicted TTFT and gain, calibration,
pre-flight."""

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gates.model import (
    SEED_BASELINE_BPS,
    ModelInputError,
    RestoreModel,
    fit_calibration,
    fmt_rate,
    predict,
    preflight,
    recompute_time,
)
from gates.model.bandwidth import SEED_POINTS, break_even_bandwidth, restore_time

GB = 1e9
KV_32K = 32_768 * 126_976  # Qwen3-Coder-480B FP8, 32K tokens: 4,160,749,568 B


# ---- formulas by hand --------------------------------------------------------------------

def test_restore_time_by_hand():
    assert restore_time(10 * GB, 5 * GB) == 2.0
    assert restore_time(10 * GB, 5 * GB, efficiency=0.5, overhead_s=0.1) == pytest.approx(4.1)
    assert restore_time(KV_32K, 5.2 * GB) == pytest.approx(0.80014, rel=1e-4)


@pytest.mark.parametrize(("kv", "bw"), [(1, 0), (1, -1), (-1, 1)])
def test_restore_time_refuses_impossible_inputs(kv, bw):
    with pytest.raises(ModelInputError):
        restore_time(kv, bw)


def test_recompute_and_break_even_by_hand():
    assert recompute_time(32_768, 8192) == 4.0
    # 4 GB restored in the 4 s recompute takes: 1 GB/s breaks even.
    assert break_even_bandwidth(4 * GB, 4.0) == pytest.approx(1 * GB)
    # With 50 % efficiency and 2 s of overhead, 4 GB must arrive in 2 s at half speed.
    assert break_even_bandwidth(4 * GB, 4.0, efficiency=0.5, overhead_s=2.0) == pytest.approx(
        4 * GB)
    assert break_even_bandwidth(4 * GB, 1.0, overhead_s=1.0) == math.inf
    with pytest.raises(ModelInputError):
        recompute_time(100, 0)


def test_prediction_vs_a_baseline_bandwidth_by_hand():
    model = RestoreModel(other_s=1.0)
    p = predict(10 * GB, 5 * GB, model, baseline_bps=1 * GB, decode_s=4.0)
    assert (p.restore_s, p.ttft_s, p.baseline_ttft_s) == (2.0, 3.0, 11.0)
    assert p.ttft_reduction == pytest.approx(1 - 3 / 11)
    assert p.throughput_gain == pytest.approx((11 + 4) / (3 + 4) - 1)
    assert p.baseline == "1 GB/s baseline"
    assert p.break_even_bps is None


def test_prediction_vs_recompute_by_hand():
    p = predict(8 * GB, 4 * GB, RestoreModel(concurrent_restores=2), recompute_s=10.0)
    assert p.restore_s == 4.0  # two restores share 4 GB/s
    assert p.baseline == "recompute"
    assert p.ttft_reduction == pytest.approx(0.6)
    assert p.break_even_bps == pytest.approx(1.6 * GB)  # 16 GB in 10 s
    assert any("recompute takes 10 s" in a for a in p.assumptions)


def test_prediction_without_a_baseline_has_no_gain():
    p = predict(8 * GB, 4 * GB)
    assert (p.ttft_reduction, p.throughput_gain, p.baseline) == (None, None, None)
    assert any("ideal case" in a for a in p.assumptions)
    assert not any("ideal case" in a for a in RestoreModel(efficiency=0.7).assumptions())


# ---- calibration -----------------------------------------------------------------------

def test_calibration_recovers_known_parameters_from_noisy_synthetic_data():
    rng = random.Random(7)
    kv, eff, fixed = 20 * GB, 0.6, 1.5  # TTFT = 1.5 s + 20 GB / (0.6 × bw)
    model = RestoreModel(efficiency=eff, other_s=fixed)
    points = [(bw * GB, model.ttft_s(kv, bw * GB) * (1 + rng.gauss(0, 0.005)))
              for bw in (0.5, 1, 2, 3, 5, 8, 12) for _ in range(3)]
    fit = fit_calibration(points, kv_bytes=kv)
    assert fit.a_s == pytest.approx(fixed, rel=0.05)
    assert fit.efficiency == pytest.approx(eff, rel=0.02)
    assert fit.b_bytes == pytest.approx(kv / eff, rel=0.02)
    assert fit.r2 > 0.999 and fit.points == 21 and fit.shape_ok
    back = fit.restore_model()
    assert back.ttft_s(kv, 4 * GB) == pytest.approx(model.ttft_s(kv, 4 * GB), rel=0.02)


def test_calibration_on_exact_data_is_exact():
    fit = fit_calibration([(1 * GB, 12.0), (2 * GB, 7.0), (4 * GB, 4.5)], kv_bytes=5 * GB,
                          concurrent_restores=2)
    assert (fit.a_s, fit.b_bytes) == (pytest.approx(2.0), pytest.approx(10 * GB))
    assert fit.efficiency == pytest.approx(1.0)  # 2 restores × 5 GB = 10 GB
    assert fit.r2 == pytest.approx(1.0) and fit.rmse_s == pytest.approx(0, abs=1e-9)
    assert fit.ttft(5 * GB) == pytest.approx(4.0)


def test_seed_figures_have_the_models_shape():
    # 0.98 → 5.23 GB/s took TTFT 37.97 → 9.30 s. Two points fix a line in 1/bandwidth; the
    # test is that it has a positive fixed part and a positive bandwidth part, as the model
    # says. Fitted: a ≈ 2.69 s, b ≈ 34.6 GB (28.67 s / (1/0.98 − 1/5.23) per GB/s).
    fit = fit_calibration(SEED_POINTS)
    assert fit.shape_ok
    assert fit.a_s == pytest.approx(2.689, abs=0.01)
    assert fit.b_bytes == pytest.approx(34.58 * GB, rel=0.001)
    assert fit.r2 is None  # two points: no goodness of fit to report
    for bw, ttft in SEED_POINTS:
        assert fit.ttft(bw) == pytest.approx(ttft)
    # The fixed part is a small share of the slow case: TTFT "tracks bandwidth almost
    # linearly", as the seed says.
    assert fit.a_s / SEED_POINTS[0][1] < 0.1


def test_calibration_refuses_what_it_cannot_fit():
    with pytest.raises(ModelInputError, match="two or more distinct bandwidths"):
        fit_calibration([(1 * GB, 3.0), (1 * GB, 3.1)])
    with pytest.raises(ModelInputError, match="got 2 point"):
        fit_calibration([(1 * GB, 3.0), (1 * GB * (1 + 1e-9), 3.1)])
    with pytest.raises(ModelInputError, match="got 0 point"):
        fit_calibration([])
    with pytest.raises(ModelInputError, match="bandwidth > 0"):
        fit_calibration([(0, 3.0), (1 * GB, 3.1)])
    # TTFT that rises with bandwidth is not this model's shape.
    bad = fit_calibration([(1 * GB, 1.0), (2 * GB, 5.0)], kv_bytes=GB)
    assert not bad.shape_ok and bad.efficiency is None
    with pytest.raises(ModelInputError):
        bad.restore_model()


# ---- pre-flight --------------------------------------------------------------------------

def test_preflight_sentence_for_the_g1_report():
    p = preflight(5.2 * GB, "qwen3-coder-480b", 32_768, tp=8)
    assert p.kv_bytes == KV_32K
    assert p.chunk_file_bytes == 256 * 15_872
    assert p.prediction.restore_s == pytest.approx(0.80, abs=0.005)
    # Default baseline: the seed's read path before its patch, said so in words.
    assert p.prediction.ttft_reduction == pytest.approx(1 - 0.98 / 5.2)
    assert p.sentence() == (
        "at 5.2 GB/s measured, a 32K-token context of Qwen3-Coder-480B-A35B (FP8, TP8: "
        "4.16 GB of KV) restores in ~0.8 s; expected TTFT reduction ~81 % vs 0.98 GB/s "
        "(the seed's KV read path before its parallel-read patch)")
    assert any("ideal case" in a for a in p.assumptions)


def test_preflight_with_a_site_baseline_recompute_and_calibration():
    site = preflight(5.2 * GB, "qwen3-coder-480b", 32_768, tp=8, baseline_bps=2 * GB,
                     baseline_label="local NVMe (2 GB/s)",
                     restore=RestoreModel(efficiency=0.8, other_s=2.0))
    assert site.prediction.baseline_ttft_s == pytest.approx(2 + KV_32K / (0.8 * 2 * GB))
    assert site.sentence().endswith("vs local NVMe (2 GB/s)")
    rec = preflight(5.2 * GB, "qwen2.5-32b", 32_768, dtype="bf16", prefill_tokens_per_s=4096)
    assert rec.prediction.baseline == "recompute"
    assert rec.prediction.baseline_ttft_s == 8.0
    assert rec.prediction.break_even_bps == pytest.approx(32_768 * 262_144 / 8.0)
    assert "vs recompute" in rec.sentence()


def test_preflight_predicted_vs_measured():
    p = preflight(5.2 * GB, "qwen3-coder-480b", 32_768, tp=8)
    assert p.versus_measured(0.70) == "predicted TTFT reduction 81 %, measured 70 % (-11 points)"
    assert SEED_BASELINE_BPS == 0.98 * GB


def test_fmt_rate():
    assert (fmt_rate(5.2e9), fmt_rate(0.98e9), fmt_rate(50e6)) == (
        "5.2 GB/s", "0.98 GB/s", "50 MB/s")


# ---- properties ------------------------------------------------------------------------

models = st.builds(RestoreModel, efficiency=st.floats(0.05, 1.0),
                   overhead_s=st.floats(0, 5), other_s=st.floats(0, 30),
                   concurrent_restores=st.integers(1, 32))
rates = st.floats(1e7, 1e11)
sizes = st.floats(1e6, 1e11)


@given(models, sizes, rates, st.floats(1.01, 10))
def test_ttft_falls_as_bandwidth_rises(model, kv, bw, factor):
    assert model.ttft_s(kv, bw * factor) < model.ttft_s(kv, bw)


@given(models, sizes, rates, st.floats(1.01, 10))
def test_ttft_rises_with_context(model, kv, bw, factor):
    assert model.ttft_s(kv * factor, bw) > model.ttft_s(kv, bw)


@given(models, sizes, rates, st.floats(1.01, 10), st.floats(0, 60))
def test_gain_is_positive_above_the_baseline_and_grows_with_bandwidth(model, kv, base, factor,
                                                                      decode):
    lo = predict(kv, base * factor, model, baseline_bps=base, decode_s=decode)
    hi = predict(kv, base * factor * 2, model, baseline_bps=base, decode_s=decode)
    assert 0 < lo.ttft_reduction < hi.ttft_reduction < 1
    assert 0 < lo.throughput_gain < hi.throughput_gain


@given(sizes, rates, st.floats(0.05, 1.0), st.floats(0, 5))
def test_units_are_consistent(kv, bw, eff, overhead):
    # Bytes and B/s, or GB and GB/s: the same seconds.
    assert restore_time(kv, bw, eff, overhead) == pytest.approx(
        restore_time(kv / 1e9, bw / 1e9, eff, overhead))
    # At the break-even bandwidth, restoring takes exactly the recompute time.
    recompute = overhead + 1.0
    even = break_even_bandwidth(kv, recompute, eff, overhead)
    assert restore_time(kv, even, eff, overhead) == pytest.approx(recompute)


@given(st.floats(0, 20), st.floats(1e8, 1e11), st.lists(st.integers(1, 500), min_size=2,
                                                        max_size=8, unique=True))
def test_calibration_recovers_any_exact_line(a, b, tenths):
    fit = fit_calibration([(t / 10 * GB, a + b / (t / 10 * GB)) for t in tenths])
    assert fit.a_s == pytest.approx(a, abs=1e-6 * (1 + b / 1e8))
    assert fit.b_bytes == pytest.approx(b, rel=1e-6)
