"""G4 stability soak: does the candidate hold at G3's operating point for the full duration,
without errors, drift or data loss? One committed window at a time; resumable after a crash.
"""

import pytest

from gates.core.verdicts import G4

pytestmark = [pytest.mark.gate, pytest.mark.g4]


@pytest.fixture(scope="module")
def g4(g4_soak):
    """Every G4 rule's measurement; BLOCKED or ERROR ones say why."""
    if g4_soak.blocked:
        return [G4["g4.soak"].blocked(g4_soak.blocked)]
    if g4_soak.error:
        return [G4["g4.soak"].error(g4_soak.error)]
    return g4_soak.measurements


def pick(measurements, *ids):
    """The measurements of these ids, and why the soak could not run, if so."""
    chosen = G4.select(measurements, *ids, "g4.soak")
    assert chosen, f"no measurement of {ids}"
    return chosen


def test_soak_duration(g4, check):
    check(*pick(g4, "g4.effective_duration", "g4.gap_time"))


def test_no_request_errors(g4, check):
    check(*pick(g4, "g4.request_errors"))


def test_no_data_corruption(g4, check):
    check(*pick(g4, "g4.verify_errors"))


def test_drive_health(g4, check):
    check(*pick(g4, "g4.media_errors", "g4.critical_warnings"))


def test_no_kernel_storage_errors(g4, check):
    check(*pick(g4, "g4.kernel_errors", "g4.paths_live"))


def test_throughput_floor(g4, check):
    check(*pick(g4, "g4.throughput_floor"))


def test_no_ttft_drift(g4, check):
    check(*pick(g4, "g4.ttft_drift"))


def test_windows_stable(g4, check):
    check(*pick(g4, "g4.window_spread", "g4.window_slope"))
