"""findmnt -J and lsblk -J -b parsers on real util-linux 2.38 output and the older string form."""

from __future__ import annotations

import pytest
from _tooldata import json_texts, tool_text
from hypothesis import given

from gates.storage import ParseError
from gates.storage.blockdev import mount_for, parse_findmnt, parse_lsblk


def test_findmnt_target_on_a_real_xfs_mount():
    (mount,) = parse_findmnt(tool_text("findmnt_target_xfs_noatime.json"))
    assert (mount.target, mount.source, mount.fstype) == ("/tmp/xrec/mnt", "/dev/loop0", "xfs")
    assert mount.option("noatime") and mount.option("rw") and mount.option("sunit")
    assert not mount.option("relatime") and not mount.option("sun")


def test_findmnt_tree_is_flattened_and_the_longest_prefix_holds_a_path():
    mounts = parse_findmnt(tool_text("findmnt_all.json"))
    assert mounts[0].target == "/" and len(mounts) > 5
    assert {m.target for m in mounts} >= {"/", "/proc", "/sys"}
    assert mount_for(mounts, "/work/main/.kvgate-target").target == "/"
    assert mount_for(mounts, "/proc/self").target == "/proc"
    assert mount_for(mounts, "/process").target == "/"  # a prefix of the name is not a parent


def test_lsblk_numbers_and_flags_in_2_38_form():
    devices = parse_lsblk(tool_text("lsblk_all.json"))
    vda = next(d for d in devices if d.name == "vda")
    assert (vda.size, vda.rotational, vda.logical_sector, vda.physical_sector) == (
        274877906944, True, 512, 4096)
    assert vda.model == "" and vda.serial == ""  # null in the JSON


def test_lsblk_default_columns_have_no_path_and_get_one():
    devices = parse_lsblk(tool_text("lsblk_default_columns.json"))
    assert {d.path for d in devices} == {"/dev/zram0", "/dev/vda"}


def test_lsblk_older_util_linux_prints_strings():
    (disk,) = parse_lsblk(tool_text("lsblk_2.32_strings.json"))
    assert (disk.size, disk.rotational, disk.min_io, disk.serial) == (
        3840755982336, False, 4096, "X3B0A017T0K8")
    (md,) = disk.children
    assert (md.type, md.opt_io, md.min_io) == ("raid0", 2097152, 524288)
    assert [d.name for d in disk.walk()] == ["nvme1n1", "md127"]


@pytest.mark.parametrize("text, words", [
    ("", "printed nothing"), ("findmnt: nothing", "not JSON"), ("[]", "not a JSON object"),
    ('{"filesystems": [{"source": "x"}]}', "no 'target'")])
def test_findmnt_errors_name_the_command(text, words):
    with pytest.raises(ParseError, match=words) as caught:
        parse_findmnt(text)
    assert "findmnt -J" in str(caught.value)


def test_lsblk_rejects_a_size_that_is_not_a_number():
    with pytest.raises(ParseError, match="lsblk -J -b.*'size'"):
        parse_lsblk('{"blockdevices": [{"name": "sda", "size": "12T"}]}')


@given(json_texts)
def test_parsers_raise_only_parse_errors(text):
    for parse in (parse_findmnt, parse_lsblk):
        try:
            parse(text)
        except ParseError as exc:
            assert "findmnt" in str(exc) or "lsblk" in str(exc)
