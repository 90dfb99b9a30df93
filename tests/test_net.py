"""NIC sysfs values (real eth0 of this VM, and a 25/100 Gb/s form), rdma links and GID types."""

from __future__ import annotations

import pytest
from _tooldata import TOOLS, json_texts, tool_text
from hypothesis import given
from hypothesis import strategies as st

from gates.storage import ParseError
from gates.storage.net import parse_gid_table, parse_rdma_links, parse_sysfs_net


def test_real_virtio_nic_reports_no_speed():
    folder = TOOLS / "sysfs/class/net/eth0"
    nic = parse_sysfs_net("eth0", *((folder / f).read_text() for f in ("speed", "mtu",
                                                                       "operstate")))
    assert (nic.speed_mbps, nic.speed_gbps, nic.mtu, nic.operstate) == (None, None, 1400, "up")


@pytest.mark.parametrize("speed, gbps", [("25000\n", 25.0), ("100000\n", 100.0), (None, None)])
def test_link_speeds(speed, gbps):
    assert parse_sysfs_net("ens1f0np0", speed, "4200\n", "up\n").speed_gbps == gbps


def test_bad_sysfs_values_name_the_files():
    with pytest.raises(ParseError, match="/sys/class/net/ens1/"):
        parse_sysfs_net("ens1", "fast", "1500", "up")
    with pytest.raises(ParseError, match="mtu 0"):
        parse_sysfs_net("ens1", "1000", "0", "up")


def test_rdma_links():
    active, down = parse_rdma_links(tool_text("rdma_link_active.json"))
    assert (active.name, active.state, active.netdev) == ("mlx5_0/1", "ACTIVE", "ens1f0np0")
    assert (down.state, down.physical_state) == ("DOWN", "DISABLED")
    (polling,) = parse_rdma_links(tool_text("rdma_link_down.json"))
    assert polling.physical_state == "POLLING"
    assert parse_rdma_links("[]\n") == []


def test_gid_table_keeps_populated_entries_with_their_type():
    gids = {0: "fe80:0000:0000:0000:ba59:9fff:fe12:3456\n",
            1: "fe80:0000:0000:0000:ba59:9fff:fe12:3456\n",
            2: "0000:0000:0000:0000:0000:ffff:c0a8:640a\n",
            3: "0000:0000:0000:0000:0000:ffff:c0a8:640a\n",
            4: "0000:0000:0000:0000:0000:0000:0000:0000\n"}
    types = {0: "IB/RoCE v1\n", 1: "RoCE v2\n", 2: "IB/RoCE v1\n", 3: "RoCE v2\n"}
    ndevs = dict.fromkeys(range(4), "ens1f0np0\n")
    entries = parse_gid_table("mlx5_0", 1, gids, types, ndevs)
    assert [(e.index, e.type) for e in entries] == [
        (0, "IB/RoCE v1"), (1, "RoCE v2"), (2, "IB/RoCE v1"), (3, "RoCE v2")]
    assert entries[3].netdev == "ens1f0np0"


@given(json_texts)
def test_rdma_parser_raises_only_parse_errors(text):
    try:
        parse_rdma_links(text)
    except ParseError as exc:
        assert "rdma -j link show" in str(exc)


@given(st.one_of(st.none(), st.text(max_size=12)), st.one_of(st.none(), st.text(max_size=12)),
       st.one_of(st.none(), st.text(max_size=12)))
def test_sysfs_parser_raises_only_parse_errors(speed, mtu, state):
    try:
        parse_sysfs_net("ens1", speed, mtu, state)
    except ParseError as exc:
        assert "/sys/class/net/ens1" in str(exc)


@given(st.dictionaries(st.integers(0, 8), st.text(max_size=40), max_size=6),
       st.dictionaries(st.integers(0, 8), st.text(max_size=12), max_size=6))
def test_gid_parser_raises_only_parse_errors(gids, types):
    try:
        parse_gid_table("mlx5_0", 1, gids, types, {})
    except ParseError as exc:
        assert "/sys/class/infiniband/mlx5_0/ports/1" in str(exc)
