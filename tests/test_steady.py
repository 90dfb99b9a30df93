"""gates.core.steady: the SNIA steady-state rules recomputed from fio's steady-state window."""

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gates.core.statistics import (
    SteadyStateUnavailable,
    least_squares_slope,
    round_averages,
    snia_steady_state,
)

FIO = Path(__file__).parent / "data" / "fio"


def fio_window(name: str) -> dict:
    """The job's steadystate block from a recorded fio JSON output."""
    (job,) = json.loads((FIO / name).read_text())["jobs"]
    return job["steadystate"]


# ---- round averages --------------------------------------------------------------------

def test_round_averages_of_ten_samples():
    assert round_averages([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]) == [1.5, 3.5, 5.5, 7.5, 9.5]


def test_round_averages_keep_the_newest_samples():
    # 12 samples in 5 rounds of 2: the two oldest (100, 100) are left out.
    assert round_averages([100, 100, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]) == [1.5, 3.5, 5.5, 7.5,
                                                                           9.5]


def test_round_averages_other_round_counts():
    assert round_averages([2, 4, 6, 8], rounds=2) == [3, 7]
    assert round_averages([5, 6, 7, 8, 9]) == [5, 6, 7, 8, 9]


@pytest.mark.parametrize("data", [[], [1.0], [1, 2, 3, 4]])
def test_round_averages_need_a_sample_per_round(data):
    with pytest.raises(SteadyStateUnavailable, match=f"has {len(data)} samples"):
        round_averages(data)


# ---- least squares ---------------------------------------------------------------------

@pytest.mark.parametrize(("values", "slope"), [
    ([1, 2, 3, 4, 5], 1.0),
    ([2, 4, 6], 2.0),
    ([5, 5, 5, 5], 0.0),
    ([10, 8, 6, 4, 2], -2.0),
    ([1, 3, 2], 0.5),  # mean x 1, mean y 2: sxy = (-1)(-1) + 0 + (1)(0) = 1, sxx = 2
    ([3, 1, 1, 3], 0.0),  # symmetric
    ([7], 0.0),
    ([], 0.0),
])
def test_least_squares_slope(values, slope):
    assert least_squares_slope(values) == pytest.approx(slope)


@given(st.floats(-1e6, 1e6), st.floats(-1e3, 1e3), st.integers(2, 20))
def test_least_squares_recovers_a_line(intercept, slope, n):
    values = [intercept + slope * i for i in range(n)]
    assert least_squares_slope(values) == pytest.approx(slope, abs=1e-6)


# ---- the SNIA verdict ------------------------------------------------------------------

def test_flat_series_has_no_spread_and_no_slope():
    ss = snia_steady_state([7.0] * 10, fio_attained=True, fio_criterion="bw:20%")
    assert ss.rounds == [7.0] * 5
    assert ss.mean == 7.0
    assert ss.spread_pct == 0.0
    assert ss.slope_pct == 0.0
    assert ss.fio_attained is True
    assert ss.describe() == ("fio steady state attained (bw:20%); SNIA over 5 rounds: "
                             "spread 0.0 %, slope 0.0 %")


def test_ramp_has_known_spread_and_slope():
    # Rounds 90, 95, 100, 105, 110: mean 100, max - min = 20, slope 5 per round over 4 steps.
    ss = snia_steady_state([90, 95, 100, 105, 110])
    assert ss.mean == 100
    assert ss.spread_pct == pytest.approx(20.0)
    assert ss.slope_pct == pytest.approx(20.0)
    assert "NOT attained" in ss.describe()


def test_falling_ramp_slope_is_an_excursion_not_a_sign():
    ss = snia_steady_state([110, 105, 100, 95, 90], fio_attained=True)
    assert ss.slope_pct == pytest.approx(20.0)


def test_one_outlier_round_spreads_but_barely_slopes():
    # Rounds 100, 100, 150, 100, 100: mean 110, spread 50/110, slope 0 (symmetric).
    ss = snia_steady_state([100, 100, 150, 100, 100], fio_attained=True)
    assert ss.spread_pct == pytest.approx(50 / 110 * 100)
    assert ss.slope_pct == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("data", [[], [5.0, 5.0, 5.0, 5.0]])
def test_too_few_samples_are_unavailable(data):
    with pytest.raises(SteadyStateUnavailable):
        snia_steady_state(data, fio_attained=True)


def test_no_io_is_unavailable():
    with pytest.raises(SteadyStateUnavailable, match="mean 0"):
        snia_steady_state([0.0] * 5)


def test_unfilled_window_is_unavailable_when_not_attained():
    # fio ended the job before the window filled; the trailing zeros are empty slots.
    with pytest.raises(SteadyStateUnavailable, match="ramp \\+ window"):
        snia_steady_state([100.0, 101.0, 99.0, 0.0, 0.0], fio_attained=False)


def test_trailing_zero_when_attained_is_data():
    ss = snia_steady_state([100.0, 100.0, 100.0, 100.0, 0.0], fio_attained=True)
    assert ss.spread_pct == pytest.approx(125.0)  # (100 - 0) / 80


@given(st.lists(st.floats(1, 1e12), min_size=5, max_size=60))
def test_percentages_do_not_depend_on_scale(data):
    one = snia_steady_state(data, fio_attained=True)
    ten = snia_steady_state([x * 10 for x in data], fio_attained=True)
    assert ten.spread_pct == pytest.approx(one.spread_pct, rel=1e-9, abs=1e-9)
    assert ten.slope_pct == pytest.approx(one.slope_pct, rel=1e-9, abs=1e-9)
    assert one.spread_pct >= 0 and one.slope_pct >= 0


# ---- recorded fio outputs --------------------------------------------------------------

def test_recorded_window_attained():
    block = fio_window("steadystate_attained.json")
    bw = block["data"]["bw"]
    assert bw == [10830037205, 10820328168, 10835460096, 10300763483, 10384375808]
    ss = snia_steady_state(bw, bool(block["attained"]), block["ss"])
    # By hand: sum 53170964760 over 5 = 10634192952, fio's own bw_mean.
    assert ss.mean == 10634192952 == block["data"]["bw_mean"]
    # max - min = 10835460096 - 10300763483 = 534696613; / mean = 5.0281 %.
    assert ss.spread_pct == pytest.approx(534696613 / 10634192952 * 100)
    assert ss.spread_pct == pytest.approx(5.0281, abs=1e-4)
    # sxy = -2*y0 - y1 + y3 + 2*y4 = -1410887479, sxx = 10: slope -141088747.9 per round,
    # excursion over 4 rounds 564354991.6 = 5.3070 % of the mean.
    assert ss.slope_pct == pytest.approx(564354991.6 / 10634192952 * 100)
    assert ss.fio_attained is True
    assert ss.fio_criterion == "iops:20.000000%"


def test_recorded_window_not_attained():
    block = fio_window("steadystate_not_attained.json")
    bw = block["data"]["bw"]
    assert block["attained"] == 0
    # fio's own bw_slope figure is the least-squares slope of this window, per second.
    assert least_squares_slope(bw) == pytest.approx(block["slope"])
    ss = snia_steady_state(bw, bool(block["attained"]), block["ss"])
    assert ss.mean == block["data"]["bw_mean"] == 10331774620
    # max - min = 10534305185 - 9888195011 = 646110174; / mean = 6.2537 %.
    assert ss.spread_pct == pytest.approx(646110174 / 10331774620 * 100)
    # fio's criterion is the slope as % of the mean; the excursion is 4 times that.
    criterion = float(block["criterion"].rstrip("%"))
    assert ss.slope_pct == pytest.approx(abs(criterion) * 4, rel=1e-5)
    assert ss.fio_attained is False
    assert "NOT attained" in ss.describe()


def test_recorded_window_cut_short_is_unavailable():
    block = fio_window("steadystate_not_attained.json")
    cut = block["data"]["bw"][:3] + [0, 0]  # what a runtime shorter than ramp + window leaves
    with pytest.raises(SteadyStateUnavailable):
        snia_steady_state(cut, fio_attained=False)
