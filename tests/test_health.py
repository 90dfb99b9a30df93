"""G4 health collectors: kernel-log scanner, SMART deltas, paths, fio verify, process, space."""

import json
import os
import subprocess
from pathlib import Path

import pytest
from _tooldata import tool_text

from gates.soak.fio_verify import FioVerify, verify_job
from gates.soak.health import FreeSpace, ProcessHealth, WindowContext
from gates.soak.kernel_log import KernelLog, controllers_of, scan_kernel_log
from gates.soak.nvme_health import NvmePaths, Smart
from gates.storage import SubprocessRunner, ToolMissing
from gates.storage.fioerrors import parse_verify_failures
from gates.storage.runner import Completed, ScriptedRunner

KERNEL = Path(__file__).parent / "data" / "kernel"


def log(name: str) -> str:
    return (KERNEL / name).read_text()


def kinds(hits):
    out = {}
    for h in hits:
        out[h.kind] = out.get(h.kind, 0) + 1
    return out


def ctx(since=0.0, start=0.0, end=4e9, index=0):
    return WindowContext(index=index, start=start, end=end, since=since)


# ---- kernel log ---------------------------------------------------------------------------

def test_pcie_timeouts_resets_and_io_errors_are_found_and_benign_lines_are_not():
    hits = scan_kernel_log(log("nvme_pcie.log"))
    assert kinds(hits) == {"nvme_timeout": 3, "nvme_reset": 2, "io_error": 5}
    lines = " ".join(h.line for h in hits)
    assert "Shutdown timeout set" not in lines and "Abort status" not in lines
    assert "EXT4-fs" not in lines and "default/read/poll" not in lines
    assert {h.device for h in hits if h.kind == "io_error"} == {"nvme0n1", "nvme3n1"}


def test_fabrics_timeouts_and_reconnects_are_found():
    hits = scan_kernel_log(log("nvme_fabrics.log"))
    assert kinds(hits) == {"nvme_timeout": 2, "nvme_reconnect": 5}
    assert not any("Successfully reconnected" in h.line or "new ctrl" in h.line for h in hits)


def test_xfs_errors_and_corruption_are_found_but_not_mount_messages():
    hits = scan_kernel_log(log("xfs.log"))
    assert kinds(hits) == {"xfs_error": 5}
    assert {h.device for h in hits} == {"dm-0", "md0"}
    assert not any("Mounting" in h.line or "clean mount" in h.line for h in hits)


def test_iso_timestamps_become_epoch_seconds_and_plain_dmesg_has_none():
    first = scan_kernel_log(log("nvme_pcie.log"))[0]
    assert first.t == pytest.approx(1795946401.123456)
    plain = scan_kernel_log(log("plain_dmesg.log"))
    assert [h.kind for h in plain] == ["nvme_timeout", "io_error"] and plain[0].t is None
    journal = scan_kernel_log("2026-11-29T10:00:01.5+0000 nvme nvme0: resetting controller")
    assert journal[0].t == pytest.approx(1795946401.5)


def test_device_filter_keeps_the_targets_controller_and_its_namespaces():
    hits = scan_kernel_log(log("nvme_pcie.log"), devices=["nvme3"])
    assert [h.device for h in hits] == ["nvme3n1"]
    assert len(scan_kernel_log(log("nvme_pcie.log"), devices=["nvme0n1"])) == 9


def dmesg(text, rc=0, err=""):
    return ScriptedRunner(lambda argv: Completed(argv, rc, text, err))


def link(at: Path, to: Path) -> None:
    at.parent.mkdir(parents=True, exist_ok=True)
    at.symlink_to(os.path.relpath(to, at.parent))


def nvme_sysfs(root: Path) -> Path:
    """The sysfs layout Linux 6.x leaves (drivers/nvme/host core.c, multipath.c): subsystem 0
    reached through controllers nvme0 and nvme1 under native multipath, its shared namespace's
    disk nvme0n1 a child of the subsystem and each path's disk (nvme0c<C>n1) of its controller;
    subsystem 2 with controller nvme2 alone; a PCIe drive nvme3 without multipath (disk nvme3n1,
    partition nvme3n1p1); and a loop device. Returns its /sys/class/block."""
    devices, block = root / "devices", root / "class" / "block"
    ctl = devices / "virtual" / "nvme-fabrics" / "ctl"
    for s, controllers in ((0, (0, 1)), (2, (2,))):
        subsys = devices / "virtual" / "nvme-subsystem" / f"nvme-subsys{s}"
        (subsys / f"nvme{s}n1").mkdir(parents=True)
        link(block / f"nvme{s}n1", subsys / f"nvme{s}n1")
        for c in controllers:
            (ctl / f"nvme{c}" / f"nvme{s}c{c}n1").mkdir(parents=True)
            link(subsys / f"nvme{c}", ctl / f"nvme{c}")
            link(block / f"nvme{s}c{c}n1", ctl / f"nvme{c}" / f"nvme{s}c{c}n1")
    pcie = devices / "pci0000:00" / "0000:00:04.0" / "nvme" / "nvme3" / "nvme3n1"
    (pcie / "nvme3n1p1").mkdir(parents=True)
    link(block / "nvme3n1", pcie)
    link(block / "nvme3n1p1", pcie / "nvme3n1p1")
    (devices / "virtual" / "block" / "loop0").mkdir(parents=True)
    link(block / "loop0", devices / "virtual" / "block" / "loop0")
    return block


def test_the_controllers_of_a_disk_are_read_from_sysfs(tmp_path):
    block = nvme_sysfs(tmp_path)
    assert controllers_of("/dev/nvme0n1", block) == ("nvme0", "nvme1")  # every path's
    assert controllers_of("nvme0c1n1", block) == ("nvme1",)  # one path: its own controller
    assert controllers_of("nvme2n1", block) == ("nvme2",)
    assert controllers_of("/dev/nvme3n1p1", block) == ("nvme3",)  # a partition: its disk's
    assert controllers_of("loop0", block) == ()  # not NVMe
    assert controllers_of("nvme9n1", block) == ()  # not in sysfs: matched by name alone


def test_a_second_paths_controller_counts_for_the_multipath_disk_the_site_names(tmp_path):
    """Under native multipath the second path's timeouts and reconnects are logged as
    "nvme nvme1: ..." for the disk nvme0n1: by name alone they were not counted."""
    text = log("nvme_multipath.log")
    everything = [h.t for h in scan_kernel_log(text)]
    window = ctx(since=min(everything) - 1, end=max(everything) + 1)
    reading = KernelLog(dmesg(text), devices=["/dev/nvme0n1"],
                        sysfs=nvme_sysfs(tmp_path)).collect(window)
    assert reading.values == {"hits": 6.0, "nvme_timeout": 2.0, "nvme_reconnect": 3.0,
                              "io_error": 1.0}, reading.details
    assert not [d for d in reading.details if "nvme2" in d]  # the other subsystem's
    # Without sysfs's word only the first controller (whose number the disk took) and the
    # path's disk count: the second path's four lines were lost.
    blind = KernelLog(dmesg(text), devices=["/dev/nvme0n1"], sysfs=tmp_path / "none")
    assert blind.collect(window).values["hits"] == 2.0


def test_kernel_collector_counts_only_lines_since_the_last_window():
    text = log("nvme_pcie.log")
    t = scan_kernel_log(text)
    reading = KernelLog(dmesg(text)).collect(ctx(since=t[4].t, end=t[6].t))
    assert reading.status == "alert" and reading.values["hits"] == 2
    assert reading.values["io_error"] == 2 and "I/O error, dev nvme0n1" in reading.details[0]
    quiet = KernelLog(dmesg(text)).collect(ctx(since=t[-1].t, end=t[-1].t + 300))
    assert quiet.status == "ok" and quiet.values == {"hits": 0.0}


def test_a_storage_error_line_without_a_time_makes_the_window_unread_not_quiet():
    """Was: dropped, so an I/O error kvgate could not place in a window counted as none (an
    error reading, like a log it could not read, is not an all-clear)."""
    text = log("plain_dmesg.log")  # `dmesg` without --time-format: "[ 3001.114210] ..."
    assert scan_kernel_log(text)  # the lines are storage errors
    reading = KernelLog(dmesg(text)).collect(ctx())
    assert reading.status == "error"
    assert reading.reason.startswith(
        "2 storage error line(s) in the kernel log carry no time kvgate can read, so whether "
        "they fall in this window is unknown: '[ 3001.114210] nvme nvme0: I/O 123 QID 4 "
        "timeout, aborting' (`dmesg --time-format=iso` must print ISO times)"), reading.reason
    # A line without a time that is not a storage error is nobody's concern.
    benign = KernelLog(dmesg("[ 2822.956248] XFS (loop0): Mounting V5 Filesystem\n"))
    assert benign.collect(ctx()).status == "ok"


def test_a_kernel_log_that_cannot_be_read_is_an_error_naming_the_permission_or_package(
        tmp_path):
    """#25 item 13 (was: NOT APPLICABLE, which the verdict ignores): every host has a kernel
    log; refused (dmesg_restrict without root) or without dmesg, it could not be measured."""
    restrict = tmp_path / "dmesg_restrict"
    restrict.write_text("1\n")
    denied = KernelLog(dmesg("", 1, "dmesg: read kernel buffer failed: Operation not permitted"),
                       restrict=restrict)
    reading = denied.collect(ctx())
    assert reading.status == "error"
    assert reading.reason == (
        "the kernel log cannot be read: `dmesg --time-format=iso` failed: dmesg: read kernel "
        "buffer failed: Operation not permitted (kernel.dmesg_restrict = 1: reading it needs "
        "root or CAP_SYSLOG; in a container, the host's permission to read it)")

    def missing(argv):
        raise ToolMissing("'dmesg' not found on PATH: install dmesg")
    absent = KernelLog(ScriptedRunner(missing)).collect(ctx())
    assert absent.status == "error" and "apt-get install util-linux" in absent.reason


# ---- SMART and paths ----------------------------------------------------------------------

def smart_json(media=0, entries=0, warning=0, temp_k=310):
    doc = json.loads(tool_text("nvme_smart_log_2.3.json"))
    doc.update(media_errors=media, num_err_log_entries=entries, critical_warning=warning,
               temperature=temp_k)
    return json.dumps(doc)


def test_smart_deltas_are_against_the_previous_snapshot_and_summed_over_devices():
    state = {"/dev/nvme0n1": [0, 0, 1, 1], "/dev/nvme1n1": [5, 5, 5, 5]}

    def answer(argv):
        return Completed(argv, 0, smart_json(media=state[argv[2]].pop(0), entries=3))
    smart = Smart(ScriptedRunner(answer), ["/dev/nvme0n1", "/dev/nvme1n1"])
    smart.prime(0.0)
    first = smart.collect(ctx())
    assert first.status == "ok" and first.values["media_errors"] == 5
    assert first.values["media_errors_delta"] == 0
    assert first.values["temperature_max_c"] == pytest.approx(36.85)
    second = smart.collect(ctx(index=1))
    assert second.status == "alert" and second.values["media_errors_delta"] == 1
    assert second.values["error_log_entries"] == 6
    assert second.values["error_log_entries_delta"] == 0


def test_smart_is_not_applicable_only_without_devices_and_an_error_without_nvme_cli():
    """#25 item 13 (was: NOT APPLICABLE without nvme-cli): devices named, the tool missing,
    is an ERROR naming nvme-cli; only a site that names no devices has no SMART to read."""
    assert Smart(ScriptedRunner(lambda a: None), []).collect(ctx()).status == "not applicable"

    def missing(argv):
        raise ToolMissing("'nvme' not found on PATH: install nvme")
    absent = Smart(ScriptedRunner(missing), ["/dev/nvme0n1"]).collect(ctx())
    assert absent.status == "error"
    assert absent.reason == (
        "nvme-cli is not installed ('nvme' not found on PATH: install nvme), so the SMART logs "
        "of /dev/nvme0n1 cannot be read: install nvme-cli (Debian/Ubuntu: apt-get install "
        "nvme-cli; RHEL: dnf install nvme-cli)")
    broken = Smart(ScriptedRunner(lambda a: Completed(a, 0, "garbage")), ["/dev/nvme0n1"])
    reading = broken.collect(ctx())
    assert reading.status == "error" and "nvme smart-log" in reading.reason


def test_paths_count_live_fabrics_paths_and_only_a_local_topology_is_not_applicable():
    """#25 item 13 (was: N/A on any host showing no fabric path, or without nvme-cli): the
    topology says whether there are paths; a fabric site showing none has them all down."""
    tcp = NvmePaths(ScriptedRunner(lambda a: Completed(
        a, 0, tool_text("nvme_list_subsys_2.11_tcp.json"))), "tcp").collect(ctx())
    assert tcp.status == "alert" and tcp.values == {"live": 1.0, "total": 2.0}
    assert "nvme2" in tcp.details[0] and "connecting" in tcp.details[0]
    local = json.dumps([{"HostNQN": "h", "Subsystems": [{"Name": "nvme-subsys0", "Paths": [
        {"Name": "nvme0", "Transport": "pcie", "Address": "0000:41:00.0", "State": "live"}]}]}])
    asked = []
    site = NvmePaths(ScriptedRunner(lambda a: asked.append(a)), "local").collect(ctx())
    assert site.status == "not applicable" and asked == []  # the topology, not the host, says
    assert "[topology] transport = 'local'" in site.reason
    pcie = NvmePaths(ScriptedRunner(lambda a: Completed(a, 0, local)), "rdma").collect(ctx())
    assert pcie.status == "alert" and pcie.values == {"live": 0.0, "total": 0.0}
    assert pcie.details == ["no NVMe-oF path is connected, though [topology] transport = "
                            "'rdma'"]

    def missing(argv):
        raise ToolMissing("'nvme' not found on PATH: install nvme")
    absent = NvmePaths(ScriptedRunner(missing), "tcp").collect(ctx())
    assert absent.status == "error" and "apt-get install nvme-cli" in absent.reason


# ---- fio write-then-verify ----------------------------------------------------------------

RECORDED_STDERR = """\
crc32c: verify failed at file /t/kvgate-soak-verify.dat offset 1048576, length 65536 \
(requested block: offset=1048576, length=65536, flags=88)
       Expected CRC: 066e4a30
       Received CRC: 4b7102bf
verify: bad magic header 0, wanted acca at file /t/kvgate-soak-verify.dat offset 2097152, \
length 65536 (requested block: offset=2097152, length=65536)
fio: pid=27906, err=84/file:io_u.c:2152, func=io_u_sync_complete, error=Invalid or incomplete \
multibyte or wide character
"""


def test_verify_failures_are_parsed_with_offset_and_length():
    failures = parse_verify_failures(RECORDED_STDERR)
    assert [(f.offset, f.length) for f in failures] == [(1048576, 65536), (2097152, 65536)]
    assert failures[0].what == "crc32c: verify failed"
    assert "bad magic header" in failures[1].describe()


def test_verify_job_is_crc32c_with_backlog_bounded_and_rate_limited(tmp_path):
    job = verify_job(tmp_path, 8 << 20, 65536, "16m", "psync", False, verify_only=False)
    for line in ("verify=crc32c", "verify_backlog=16", "size=8388608", "rate=16m",
                 "continue_on_error=verify", f"directory={tmp_path}"):
        assert line in job.splitlines()
    assert "verify_only=1" in verify_job(tmp_path, 1, 1, "1m", "psync", False, True)


def direct_io_works(folder: Path) -> bool:
    """O_DIRECT, the collector's default, is refused by tmpfs (EINVAL)."""
    try:
        os.close(os.open(folder / "probe", os.O_CREAT | os.O_WRONLY | os.O_DIRECT))
    except OSError:
        return False
    return True


def fio_verify(tmp_path, between=None):
    direct = direct_io_works(tmp_path)
    return FioVerify(SubprocessRunner(), tmp_path / "scratch", size=4 << 20, block=65536,
                     rate="0", between=between, direct=direct,
                     ioengine="libaio" if direct else "psync")


def test_real_fio_pass_verifies_clean_data(tmp_path):
    reading = fio_verify(tmp_path).collect(ctx())
    assert reading.status == "ok", reading.reason
    assert reading.values["verify_errors"] == 0 and reading.values["bytes"] == 4 << 20


def test_real_fio_verify_failure_is_recorded_with_its_offset(tmp_path):
    def corrupt(path: Path):
        with path.open("r+b") as f:
            f.seek(3 * 65536 + 100)
            f.write(b"kvgate was here")
    reading = fio_verify(tmp_path, corrupt).collect(ctx())
    assert reading.status == "alert", reading.reason
    assert reading.values["verify_errors"] == 1
    assert "offset 196608 length 65536" in reading.details[0]


def test_fio_that_cannot_run_is_an_error_reading(tmp_path):
    verify = FioVerify(SubprocessRunner(), tmp_path, binary=str(tmp_path / "no-fio"))
    reading = verify.collect(ctx())
    assert reading.status == "error" and "could not run" in reading.reason


# ---- process and free space ---------------------------------------------------------------

def test_process_health_reads_rss_and_open_files_of_the_tree():
    child = subprocess.Popen(["sleep", "30"])
    try:
        reading = ProcessHealth(lambda: os.getpid()).collect(ctx())
        assert reading.values["rss_bytes"] > 1e6 and reading.values["open_files"] >= 3
        assert reading.values["processes"] >= 2
    finally:
        child.kill()
        child.wait()
    assert ProcessHealth(lambda: None).collect(ctx()).status == "not applicable"
    assert ProcessHealth(lambda: child.pid).collect(ctx()).status == "error"


def test_a_child_that_ends_between_listing_and_reading_is_left_out_not_the_engine_gone(
        monkeypatch):
    """The engine is alive; one of its children ended under the collector's walk."""
    import psutil

    real = psutil.Process

    class Ended(real):
        def memory_info(self):
            raise psutil.NoSuchProcess(self.pid)

    class Engine(real):
        def children(self, recursive=False):
            return [Ended(os.getpid())]

    monkeypatch.setattr(psutil, "Process", Engine)  # the seam: psutil's view of the tree
    reading = ProcessHealth(lambda: os.getpid()).collect(ctx())
    assert reading.status == "ok", reading.reason
    assert reading.values["processes"] == 1 and reading.values["rss_bytes"] > 1e6


def test_a_process_kvgate_may_not_read_is_an_error_naming_the_permission(monkeypatch):
    """#25 item 13 (was: NOT APPLICABLE): the engine is there; kvgate could not measure it."""
    import psutil

    def refused(pid):
        raise psutil.AccessDenied(pid)
    monkeypatch.setattr(psutil, "Process", refused)  # the seam: psutil's view of the process
    reading = ProcessHealth(lambda: 4242).collect(ctx())
    assert reading.status == "error"
    assert reading.reason.startswith("no permission to read the engine's process 4242 (")
    assert reading.reason.endswith("run kvgate as the engine's user or as root")


def test_free_space_alerts_below_min_free_and_errors_on_a_missing_target(tmp_path):
    assert FreeSpace(tmp_path).collect(ctx()).values["free_bytes"] > 0
    low = FreeSpace(tmp_path, min_free=1 << 62).collect(ctx())
    assert low.status == "alert" and "min_free" in low.reason
    assert FreeSpace(tmp_path / "gone").collect(ctx()).status == "error"
