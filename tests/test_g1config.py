"""G1 configuration checks on inventories parsed from tool outputs, and on a real striped XFS."""

from __future__ import annotations

from pathlib import Path

import pytest
from _loopdev import loop_device, mkfs_xfs, mounted, need_root
from _tooldata import tool_text

from gates.core.configuration import G1Limits, Site
from gates.core.verdicts import Outcome
from gates.storage import (
    Collector,
    Found,
    Inventory,
    SubprocessRunner,
    collect,
    parse_list_subsys,
    parse_smart_log,
)
from gates.storage import g1config as g1c
from gates.storage.blockdev import BlockDevice, Mount
from gates.storage.net import GidEntry, NicState, parse_rdma_links
from gates.storage.nvme import parse_id_ctrl, parse_nvme_list
from gates.storage.raid import parse_mdadm_detail, parse_mdadm_export
from gates.storage.xfs import parse_xfs_info

LIMITS = G1Limits(seq_read_bw_min=1, seq_write_bw_min=1, kv_restore_bw_min=1,
                  randread_4k_qd1_p99_max=1, randread_4k_iops_min=1)
ORDER = {"raid_level": 0, "members": 4, "chunk": "512KiB", "transport": "rdma",
         "filesystem": "xfs", "mount_options": ["noatime"], "namespaces": 4,
         "sector_size": 4096, "capacity": "15.36TB", "interfaces": ["ens1f0np0"],
         "link_speed": "100 Gb/s", "mtu": 4200}
EV = ["evidence/x.out"]


def site(target: str = "/mnt/kv/target", **topology) -> Site:
    return Site.model_validate({"site": {"name": "t"}, "target": {"directory": target},
                                "fio": {"file_size": "1MiB"}, "topology": topology})


def healthy() -> Inventory:
    """A 4-drive NVMe-oF RAID0 over RDMA, built as ordered."""
    namespaces = [n for n in parse_nvme_list(tool_text("nvme_list_2.3.json"))
                  if n.device != "/dev/nvme0n1"]
    controllers = {n.controller: Found(value=parse_id_ctrl(tool_text("nvme_id_ctrl_2.3.json")),
                                       evidence=EV) for n in namespaces}
    smart = {c: Found(value=parse_smart_log(tool_text("nvme_smart_log_2.3.json")), evidence=EV)
             for c in controllers}
    return Inventory(
        target="/mnt/kv/target",
        mount=Found(value=Mount(target="/mnt/kv", source="/dev/md127", fstype="xfs",
                                options=["rw", "noatime", "inode64"]), evidence=EV),
        block=Found(value=[BlockDevice(name="md127", path="/dev/md127",
                                       size=15_362_249_949_184)], evidence=EV),
        xfs=Found(value=parse_xfs_info(tool_text("xfs_info_image_su512k_sw4.txt")), evidence=EV),
        raid=Found(value=parse_mdadm_detail(tool_text("mdadm_detail_raid0.txt")), evidence=EV),
        namespaces=Found(value=namespaces, evidence=EV), controllers=controllers, smart=smart,
        subsystems=Found(value=parse_list_subsys(tool_text("nvme_list_subsys_2.3_rdma.json"))),
        nics=Found(value=[NicState(name="ens1f0np0", speed_mbps=100000, mtu=4200,
                                   operstate="up")]),
        rdma=Found(value=parse_rdma_links(tool_text("rdma_link_active.json"))[:1]),
        gids=Found(value=[GidEntry(index=1, gid="fe80::1", type="RoCE v2")]))


def by_name(measurements):
    return {m.name: m for m in measurements}


def test_an_array_built_as_ordered_passes_every_check():
    results = g1c.all_checks(healthy(), site(**ORDER), LIMITS)
    # 14 array-wide checks, 4 SMART checks × 4 drives, speed and MTU of one NIC, RDMA, RoCE,
    # and 4 GPUDirect Storage checks, NOT APPLICABLE: the order declares no GDS.
    assert len(results) == 38
    gds = [m for m in results if m.name.startswith("GPUDirect Storage")]
    assert len(gds) == 4 and {m.outcome for m in gds} == {Outcome.NOT_APPLICABLE}
    failed = [(m.name, m.outcome, m.note) for m in results if m.outcome is not Outcome.PASS
              and m not in gds]
    assert not failed
    named = by_name(results)
    assert named["XFS stripe unit = RAID chunk"].value == 512
    assert named["XFS stripe width = data disks"].value == 4
    assert named["Capacity vs ordered"].unit == "TB"
    assert named["NVMe temperature (/dev/nvme1, S/N X3B0A017T0K8)"].limit.hi == 69.85
    assert all(m.evidence for m in results if m.name.startswith(("RAID", "XFS", "SMART")))


def test_degraded_raid5_fails_in_words_a_site_engineer_understands():
    inv = healthy()
    inv.raid = Found(value=parse_mdadm_detail(tool_text("mdadm_detail_raid5_degraded.txt")))
    ordered = site(**ORDER)
    level = g1c.raid_level(inv, ordered)
    assert level.outcome is Outcome.FAIL and "mdadm reports raid5; site.toml expects RAID0" in \
        level.note and "wrong level" in level.note
    state = g1c.raid_state(inv, ordered)
    assert state.outcome is Outcome.FAIL and "clean, degraded" in state.note
    assert "redundancy and speed are reduced" in state.note
    failed = g1c.raid_failed_members(inv, ordered)
    assert failed.outcome is Outcome.FAIL and failed.value == 1
    assert "/dev/nvme3n1 (faulty)" in failed.note and "replace the drive" in failed.note


def test_an_array_only_mdadm_export_described_is_judged_on_what_export_says():
    """mdadm --detail failed, --export answered: it has no State, so the state is unmeasured
    (ERROR), and the members are counted from its roles against MD_DEVICES (before: State "not
    reported" PASSed, and a member gone from the export counted as none missing)."""
    inv, ordered = healthy(), site(**ORDER)
    inv.raid = Found(value=parse_mdadm_export(tool_text("mdadm_export_raid0.txt")), evidence=EV)
    state = g1c.raid_state(inv, ordered)
    assert state.outcome is Outcome.ERROR and "mdadm reported no State" in state.note, state
    assert g1c.raid_failed_members(inv, ordered).outcome is Outcome.PASS
    # The same array with nvme4n1 gone: --export lists the three members it still has.
    gone = "\n".join(line for line in tool_text("mdadm_export_raid0.txt").splitlines()
                     if "nvme4n1" not in line)
    inv.raid = Found(value=parse_mdadm_export(gone), evidence=EV)
    failed = g1c.raid_failed_members(inv, ordered)
    assert failed.outcome is Outcome.FAIL and failed.value == 1, failed
    # Neither a slot count nor a role: nothing to count members by.
    bare = "MD_LEVEL=raid0\nMD_DEVNAME=kvt\n"
    inv.raid = Found(value=parse_mdadm_export(bare), evidence=EV)
    unknown = g1c.raid_failed_members(inv, ordered)
    assert unknown.outcome is Outcome.ERROR and "mdadm said neither" in unknown.note, unknown


def test_three_members_and_the_wrong_chunk_fail():
    inv = healthy()
    inv.raid = Found(value=parse_mdadm_detail(tool_text("mdadm_detail_raid0_3members_256k.txt")))
    members = g1c.raid_members(inv, site(**ORDER))
    chunk = g1c.raid_chunk(inv, site(**ORDER))
    assert (members.outcome, members.value, chunk.outcome, chunk.value) == (
        Outcome.FAIL, 3, Outcome.FAIL, 256)
    assert "ordered 4" in members.note


@pytest.mark.parametrize("image, words", [
    ("xfs_info_image_misaligned_su256k_sw4.txt", "stripe unit is 256 KiB (sunit × bsize) but the "
     "RAID chunk is 512 KiB"),
    ("xfs_info_image_nostripe.txt", "no stripe unit (sunit=0)"),
])
def test_misaligned_xfs_fails_and_says_how_to_fix_it(image, words):
    inv = healthy()
    inv.xfs = Found(value=parse_xfs_info(tool_text(image)))
    unit = g1c.xfs_stripe_unit(inv, site(**ORDER))
    assert unit.outcome is Outcome.FAIL and words in unit.note
    assert "mkfs.xfs -d su=512k,sw=4" in unit.note


def test_stripe_width_uses_the_data_disk_rule():
    inv = healthy()
    inv.raid = Found(value=parse_mdadm_detail(tool_text("mdadm_detail_raid5_degraded.txt")))
    inv.xfs = Found(value=parse_xfs_info(tool_text("xfs_info_image_su512k_sw3.txt")))
    raid5 = site(**{**ORDER, "raid_level": 5})
    assert g1c.xfs_stripe_width(inv, raid5).outcome is Outcome.PASS  # 4 members - 1 parity
    wide = g1c.xfs_stripe_width(inv, site(**ORDER))  # RAID0: all 4 carry data
    assert wide.outcome is Outcome.FAIL and "the array has 4 data disks" in wide.note
    assert g1c.xfs_stripe_width(inv, site(**{**ORDER, "data_disks": 3})).outcome is Outcome.PASS


def test_filesystem_and_mount_options():
    inv = healthy()
    inv.mount = Found(value=Mount(target="/", source="/dev/vda", fstype="ext4",
                                  options=["rw", "relatime"]))
    fstype = g1c.filesystem_type(inv, site(**ORDER))
    assert fstype.outcome is Outcome.FAIL and "is on ext4" in fstype.note
    assert "site.toml expects xfs" in fstype.note
    options = g1c.mount_options(inv, site(**ORDER))
    assert options.outcome is Outcome.FAIL and "missing: noatime" in options.note
    assert g1c.xfs_stripe_unit(Inventory(target="/", xfs=Found(skipped="on ext4")),
                               site(**ORDER)).outcome is Outcome.NOT_APPLICABLE


def test_capacity_tolerance():
    inv = healthy()
    assert g1c.capacity(inv, site(**ORDER), LIMITS).outcome is Outcome.PASS
    short = g1c.capacity(inv, site(**{**ORDER, "capacity": "16TB"}), LIMITS)
    assert short.outcome is Outcome.FAIL and short.limit.key == "g1.capacity_tolerance"
    assert (short.limit.lo, short.limit.hi) == pytest.approx((15.68, 16.32))
    big = g1c.capacity(inv, site(**{**ORDER, "capacity": "15TB"}), LIMITS)
    assert big.outcome is Outcome.FAIL  # 15.36 TB is 2.4 % over: not the array ordered


def test_namespaces_and_sector_size():
    inv = healthy()
    assert g1c.namespace_count(inv, site(**{**ORDER, "namespaces": 5})).outcome is Outcome.FAIL
    odd = g1c.sector_size(inv, site(**{**ORDER, "sector_size": 512}))
    assert odd.outcome is Outcome.FAIL and odd.value == 4096


def test_tcp_path_and_a_dead_path_fail_when_rdma_was_ordered():
    inv = healthy()
    inv.subsystems = Found(value=parse_list_subsys(tool_text("nvme_list_subsys_2.11_tcp.json")))
    transport = g1c.fabric_transport(inv, site(**ORDER))
    assert transport.outcome is Outcome.FAIL and transport.value == 2
    assert "reached over tcp, not as ordered" in transport.note
    live = g1c.fabric_paths_live(inv, site(**ORDER))
    assert live.outcome is Outcome.FAIL and "nvme2 (connecting" in live.note
    tcp_site = site(**{**ORDER, "transport": "tcp"})
    assert g1c.fabric_transport(inv, tcp_site).outcome is Outcome.PASS
    nothing = g1c.fabric_transport(Inventory(target="/", subsystems=Found(value=[])), tcp_site)
    assert nothing.outcome is Outcome.FAIL and "no NVMe over Fabrics path" in nothing.note


def test_smart_failures():
    inv = healthy()
    inv.smart["/dev/nvme2"] = Found(value=parse_smart_log(
        tool_text("nvme_smart_log_2.3_media_errors.json")))
    inv.smart["/dev/nvme3"] = Found(value=parse_smart_log(
        tool_text("nvme_smart_log_2.11_verbose_warning.json")))
    worst = {m.name: m for f in (g1c.smart_critical_warning, g1c.smart_media_errors,
                                 g1c.smart_percent_used, g1c.smart_temperature)
             for m in f(inv, LIMITS) if m.outcome is not Outcome.PASS}
    assert sorted(worst) == [
        "NVMe temperature (/dev/nvme3, S/N X3B0A017T0K8)",
        "SMART critical warning (/dev/nvme3, S/N X3B0A017T0K8)",
        "SMART media errors (/dev/nvme2, S/N X3B0A017T0K8)",
        "SMART percent used (/dev/nvme3, S/N X3B0A017T0K8)"]
    warning = worst["SMART critical warning (/dev/nvme3, S/N X3B0A017T0K8)"]
    assert "available spare below threshold" in warning.note and warning.value == 5


def test_temperature_falls_back_when_the_drive_reports_no_threshold():
    inv = healthy()
    inv.controllers = {c: Found(value=parse_id_ctrl(tool_text(
        "nvme_id_ctrl_fabric_no_wctemp.json"))) for c in inv.controllers}
    (first, *_) = g1c.smart_temperature(inv, LIMITS)
    assert first.limit.key == "g1.temperature_max" and first.outcome is Outcome.PASS
    assert "reports no warning threshold" in first.note


def test_temperature_is_an_error_when_the_drives_threshold_could_not_be_read():
    """Before: an id-ctrl that failed fell back to g1.temperature_max (70 °C), saying the drive
    reports no threshold; a drive whose own WCTEMP is lower passed hotter than it allows."""
    inv = healthy()
    inv.controllers = {c: Found(error="`nvme id-ctrl` failed (exit status 1): Resource busy")
                       for c in inv.controllers}
    (first, *_) = g1c.smart_temperature(inv, LIMITS)
    assert first.outcome is Outcome.ERROR, first
    assert "warning threshold (WCTEMP, nvme id-ctrl) could not be read: `nvme id-ctrl` " \
        "failed" in first.note


def test_links_ports_and_roce():
    inv = healthy()
    inv.nics = Found(value=[NicState(name="ens1f0np0", speed_mbps=25000, mtu=1500,
                                     operstate="up"),
                            NicState(name="ens1f1np1", speed_mbps=None, operstate="down"),
                            NicState(name="eth9", speed_mbps=None, mtu=9000, operstate="up")])
    speed = by_name(g1c.link_speed(inv, site(**ORDER)))
    slow = speed["Link speed (ens1f0np0)"]
    assert slow.outcome is Outcome.FAIL and slow.value == 25 and "ordered 100 Gb/s" in slow.note
    assert speed["Link speed (ens1f1np1)"].outcome is Outcome.FAIL  # down: 0 Gb/s
    assert speed["Link speed (eth9)"].outcome is Outcome.ERROR  # up, but no speed reported
    assert by_name(g1c.mtu(inv, site(**ORDER)))["MTU (ens1f0np0)"].outcome is Outcome.FAIL
    inv.rdma = Found(value=parse_rdma_links(tool_text("rdma_link_down.json")))
    assert g1c.rdma_ports_active(inv, site(**ORDER)).outcome is Outcome.FAIL
    inv.gids = Found(value=[GidEntry(index=0, gid="fe80::1", type="IB/RoCE v1")])
    roce = g1c.roce_v2(inv, site(**ORDER))
    assert roce.outcome is Outcome.FAIL and "types seen: IB/RoCE v1" in roce.note


def test_an_rdma_site_without_interfaces_is_an_error_not_a_pass():
    inv = healthy()
    inv.nics = Found(skipped="site.toml [topology] names no interfaces")
    (speed,) = g1c.link_speed(inv, site(**{**ORDER, "interfaces": []}))
    assert speed.outcome is Outcome.ERROR and "name the NICs" in speed.note


def test_uncollected_facts_are_errors_and_skipped_ones_not_applicable():
    missing = Found(error="`mdadm --detail /dev/md127` failed (exit status 1)")
    inv = Inventory(target="/", raid=missing, xfs=missing, mount=missing, block=missing,
                    namespaces=missing, subsystems=missing, nics=missing, rdma=missing,
                    gids=missing)
    outcomes = {m.name: m.outcome for m in g1c.all_checks(inv, site(**ORDER), LIMITS)}
    # The GDS checks do not apply to an order without GDS, collected or not.
    assert {o for n, o in outcomes.items() if n.startswith("GPUDirect Storage")} == {
        Outcome.NOT_APPLICABLE}
    assert {o for n, o in outcomes.items() if not n.startswith("GPUDirect Storage")} == {
        Outcome.ERROR}
    skipped = Found(skipped="does not apply")
    inv = Inventory(target="/", raid=skipped, xfs=skipped, mount=skipped, block=skipped,
                    namespaces=skipped, subsystems=skipped, nics=skipped, rdma=skipped,
                    gids=skipped)
    results = g1c.all_checks(inv, site(filesystem="", transport="local"), LIMITS)
    assert {m.outcome for m in results} == {Outcome.NOT_APPLICABLE}
    assert all(m.note for m in results)


def test_xfs_alignment_to_an_md_array_that_could_not_be_read_is_an_error():
    """XFS read, the md array not (mdadm failed), site.toml silent on the stripe: the stripe
    is unknown, not absent (before: NOT APPLICABLE, "no md array was found")."""
    inv = healthy()
    inv.raid = Found(error="`mdadm --detail /dev/md127` failed (exit status 1): busy")
    silent = site(filesystem="xfs", transport="rdma", interfaces=["ens1f0np0"])
    unit, width = g1c.xfs_stripe_unit(inv, silent), g1c.xfs_stripe_width(inv, silent)
    for m in (unit, width):
        assert m.outcome is Outcome.ERROR, m
        assert "the md array could not be read: `mdadm --detail /dev/md127` failed" in m.note
    inv.raid = Found(skipped="site.toml orders no RAID")  # no array at all: nothing to align to
    assert g1c.xfs_stripe_unit(inv, silent).outcome is Outcome.NOT_APPLICABLE


def test_embedded_default_site_file(repo):
    from gates.core.configuration import load_site
    embedded, _ = load_site(repo / "site.toml")
    inv = Inventory(target="/x", mount=Found(value=Mount(target="/", source="/dev/vda",
                                                         fstype="ext4", options=["rw"])))
    by = by_name(g1c.all_checks(collect_reasons(inv, embedded), embedded, LIMITS))
    assert by["Required mount options"].outcome is Outcome.PASS
    assert by["Filesystem type"].outcome is Outcome.NOT_APPLICABLE
    assert "the target is on ext4" in by["Filesystem type"].note


def collect_reasons(inv: Inventory, embedded: Site) -> Inventory:
    """The skipped facts the collector would record for this site (no commands run)."""
    from gates.storage.inventory import applies
    why = applies(embedded.topology)
    for name, group in (("raid", "raid"), ("namespaces", "nvme"), ("subsystems", "fabric"),
                        ("nics", "nics"), ("rdma", "rdma"), ("gids", "rdma")):
        setattr(inv, name, Found(skipped=why[group]))
    inv.xfs = Found(skipped="the target is on ext4, not XFS")
    return inv


def test_real_striped_xfs_is_judged_against_the_site(tmp_path: Path):
    need_root("losetup", "mkfs.xfs", "mount", "xfs_info", "findmnt", "lsblk")
    with loop_device(tmp_path / "xfs.img", 1024**3) as device:
        mkfs_xfs(device, "-d", "su=64k,sw=4")
        with mounted(device, tmp_path / "mnt", "-o", "noatime") as mnt:
            target = str(mnt / "kvgate")
            geometry = {"chunk": "64KiB", "data_disks": 4, "filesystem": "xfs",
                        "mount_options": ["noatime"]}
            expects = site(target, **geometry)
            inv = collect(expects, Collector(SubprocessRunner(), tmp_path / "evidence"))
            assert inv.xfs.ok and inv.mount.value.source == device
            for check in (g1c.xfs_stripe_unit, g1c.xfs_stripe_width, g1c.filesystem_type,
                          g1c.mount_options):
                result = check(inv, expects)
                assert result.outcome is Outcome.PASS, (result.name, result.note)
            other = site(target, **{**geometry, "chunk": "512KiB", "data_disks": 3})
            unit, width = g1c.xfs_stripe_unit(inv, other), g1c.xfs_stripe_width(inv, other)
    assert (unit.outcome, unit.value, width.outcome, width.value) == (
        Outcome.FAIL, 64, Outcome.FAIL, 4)
    assert "mkfs.xfs -d su=512k,sw=3" in unit.note and "3 data disks" in width.note
    assert any(p.name.startswith("config-xfs-info") for p in (tmp_path / "evidence").iterdir())


def test_topology_keys_are_validated():
    from pydantic import ValidationError
    with pytest.raises(ValidationError, match="one of 0, 1, 4, 5, 6, 10"):
        site(raid_level=3)
    with pytest.raises(ValidationError, match="RAID6 needs at least 4 members, not 3"):
        site(raid_level=6, members=3)
    assert site(capacity="14TB", sector_size="4KiB").topology.sector_size == 4096


def test_g1_report_shows_the_dut_identity():
    from gates.core.verdicts import GateRecord, Measurement
    from gates.report import ReportContext
    from gates.report.report import render_html
    record = GateRecord(gate="g1", run_id="r1", site="t", started="s",
                        measurements=[Measurement.not_applicable("RAID level", "no RAID")],
                        inventory=healthy().dut())
    context = ReportContext(site=site().site, target="/t", thresholds_path="th", site_path="st")
    html = render_html(record, context, "rule")
    assert "Device under test" in html and "X3B0A017T0K8" in html and "KIOXIA" in html
    assert "No inventory was collected" in render_html(
        record.model_copy(update={"inventory": None}), context)


def test_a_collected_array_without_an_ordered_raid_level_is_not_applicable():
    inv = healthy()
    inv.raid = Found(value=parse_mdadm_detail(tool_text("mdadm_detail_raid5_degraded.txt")))
    level = g1c.raid_level(inv, site())
    assert level.outcome is Outcome.NOT_APPLICABLE and "sets no raid_level" in level.note
