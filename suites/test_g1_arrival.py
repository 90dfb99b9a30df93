"""G1 arrival acceptance: is the delivered array as fast as promised at the block level?

One test per check. Each records a Measurement through `check`; the gate verdict is computed
from those measurements at the end of the session, never from pytest's exit status.
"""

import pytest

from gates.storage import g1 as _g1

pytestmark = [pytest.mark.gate, pytest.mark.g1]


@pytest.fixture
def limits(kvgate):
    return kvgate.thresholds.g1


@pytest.fixture
def band(kvgate):
    """The guard band of thresholds.toml [decision], as a fraction of each bound."""
    return kvgate.thresholds.decision.marginal_band / 100


@pytest.mark.parametrize("job", ["seqread", "seqwrite", "kvrestore"])
def test_bandwidth(job, g1_fio, kvgate, limits, band, check):
    check(_g1.bandwidth(job, g1_fio[job], limits, kvgate.site.ceilings, band))


@pytest.mark.parametrize("job", ["seqread", "seqwrite", "kvrestore"])
def test_steady_state(job, g1_fio, limits, band, check):
    check(*_g1.steady_state(job, g1_fio[job], limits, band))


def test_randread_4k_qd1_latency(g1_fio, limits, band, check):
    check(_g1.qd1_latency(g1_fio["randread-qd1"], limits, band))


def test_randread_4k_qd_sweep(g1_fio, kvgate, limits, band, check):
    check(_g1.qd_sweep(g1_fio["qd-sweep"], limits, kvgate.site.fio.qd_sweep, band))


def test_data_integrity(g1_fio, check):
    """The write-then-verify job: every block read back as written, or FAIL."""
    check(_g1.verify_errors(g1_fio["verify"]))
