"""G4 stability soak: does the candidate hold at G3's operating point for the full duration,
without errors, drift or data loss? One committed window at a time; resumable after a crash.
"""

import pytest

from gates._verdict import Measurement

pytestmark = [pytest.mark.gate, pytest.mark.g4]


@pytest.fixture(scope="module")
def g4(g4_soak):
    """Every G4 rule's measurement; BLOCKED or ERROR ones say why."""
    if g4_soak.blocked:
        return [Measurement.blocked("G4 soak", g4_soak.blocked)]
    if g4_soak.error:
        return [Measurement.error("G4 soak", g4_soak.error)]
    return g4_soak.measurements


def pick(measurements, *names):
    chosen = [m for m in measurements if m.name in names + ("G4 soak",)]
    assert chosen, f"no measurement named {names}"
    return chosen


def test_soak_duration(g4, check):
    check(*pick(g4, "Effective soak duration", "Total gap time"))


def test_no_request_errors(g4, check):
    check(*pick(g4, "Soak request errors"))


def test_no_data_corruption(g4, check):
    check(*pick(g4, "fio verify errors"))


def test_drive_health(g4, check):
    check(*pick(g4, "New NVMe media errors", "NVMe critical warnings raised"))


def test_no_kernel_storage_errors(g4, check):
    check(*pick(g4, "Kernel storage errors", "NVMe-oF paths live"))


def test_throughput_floor(g4, check):
    check(*pick(g4, "Lowest window throughput"))


def test_no_ttft_drift(g4, check):
    check(*pick(g4, "TTFT p50 drift"))


def test_windows_stable(g4, check):
    check(*pick(g4, "Window throughput spread (SNIA)", "Window throughput slope (SNIA)"))
