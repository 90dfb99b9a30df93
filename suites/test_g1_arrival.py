"""G1 arrival acceptance: is the delivered array as fast as promised at the block level?

One test per check. Each records a Measurement through `check`; the gate verdict is computed
from those measurements at the end of the session, never from pytest's exit status.
"""

import pytest

from gates import _g1

pytestmark = [pytest.mark.gate, pytest.mark.g1]


def test_seq_read_bandwidth(g1_fio, kvgate, check):
    check(_g1.bandwidth("seqread", g1_fio["seqread"], kvgate.thresholds.g1, kvgate.site.ceilings))


def test_seq_read_steady_state(g1_fio, kvgate, check):
    check(*_g1.steady_state("seqread", g1_fio["seqread"], kvgate.thresholds.g1))


def test_seq_write_bandwidth(g1_fio, kvgate, check):
    check(_g1.bandwidth("seqwrite", g1_fio["seqwrite"], kvgate.thresholds.g1,
                        kvgate.site.ceilings))


def test_seq_write_steady_state(g1_fio, kvgate, check):
    check(*_g1.steady_state("seqwrite", g1_fio["seqwrite"], kvgate.thresholds.g1))


def test_randread_4k_qd1_latency(g1_fio, kvgate, check):
    check(_g1.qd1_latency(g1_fio["randread-qd1"], kvgate.thresholds.g1))


def test_randread_4k_qd_sweep(g1_fio, kvgate, check):
    check(_g1.qd_sweep(g1_fio["qd-sweep"], kvgate.thresholds.g1, kvgate.site.fio.qd_sweep))


def test_kv_restore_bandwidth(g1_fio, kvgate, check):
    check(_g1.bandwidth("kvrestore", g1_fio["kvrestore"], kvgate.thresholds.g1,
                        kvgate.site.ceilings))


def test_kv_restore_steady_state(g1_fio, kvgate, check):
    check(*_g1.steady_state("kvrestore", g1_fio["kvrestore"], kvgate.thresholds.g1))
