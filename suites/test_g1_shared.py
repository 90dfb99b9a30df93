"""G1 on a shared array: the figures of several client hosts (site.toml [fio] hosts).

A buyer of an array that serves several GPU servers asks whether every server answered with the
same instrument, what each got and what all got at once, how far the slowest fell behind, the
tail latency of every I/O (the hosts' histograms merged), how the KV restore scales from one
host to all, and what one host's restore keeps while another writes. With no [fio] hosts fio
runs on this machine alone and these checks record nothing: the record is the one-host G1.
"""

import pytest

from gates.core.verdicts import Measurement
from gates.storage import g1hosts as _hosts
from gates.storage import g1shared as _shared

pytestmark = [pytest.mark.gate, pytest.mark.g1]


@pytest.fixture
def hosts(kvgate):
    return kvgate.site.fio.hosts


@pytest.fixture
def band(kvgate):
    """The guard band of thresholds.toml [decision], as a fraction of each bound."""
    return kvgate.thresholds.decision.marginal_band / 100


def test_fio_servers(hosts, g1_probes, g1_fio, kvgate, check):
    if hosts:
        check(_hosts.fio_servers(g1_probes, kvgate.tool_versions.get("fio", "")))


def test_kv_restore_per_host(hosts, g1_fio, kvgate, band, check):
    if not hosts:
        return
    step, limits = g1_fio["kvrestore"], kvgate.thresholds.g1
    check(*_hosts.per_host(step), _hosts.aggregate(step, limits, band), _hosts.merged_p99(step))


def test_kv_restore_straggler_spread(hosts, g1_fio, kvgate, band, check):
    if len(hosts) == 1:
        check(Measurement.not_applicable(
            "KV-restore straggler spread across hosts", "one [fio] host: no spread"))
    elif hosts:
        check(_hosts.spread(g1_fio["kvrestore"], kvgate.thresholds.g1, band))


def test_kv_restore_scaling(hosts, g1_fio, check):
    if len(hosts) > 1:
        check(_shared.scaling({int(k.removeprefix("kvscale-")): s for k, s in g1_fio.items()
                               if k.startswith("kvscale-")}))


def test_kv_restore_beside_a_neighbour(hosts, g1_fio, kvgate, band, check):
    if len(hosts) > 1:
        check(_shared.neighbour(g1_fio.get("kvscale-1"), g1_fio.get("kvneighbour"),
                                kvgate.site.fio.neighbour_write_rate, kvgate.thresholds.g1,
                                band))
