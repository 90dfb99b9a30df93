"""xfs_info parser on real xfsprogs 6.1 output (images made with different su/sw) and the rule."""

from __future__ import annotations

import pytest
from _tooldata import tool_text
from hypothesis import given
from hypothesis import strategies as st

from gates.storage import ParseError
from gates.storage.xfs import alignment, parse_xfs_info

KiB = 1024


@pytest.mark.parametrize("name, unit, disks, agcount", [
    ("xfs_info_mounted_su64k_sw4.txt", 64 * KiB, 4, 8),
    ("xfs_info_image_su512k_sw3.txt", 512 * KiB, 3, 8),
    ("xfs_info_image_misaligned_su256k_sw4.txt", 256 * KiB, 4, 8),
])
def test_stripe_geometry_of_real_filesystems(name, unit, disks, agcount):
    geometry = parse_xfs_info(tool_text(name))
    assert geometry.block_size == 4096 and geometry.agcount == agcount
    assert geometry.stripe_unit == unit and geometry.stripe_disks == disks


def test_mounted_path_names_the_device_and_an_image_names_the_file():
    assert parse_xfs_info(tool_text("xfs_info_mounted_su64k_sw4.txt")).device == "/dev/loop0"
    image = parse_xfs_info(tool_text("xfs_info_image_su512k_sw3.txt"))
    assert image.device == "su512k_sw3.img" and image.sector_size == 512
    # The log section's own sunit (8 blks) must not be mistaken for the data section's.
    assert image.sunit == 128 and image.swidth == 384 and image.blocks == 262144


def test_no_stripe():
    geometry = parse_xfs_info(tool_text("xfs_info_image_nostripe.txt"))
    assert (geometry.sunit, geometry.swidth, geometry.stripe_disks) == (0, 0, None)
    rule = alignment(geometry, 512 * KiB, 4)
    assert not rule.unit_ok and not rule.width_ok
    assert "no stripe unit (sunit=0)" in rule.explain() and "su=512k,sw=4" in rule.explain()


def test_alignment_rule_both_ways():
    geometry = parse_xfs_info(tool_text("xfs_info_mounted_su64k_sw4.txt"))
    good = alignment(geometry, 64 * KiB, 4)
    assert good.unit_ok and good.width_ok and good.explain() == ""
    wrong = alignment(geometry, 512 * KiB, 3)
    assert not wrong.unit_ok and not wrong.width_ok
    text = wrong.explain()
    assert "stripe unit is 64 KiB" in text and "chunk is 512 KiB" in text
    assert "3 data disks" in text and "mkfs.xfs -d su=512k,sw=3" in text


def test_not_xfs_info_output():
    with pytest.raises(ParseError, match="xfs_info.*meta-data"):
        parse_xfs_info("xfs_info: /tmp is not a mounted XFS filesystem\n")


def test_garbled_number_is_named():
    text = tool_text("xfs_info_image_nostripe.txt").replace("bsize=4096   blocks",
                                                            "bsize=4k   blocks")
    with pytest.raises(ParseError, match="bsize='4k'"):
        parse_xfs_info(text)


@given(st.text(max_size=300) | st.lists(st.sampled_from([
    "meta-data=x isize=512 agcount=", "data     =  bsize=", "sunit=0 swidth=", "blocks=",
    "agcount=4, agsize=1", "0", "4096", "=", "\n", " ", ","]), max_size=30).map("".join))
def test_parser_raises_only_parse_errors(text):
    try:
        parse_xfs_info(text)
    except ParseError as exc:
        assert "xfs_info" in str(exc)
