"""md RAID parsers: mdadm 4.2 --detail / --export, /proc/mdstat, sysfs chunk_size.

The kernel here has no md driver (CONFIG_MD unset), so these outputs are written to mdadm's and
the kernel's documented formats; see tests/data/tools/README.md.
"""

from __future__ import annotations

import pytest
from _tooldata import tool_text
from hypothesis import given
from hypothesis import strategies as st

from gates.storage import ParseError
from gates.storage.raid import (
    data_disks,
    parse_chunk_size,
    parse_mdadm_detail,
    parse_mdadm_export,
    parse_mdstat,
)

KiB = 1024


def test_detail_healthy_raid0():
    array = parse_mdadm_detail(tool_text("mdadm_detail_raid0.txt"))
    assert (array.device, array.level, array.level_number) == ("/dev/md127", "raid0", 0)
    assert (array.raid_devices, array.active, array.failed_count) == (4, 4, 0)
    assert array.chunk == 512 * KiB and array.size == 15001317376 * KiB
    assert array.state == "clean" and not array.degraded
    assert [m.device for m in array.members] == [f"/dev/nvme{i}n1" for i in range(1, 5)]
    assert [m.slot for m in array.members] == [0, 1, 2, 3]


def test_detail_degraded_raid5_names_the_failed_member():
    array = parse_mdadm_detail(tool_text("mdadm_detail_raid5_degraded.txt"))
    assert array.level_number == 5 and array.state == "clean, degraded" and array.degraded
    assert (array.active, array.failed_count) == (3, 1)
    failed = array.failed_members
    assert [(m.device, m.state) for m in failed] == [("", "removed"), ("/dev/nvme3n1", "faulty")]


def test_export_has_level_and_roles_but_no_state():
    array = parse_mdadm_export(tool_text("mdadm_export_raid0.txt"))
    assert (array.level, array.raid_devices, array.device) == ("raid0", 4, "kvt")
    assert array.chunk is None and array.state == "" and not array.degraded
    degraded = parse_mdadm_export(tool_text("mdadm_export_raid5_degraded.txt"))
    assert [m.device for m in degraded.failed_members] == ["/dev/nvme3n1"]
    assert degraded.degraded


def test_mdstat_healthy_degraded_and_recovering():
    (raid0,) = parse_mdstat(tool_text("mdstat_raid0.txt"))
    assert (raid0.name, raid0.level, raid0.chunk, raid0.map) == ("md127", "raid0", 512 * KiB, "")
    assert len(raid0.members) == 4 and raid0.blocks == 15001317376
    (raid5,) = parse_mdstat(tool_text("mdstat_raid5_degraded.txt"))
    assert (raid5.raid_devices, raid5.working, raid5.map) == (4, 3, "UU_U")
    assert [m.device for m in raid5.members if m.state == "faulty"] == ["nvme3n1"]
    # The bitmap's "65536KB chunk" must not be read as the array's chunk.
    assert raid5.chunk == 512 * KiB
    recovering, inactive = parse_mdstat(tool_text("mdstat_raid5_resync.txt"))
    assert recovering.map == "UUU_" and not inactive.active and inactive.level == ""
    assert inactive.members[0].state == "spare"
    # An inactive array whose last member has no flag: the array's state is not the member's
    # (before, the member loop overwrote it and such an array read as active).
    stopped = tool_text("mdstat_raid5_resync.txt").replace("nvme5n1[0](S)", "nvme5n1[0]")
    assert not parse_mdstat(stopped)[1].active


def test_sysfs_chunk_size():
    assert parse_chunk_size(tool_text("md_chunk_size.txt")) == 512 * KiB
    with pytest.raises(ParseError, match="chunk_size"):
        parse_chunk_size("none\n")


@pytest.mark.parametrize("level, members, disks", [
    (0, 4, 4), (5, 4, 3), (6, 6, 4), (10, 4, 2), (1, 2, 1), (4, 3, 2)])
def test_data_disk_rule(level, members, disks):
    assert data_disks(level, members) == disks


def test_errors_name_the_command():
    with pytest.raises(ParseError, match="mdadm --detail.*Raid Level"):
        parse_mdadm_detail("mdadm: cannot open /dev/md0: No such file or directory\n")
    with pytest.raises(ParseError, match="mdadm --detail --export.*MD_LEVEL"):
        parse_mdadm_export("MD_DEVICES=4\n")
    with pytest.raises(ParseError, match="/proc/mdstat"):
        parse_mdstat("")


def test_detail_rejects_a_garbled_device_table():
    text = tool_text("mdadm_detail_raid0.txt").replace("       3     259", "       x     259")
    with pytest.raises(ParseError, match="unexpected device line"):
        parse_mdadm_detail(text)


LINES = ["/dev/md0:", "Raid Level : raid5", "Raid Devices : 4", "Chunk Size : 64K",
         "Number   Major   Minor   RaidDevice State", "0 8 0 0 active sync /dev/sda",
         "MD_LEVEL=raid0", "MD_DEVICE_x_ROLE=1", "Personalities : [raid0]",
         "md0 : active raid0 sda[0]", "  100 blocks 64k chunks [2/1] [U_]", "State : clean"]


@given(st.text(max_size=200) | st.lists(st.sampled_from(LINES) | st.text(max_size=20),
                                        max_size=12).map("\n".join))
def test_parsers_raise_only_parse_errors(text):
    for parse, command in ((parse_mdadm_detail, "mdadm --detail"),
                           (parse_mdadm_export, "mdadm --detail --export"),
                           (parse_mdstat, "/proc/mdstat"), (parse_chunk_size, "chunk_size")):
        try:
            parse(text)
        except ParseError as exc:
            assert command in str(exc)
