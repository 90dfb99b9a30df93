"""G1's GPUDirect Storage checks, collected through the runner seam from recorded gdscheck,
cufile.json, gdsio and nvidia-fs outputs (tests/data/gds/README.md: which are transcribed from
NVIDIA's documentation and public issues, which captured)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gates.core.configuration import Site
from gates.core.verdicts import Cause, Outcome
from gates.storage import Collector, collect
from gates.storage import g1config as g1c
from gates.storage.gds import parse_cufile_json, parse_gdscheck
from gates.storage.runner import Completed, ScriptedRunner, ToolMissing

DATA = Path(__file__).parent / "data" / "gds"


def data(name: str) -> str:
    return (DATA / name).read_text()


def make_site(target: Path, arms_env: dict | None = None, **topology) -> Site:
    doc = {"site": {"name": "gds"}, "target": {"directory": str(target)},
           "fio": {"file_size": "1MiB"}, "topology": topology}
    if arms_env is not None:
        doc["arms"] = {"candidate": {"kind": "launch", "command": ["engine", "{port}"],
                                     "env": arms_env}}
    return Site.model_validate(doc)


def host(root: Path, target: Path, *, gdscheck: str | None, cufile: str | None,
         stats: tuple[str, str] | None, gdsio: str = "gdsio_write_read_gpud.txt",
         gpu: bool = True) -> Collector:
    """A GPU host: procfs under root, gdscheck/gdsio answered from tests/data/gds; gdsio turns
    nvidia-fs's stats from the first file into the second, as the driver would."""
    target.mkdir(parents=True, exist_ok=True)
    if gpu:
        (root / "proc/driver/nvidia/gpus/0000:be:00.0").mkdir(parents=True)
    stats_file = root / "proc/driver/nvidia-fs/stats"
    if stats:
        stats_file.parent.mkdir(parents=True)
        stats_file.write_text(data(stats[0]))
    if cufile:
        (root / "etc").mkdir(parents=True, exist_ok=True)
        (root / "etc/cufile.json").write_text(data(cufile))
    lines = data(gdsio).splitlines(keepends=True)

    def answer(argv: tuple[str, ...]) -> Completed:
        name = Path(argv[0]).name
        if name == "gdscheck":
            if gdscheck is None:
                raise ToolMissing(argv[0])
            return Completed(argv, 0, data(gdscheck))
        if name == "gdsio":
            if stats:
                stats_file.write_text(data(stats[1]))
            write = argv[argv.index("-I") + 1] == "1"
            return Completed(argv, 0, lines[0 if write else -1])
        if argv[:2] == ("ip", "-j"):
            return Completed(argv, 0, data("ip_addr_vm.json"))
        if argv[:3] == ("findmnt", "-J", "--target"):
            entry = {"target": str(target), "source": "/dev/nvme1n1", "fstype": "xfs",
                     "options": "rw,noatime"}
            return Completed(argv, 0, json.dumps({"filesystems": [entry]}))
        return Completed(argv, 127, "", f"not on this host: {' '.join(argv)}")
    return Collector(ScriptedRunner(answer), root / "evidence", root=root)


def judged(inv, site):
    return [g1c.gds_platform(inv, site), g1c.gds_configuration(inv, site),
            g1c.gds_path(inv, site), g1c.gds_limits(inv, site)]


READY = dict(gdscheck="gdscheck_1.7_nvmeof_ready.txt", cufile="cufile_strict.json",
             stats=("nvfs_stats_before.txt", "nvfs_stats_after_gpud.txt"))


def test_gds_ready_passes_all_four_with_no_deviation(tmp_path):
    site = make_site(tmp_path / "kv", gds="NVMeOF", transport="rdma")
    inv = collect(site, host(tmp_path / "root", tmp_path / "kv", **READY))
    platform, config, path, limits = judged(inv, site)
    assert [m.outcome for m in judged(inv, site)] == [Outcome.PASS] * 4, judged(inv, site)
    assert "nvidia_fs 2.17, libcufile 2.12" in platform.note
    assert "reads ok +64, writes ok +64" in path.note
    assert g1c.gds_deviations(inv, site) == []


def test_compat_mode_on_is_a_deviation_and_a_path_that_moved_no_counter_fails(tmp_path):
    site = make_site(tmp_path / "kv", gds="NVMeOF", transport="rdma")
    inv = collect(site, host(tmp_path / "root", tmp_path / "kv", gdscheck=READY["gdscheck"],
                             cufile="cufile_default_compat.json",
                             stats=("nvfs_stats_before.txt", "nvfs_stats_before.txt")))
    _, config, path, _ = judged(inv, site)
    assert config.outcome is Outcome.PASS  # allowed, not forced: the KV still moves
    assert path.outcome is Outcome.FAIL
    assert "nvidia-fs counted no reads during gdsio's 64 READ ops" in path.note
    found = g1c.gds_deviations(inv, site)
    assert {d.cause for d in found} == {Cause.GDS_FALLBACK}  # typed where found
    deviations = [d.text for d in found]
    assert any(d.startswith("GDS compat mode allowed") and "/etc/cufile.json" in d
               for d in deviations)
    assert "GDS writes through POSIX on this filesystem: /etc/cufile.json "\
        "fs.weka.rdma_write_support is false" in deviations


def test_a_gdsio_run_that_moved_nothing_leaves_the_path_unmeasured(tmp_path):
    """A read run of 0 ops: the counters cannot have moved for it, and nothing says the path
    went GPU-direct (before: only runs with ops were held to the counters, and it PASSed)."""
    site = make_site(tmp_path / "kv", gds="NVMeOF", transport="rdma")
    inv = collect(site, host(tmp_path / "root", tmp_path / "kv", gdsio="gdsio_read_no_ops.txt",
                             **READY))
    path = g1c.gds_path(inv, site)
    assert path.outcome is Outcome.ERROR, path
    assert "gdsio did no I/O in its READ run: the GPU-direct path was not exercised" in path.note


def test_p2pdma_on_md_raid0_is_a_limit_of_the_site(tmp_path):
    site = make_site(tmp_path / "kv", gds="NVMe P2PDMA", raid_level=0, members=4,
                     transport="pcie")
    inv = collect(site, host(tmp_path / "root", tmp_path / "kv",
                             gdscheck="gdscheck_1.12_p2pdma.txt",
                             cufile="cufile_p2pdma_strict.json", stats=None))
    platform, config, path, limits = judged(inv, site)
    assert platform.outcome is Outcome.PASS and config.outcome is Outcome.PASS
    assert limits.outcome is Outcome.FAIL and "P2PDMA on md RAID" in limits.note
    assert path.outcome is Outcome.ERROR and "P2PDMA mode" in path.note


def test_nvidia_fs_missing_with_gds_declared_is_an_error(tmp_path):
    site = make_site(tmp_path / "kv", gds="NVMe", transport="pcie")
    inv = collect(site, host(tmp_path / "root", tmp_path / "kv",
                             gdscheck="gdscheck_1.16_no_nvidia_fs.txt",
                             cufile="cufile_strict.json", stats=None))
    platform, _, path, _ = judged(inv, site)
    assert platform.outcome is Outcome.ERROR and "nvidia-fs module is not loaded" in platform.note
    assert path.outcome is Outcome.ERROR and "nvidia-fs/stats is absent" in path.note


def test_gds_tools_missing_with_gds_declared_is_an_error_naming_the_package(tmp_path):
    site = make_site(tmp_path / "kv", arms_env={"LMCACHE_GDS_PATH": "/mnt/kv/gds"})
    inv = collect(site, host(tmp_path / "root", tmp_path / "kv", gdscheck=None,
                             cufile=None, stats=None))
    platform, config, path, _ = judged(inv, site)
    assert platform.outcome is Outcome.ERROR and "gds-tools" in platform.note
    assert config.outcome is Outcome.ERROR and "/etc/cufile.json" in config.note
    assert path.outcome is Outcome.ERROR


@pytest.mark.parametrize("gpu", [False, True])
def test_no_gds_declared_is_not_applicable_saying_whether_there_is_a_gpu(tmp_path, gpu):
    site = make_site(tmp_path / "kv")
    inv = collect(site, host(tmp_path / "root", tmp_path / "kv", gdscheck=None, cufile=None,
                             stats=None, gpu=gpu))
    for m in judged(inv, site):
        assert m.outcome is Outcome.NOT_APPLICABLE, m
        assert "declares no GPUDirect Storage" in m.note
        assert ("has no NVIDIA GPU" in m.note) is not gpu
    assert g1c.gds_deviations(inv, site) == []


def test_nvidia_fs_rw_stats_off_leaves_the_path_unmeasured(tmp_path):
    site = make_site(tmp_path / "kv", gds="NVMeOF", transport="rdma")
    inv = collect(site, host(tmp_path / "root", tmp_path / "kv", gdscheck=READY["gdscheck"],
                             cufile="cufile_strict.json",
                             stats=("nvfs_stats_rw_stats_off.txt",) * 2))
    path = g1c.gds_path(inv, site)
    assert path.outcome is Outcome.ERROR and "rw_stats_enabled" in path.note


def test_rdma_client_addresses_not_on_the_rdma_ports_fail(tmp_path):
    site = make_site(tmp_path / "kv", gds="WekaFS", interfaces=["eth0"])
    inv = collect(site, host(tmp_path / "root", tmp_path / "kv", gdscheck=READY["gdscheck"],
                             cufile="cufile_weka_rdma.json", stats=None))
    config = g1c.gds_configuration(inv, site)
    assert config.outcome is Outcome.FAIL
    assert "10.0.1.2, 10.0.2.2 not on the RDMA ports (eth0: 192.0.2.2" in config.note


def test_the_parsers_read_the_recorded_fields():
    platform = parse_gdscheck(data("gdscheck_1.16_no_nvidia_fs.txt"), "gdscheck -p")
    assert platform.nvidia_fs == "" and platform.drivers["NVMe"] == "compat"
    assert platform.properties["use_compat_mode"] == "true" and not platform.verified
    cufile = parse_cufile_json(data("cufile_default_compat.json"), "/etc/cufile.json")
    assert cufile.allow_compat_mode and cufile.rdma_dev_addr_list == []


def test_kvgate_inventory_shows_the_gds_facts(tmp_path, capsys, monkeypatch):
    """`kvgate inventory` on this GPU-less VM: each GDS fact NOT APPLICABLE, with why."""
    from gates.commands.inventory import inventory_command

    monkeypatch.setenv("COLUMNS", "400")  # a table cell wraps at the terminal's width

    path = tmp_path / "site.toml"
    path.write_text(f'[site]\nname = "vm"\n[target]\ndirectory = "{tmp_path}"\n'
                    '[fio]\nfile_size = "1MiB"\n')
    assert inventory_command(path, as_json=False) == 0
    out = capsys.readouterr().out
    assert "gdscheck -p" in out and "cufile.json" in out and "gdsio + nvidia-fs stats" in out
    assert "declares no GPUDirect Storage" in out
