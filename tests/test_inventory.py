"""Collectors through the runner seam: applicability, evidence, timeouts and every failure mode."""

from __future__ import annotations

import json
from pathlib import Path

from _tooldata import tool_text

from gates.core.configuration import Site
from gates.storage import Collector, ToolMissing, collect, install_hint
from gates.storage.inventory import applies
from gates.storage.runner import Completed, ScriptedRunner

MD_SITE = {"raid_level": 0, "members": 4, "chunk": "512KiB", "transport": "rdma",
           "devices": [f"/dev/nvme{i}n1" for i in range(1, 5)], "interfaces": ["ens1f0np0"],
           "link_speed": "100 Gb/s", "mtu": 4200}


def make_site(target: Path, **topology) -> Site:
    """A site whose target is a real directory; topology as site.toml [topology] would give it."""
    return Site.model_validate({
        "site": {"name": "test"}, "target": {"directory": str(target)},
        "fio": {"file_size": "1MiB"}, "topology": topology})


def findmnt_json(target: str, source: str, fstype: str, options: str = "rw,noatime") -> str:
    entry = {"target": target, "source": source, "fstype": fstype, "options": options}
    return json.dumps({"filesystems": [entry]})


def answers(table: dict[str, Completed | Exception | str]):
    """A ScriptedRunner answering by the longest matching command prefix; others exit 127."""
    def handler(argv: tuple[str, ...]) -> Completed:
        line = " ".join(argv)
        key = max((k for k in table if line.startswith(k)), key=len, default=None)
        if key is None:
            return Completed(argv, 127, "", f"unexpected command {line}")
        answer = table[key]
        if isinstance(answer, Exception):
            raise answer
        return answer if isinstance(answer, Completed) else Completed(argv, 0, answer)
    return ScriptedRunner(handler)


def fake_sysfs(root: Path) -> Path:
    """The /sys and /proc files an RDMA + md RAID0 host would have."""
    files = {
        "sys/class/net/ens1f0np0/speed": "100000\n", "sys/class/net/ens1f0np0/mtu": "4200\n",
        "sys/class/net/ens1f0np0/operstate": "up\n",
        "proc/mdstat": tool_text("mdstat_raid0.txt"),
        "sys/block/md127/md/chunk_size": tool_text("md_chunk_size.txt"),
    }
    port = "sys/class/infiniband/mlx5_0/ports/1"
    for index, kind in ((0, "IB/RoCE v1"), (1, "RoCE v2")):
        files[f"{port}/gids/{index}"] = "fe80:0000:0000:0000:ba59:9fff:fe12:3456\n"
        files[f"{port}/gid_attrs/types/{index}"] = kind + "\n"
        files[f"{port}/gid_attrs/ndevs/{index}"] = "ens1f0np0\n"
    files[f"{port}/gids/2"] = "0000:0000:0000:0000:0000:0000:0000:0000\n"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def rdma_host(tmp_path: Path) -> ScriptedRunner:
    target = str(tmp_path / "kv")
    return answers({
        "findmnt -J --target": findmnt_json(target, "/dev/md127", "xfs"),
        "lsblk -J -b": tool_text("lsblk_2.32_strings.json"),
        "xfs_info": tool_text("xfs_info_image_su512k_sw3.txt"),
        "mdadm --detail /dev/md127": tool_text("mdadm_detail_raid0.txt"),
        "mdadm --detail --export": tool_text("mdadm_export_raid0.txt"),
        "nvme list -o json": tool_text("nvme_list_2.11.json"),
        "nvme id-ctrl": tool_text("nvme_id_ctrl_2.3.json"),
        "nvme smart-log": tool_text("nvme_smart_log_2.11_verbose.json"),
        "nvme list-subsys": tool_text("nvme_list_subsys_2.3_rdma.json"),
        "rdma -j link show": tool_text("rdma_link_active.json"),
        "mdadm --version": Completed(("mdadm",), 0, "", "mdadm - v4.2 - 2021-12-30\n"),
        "nvme version": "nvme version 2.11 (git 2.11)\n",
        "xfs_info -V": "xfs_info version 6.1.0\n",
    })


def test_local_site_runs_only_the_filesystem_commands(tmp_path):
    runner = answers({"findmnt -J --target": tool_text("findmnt_target_ext4.json"),
                      "lsblk -J -b": tool_text("lsblk_all.json"),
                      "findmnt --version": "findmnt from util-linux 2.38.1\n"})
    site = make_site(tmp_path / "not-yet-created")
    inv = collect(site, Collector(runner, tmp_path / "evidence"))
    assert [c[0] for c in runner.calls] == ["findmnt", "lsblk", "findmnt"]
    # The target does not exist yet: its nearest existing parent is asked about.
    assert runner.calls[0][-1] == str(tmp_path)
    assert inv.mount.ok and inv.mount.value.fstype == "ext4"
    assert inv.xfs.skipped == "the target is on ext4, not XFS"
    assert "no raid_level" in inv.raid.skipped and 'transport is "local"' in inv.namespaces.skipped
    assert inv.nics.skipped and inv.rdma.skipped and inv.gids.skipped and inv.subsystems.skipped
    assert inv.tool_versions == {"findmnt": "findmnt from util-linux 2.38.1"}
    assert all(o["timeout"] == 30.0 for o in runner.options)
    kept = sorted(p.name for p in (tmp_path / "evidence").iterdir())
    assert kept[0].startswith("config-findmnt-J-target") and len(kept) == 2
    assert (tmp_path / "evidence" / kept[0]).read_text() == tool_text("findmnt_target_ext4.json")


def test_rdma_raid_host_collects_everything(tmp_path):
    runner = rdma_host(tmp_path)
    collector = Collector(runner, tmp_path / "evidence", root=fake_sysfs(tmp_path / "root"),
                          timeout=5)
    inv = collect(make_site(tmp_path / "kv", **MD_SITE), collector)
    assert inv.raid.ok and inv.raid.value.level == "raid0" and inv.raid.value.chunk == 524288
    assert [n.device for n in inv.namespaces.value] == [f"/dev/nvme{i}n1" for i in range(1, 5)]
    assert sorted(inv.smart) == [f"/dev/nvme{i}" for i in range(1, 5)]
    assert inv.nics.value[0].speed_gbps == 100 and inv.rdma.value[0].name == "mlx5_0/1"
    # Only the port of the site's interface; the other NIC's port is not the storage path.
    assert len(inv.rdma.value) == 1
    assert [(g.index, g.type) for g in inv.gids.value] == [(0, "IB/RoCE v1"), (1, "RoCE v2")]
    # Versions of the tools used; one that cannot say (findmnt, rdma here) is left out.
    assert inv.tool_versions == {"mdadm": "mdadm - v4.2 - 2021-12-30",
                                 "nvme": "nvme version 2.11 (git 2.11)",
                                 "xfs_info": "xfs_info version 6.1.0"}
    assert {o["timeout"] for o in runner.options} == {5}
    roles = {d.role for d in inv.dut()}
    assert roles >= {"md array", "NVMe controller", "NVMe subsystem", "NIC", "RDMA port"}
    serials = {d.serial for d in inv.dut() if d.role == "NVMe controller"}
    assert serials == {"X3B0A017T0K8"}
    names = {p.name for p in (tmp_path / "evidence").iterdir()}
    assert {"config-proc-mdstat.txt", "config-sysfs-net.txt", "config-sysfs-gids.txt",
            "config-rdma-j-link-show.out", "config-nvme-smart-log-dev-nvme1-o-json.out"} <= names
    assert set(inv.raid.evidence) >= {"config-mdadm-detail-dev-md127.out"}


def test_missing_tool_is_an_error_naming_the_package(tmp_path):
    runner = answers({"findmnt -J --target": findmnt_json(str(tmp_path), "/dev/nvme1n1", "ext4"),
                      "lsblk": tool_text("lsblk_2.32_strings.json"),
                      "nvme": ToolMissing("'nvme' not found on PATH")})
    inv = collect(make_site(tmp_path, transport="pcie"), Collector(runner))
    assert "'nvme' is not installed" in inv.namespaces.error
    assert "apt-get install nvme-cli" in inv.namespaces.error
    assert "iproute2" in install_hint("rdma") and "xfsprogs" in install_hint("xfs_info")


def test_failures_name_the_command(tmp_path):
    timed_out = Completed(("nvme",), -9, "", "", 30.0, timed_out=True)
    no_devices = Completed(("nvme",), 1, tool_text("nvme_list_no_devices.stdout"),
                           tool_text("nvme_list_no_devices.stderr"))
    for answer, words in ((timed_out, "did not finish within 30 s"),
                          (no_devices, "failed (exit status 1): Failed to scan topology"),
                          ("not json", "cannot read the output of `nvme list -o json`")):
        runner = answers({"findmnt -J --target": findmnt_json(str(tmp_path), "tmpfs", "tmpfs"),
                          "nvme list": answer})
        inv = collect(make_site(tmp_path, transport="pcie"), Collector(runner, tmp_path / "ev"))
        assert words in inv.namespaces.error, inv.namespaces.error
        assert inv.block.skipped.startswith("the target's filesystem comes from 'tmpfs'")
    # A failing command's stderr and exit status are evidence too.
    assert any(p.suffix == ".err" for p in (tmp_path / "ev").iterdir())


def test_raid_ordered_but_target_not_on_md(tmp_path):
    runner = answers({"findmnt -J --target": tool_text("findmnt_target_ext4.json"),
                      "lsblk": tool_text("lsblk_all.json")})
    inv = collect(make_site(tmp_path, raid_level=0, members=4), Collector(runner))
    assert "raid_level = 0" in inv.raid.error and "md_device" in inv.raid.error


def test_degraded_kernel_map_wins(tmp_path):
    root = tmp_path / "root"
    (root / "proc").mkdir(parents=True)
    (root / "proc/mdstat").write_text(tool_text("mdstat_raid5_degraded.txt"))
    runner = answers({"findmnt -J --target": findmnt_json(str(tmp_path), "/dev/md127", "ext4"),
                      "lsblk": tool_text("lsblk_2.32_strings.json"),
                      "mdadm --detail --export": tool_text("mdadm_export_raid5_degraded.txt"),
                      "mdadm --detail /dev": Completed(("mdadm",), 1, "", "mdadm: busy\n")})
    inv = collect(make_site(tmp_path, raid_level=5, members=4), Collector(runner, root=root))
    # --detail failed: the export, the kernel's [UU_U] and its chunk fill in.
    assert inv.raid.ok and "degraded" in inv.raid.value.state
    assert inv.raid.value.chunk == 524288


def test_unknown_interface_is_an_error(tmp_path):
    runner = answers({"findmnt -J --target": findmnt_json(str(tmp_path), "tmpfs", "tmpfs")})
    inv = collect(make_site(tmp_path, interfaces=["ens9"]), Collector(runner, root=tmp_path))
    assert "no network interface 'ens9'" in inv.nics.error


def test_applicability_reasons():
    reasons = applies(make_site(Path("/tmp"), transport="tcp", interfaces=["e0"]).topology)
    assert reasons["nvme"] == "" and reasons["fabric"] == "" and reasons["nics"] == ""
    assert 'transport is "tcp": no RDMA' in reasons["rdma"]


def test_inventory_command_prints_json_and_a_table(tmp_path, capsys):
    from gates.commands import inventory_command
    site_file = tmp_path / "site.toml"
    site_file.write_text(f'[site]\nname = "inv"\n[target]\ndirectory = "{tmp_path}"\n'
                         '[fio]\nfile_size = "1MiB"\n')
    assert inventory_command(site_file, as_json=True) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["site"] == "inv" and body["inventory"]["target"] == str(tmp_path)
    assert "no raid_level" in body["inventory"]["raid"]["skipped"]
    assert inventory_command(site_file, as_json=False) == 0
    out = capsys.readouterr().out
    assert "DUT inventory: inv" in out and "[topology]" in out  # markup-looking text survives
    assert inventory_command(tmp_path / "missing.toml", as_json=False) == 2
    assert "file not found" in capsys.readouterr().out


def test_a_named_device_nvme_list_does_not_list_is_an_error_naming_it(tmp_path):
    """Four drives named, nvme5n1 gone from the bus: the three found must not stand for four
    (before: the missing one was filtered out and every check per drive judged the others)."""
    collector = Collector(rdma_host(tmp_path), tmp_path / "evidence",
                          root=fake_sysfs(tmp_path / "root"), timeout=5)
    site = make_site(tmp_path / "kv", **{**MD_SITE, "devices": [
        "/dev/nvme1n1", "/dev/nvme2n1", "/dev/nvme3n1", "/dev/nvme5n1"]})
    inv = collect(site, collector)
    assert not inv.namespaces.ok
    assert inv.namespaces.error.startswith("site.toml [topology] devices names /dev/nvme5n1, "
                                           "which `nvme list` does not list (it lists /dev/"
                                           "nvme0n1, /dev/nvme1n1"), inv.namespaces.error
    assert [n.device for n in inv.namespaces.value] == [f"/dev/nvme{i}n1" for i in (1, 2, 3)]
