"""gates.proof.counters: storage NICs and RDMA ports from a real sysfs-shaped tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.proof import AttributionError, SysfsCounters, storage_reads
from gates.proof.counters import StorageSnapshot
from gates.proof.disks import DiskIO, FakeDiskCounters


def sysfs(root: Path, rx: int, words: int) -> Path:
    """Write the files the kernel serves for one NIC and one RDMA port."""
    nic = root / "class" / "net" / "ens1f0np0" / "statistics"
    nic.mkdir(parents=True, exist_ok=True)
    (nic / "rx_bytes").write_text(f"{rx}\n")
    port = root / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "counters"
    port.mkdir(parents=True, exist_ok=True)
    (port / "port_rcv_data").write_text(f"{words}\n")
    return root


def test_nic_and_rdma_reads_between_two_snapshots(tmp_path):
    disks = FakeDiskCounters([{"nvme1n1": DiskIO(read_bytes=100)},
                              {"nvme1n1": DiskIO(read_bytes=4196)}])
    counters = SysfsCounters(["ens1f0np0"], ["mlx5_0"], disks=disks, root=tmp_path)
    sysfs(tmp_path, rx=1_000, words=10)
    before = counters.read()
    sysfs(tmp_path, rx=9_000, words=1_010)
    after = counters.read()
    reads = storage_reads(before, after, ["/dev/nvme1n1"])
    assert reads.nic_bytes == 8_000 and reads.rdma_bytes == 4_000  # 1,000 words of 4 bytes
    assert reads.device_bytes == 4_096 and reads.per_item["mlx5_0/1"] == 4_000
    assert reads.any_watched


def test_nothing_watched_is_none_not_zero():
    reads = storage_reads(StorageSnapshot(), StorageSnapshot())
    assert reads.device_bytes is None and reads.nic_bytes is None and not reads.any_watched


def test_a_counter_that_went_down_is_named(tmp_path):
    counters = SysfsCounters(["ens1f0np0"], root=sysfs(tmp_path, rx=5_000, words=0))
    before = counters.read()
    sysfs(tmp_path, rx=10, words=0)
    with pytest.raises(AttributionError, match="'ens1f0np0': the counter went down"):
        storage_reads(before, counters.read())


def test_a_missing_interface_or_rdma_device_is_named(tmp_path):
    with pytest.raises(AttributionError, match="rx_bytes"):
        SysfsCounters(["eth9"], root=tmp_path).read()
    with pytest.raises(AttributionError, match="RDMA device 'mlx9'"):
        SysfsCounters([], ["mlx9"], root=tmp_path).read()


def test_an_md_array_and_its_members_are_never_both_counted(tmp_path):
    from gates.proof import double_counted

    slaves = tmp_path / "block" / "md127" / "slaves"
    slaves.mkdir(parents=True)
    for member in ("nvme1n1", "nvme2n1"):
        (slaves / member).mkdir()
    assert double_counted(["/dev/md127"], tmp_path) == ""
    assert double_counted(["nvme1n1", "nvme2n1"], tmp_path) == ""
    why = double_counted(["/dev/md127", "/dev/nvme2n1"], tmp_path)
    assert "md127 and its members nvme2n1" in why and "count twice" in why


def test_an_rdma_port_gone_after_the_probe_is_named_not_dropped_from_the_sum(tmp_path):
    # Two ports of mlx5_0; port 2 went away mid-probe (a link reset re-enumerates the ports):
    # summed over port 1 alone, the storage side lost what port 2 carried.
    sysfs(tmp_path, rx=0, words=0)
    second = tmp_path / "class" / "infiniband" / "mlx5_0" / "ports" / "2" / "counters"
    second.mkdir(parents=True)
    (second / "port_rcv_data").write_text("0\n")
    counters = SysfsCounters([], ["mlx5_0"], root=tmp_path)
    before = counters.read()
    sysfs(tmp_path, rx=0, words=1_000)
    (second / "port_rcv_data").unlink()
    second.rmdir()
    second.parent.rmdir()
    with pytest.raises(AttributionError, match="RDMA port 'mlx5_0/2' .*not in the snapshot "
                       "after the probe"):
        storage_reads(before, counters.read())
