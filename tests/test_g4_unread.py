"""Issue #43 case 1: a G4 window that could not be read is not a gap, and one good window does
not make a rule "measured".

Before the fix: a failed reading dropped out of every G4 health rule (an evidence line at
most), so verify, SMART, kernel log and NVMe-oF paths PASSed on the windows that happened to
be read; an fio job error (ENOSPC, EROFS, EIO) made the window's verify reading a failed one,
i.e. a gap; and the kernel-log filter compared the kernel's `nvme1n1` with the site file's
`/dev/nvme1n1`, so the target's I/O errors counted 0. The recorded case: a shortened soak whose
target filled up from window 3 of 8 ended G4 PASS with "2 write-then-verify passes".
"""

from pathlib import Path

import pytest
from _loopdev import need_root, tmpfs
from _soak import FakeLoad
from _tooldata import tool_text

from gates.core.configuration import G4Limits
from gates.core.verdicts import Outcome, gate_verdict
from gates.soak import SoakPlan, SoakRunner
from gates.soak.clock import FakeClock
from gates.soak.fio_verify import FioVerify
from gates.soak.health import WindowContext
from gates.soak.kernel_log import KernelLog, scan_kernel_log
from gates.soak.load_rules import soak_measurements
from gates.soak.nvme_health import Smart
from gates.soak.rules import KERNEL, PATHS, SMART, VERIFY, HealthReading, WindowRecord
from gates.storage import SubprocessRunner
from gates.storage.runner import Completed, ScriptedRunner
from gates.store import Store

T0 = 1_800_000_000.0
KERNEL_DATA = Path(__file__).parent / "data" / "kernel"


def windows(n, health):
    return [WindowRecord(index=i, start=T0 + 300 * i, end=T0 + 300 * (i + 1), requests=10,
                         output_tokens=3000, throughput=10.0, ttft_p50=0.1, ttft_p99=0.2,
                         health=health(i)) for i in range(n)]


def judged(runs, n=8):
    plan = SoakPlan(run_id="r", duration=300.0 * n, window=300.0, g3_throughput=10.0)
    return {m.id: m for m in soak_measurements(runs, [], plan, G4Limits())}


def ok(**values):
    return HealthReading(values={k: float(v) for k, v in values.items()})


def smart(media=0):
    return ok(media_errors=media, media_errors_delta=0, critical_warning=0,
              error_log_entries=0, error_log_entries_delta=0)


CLEAN = {VERIFY: ok(verify_errors=0), KERNEL: ok(hits=0), SMART: smart(),
         PATHS: ok(live=2, total=2)}


@pytest.mark.parametrize("collector,rule", [
    (VERIFY, "g4.verify_errors"), (SMART, "g4.media_errors"), (SMART, "g4.critical_warnings"),
    (KERNEL, "g4.kernel_errors"), (PATHS, "g4.paths_live")])
def test_a_window_whose_reading_failed_counts_against_the_rule(collector, rule):
    def health(i):
        if i < 3:
            return dict(CLEAN)
        return CLEAN | {collector: HealthReading.failed(f"could not read #{i}: refused")}
    got = judged(windows(8, health))[rule]
    assert got.outcome is Outcome.ERROR, got
    assert got.evidence[0] == "windows read 3 of 8 (38%); not read: " + "; ".join(
        f"#{i} could not read #{i}: refused" for i in range(3, 8))
    assert got.note.startswith(got.evidence[0] + ": a verdict needs 100% of windows read")
    full = judged(windows(8, lambda i: dict(CLEAN)))[rule]
    assert full.outcome is Outcome.PASS and full.evidence[0] == "windows read 8 of 8"


def test_nvme_cli_failing_from_hour_10_does_not_hide_what_came_after():
    """SMART read hourly: media errors are cumulative, but nothing after the last good
    reading is known, and a critical warning is the state of a window not read."""
    def health(i):
        return CLEAN | {SMART: smart() if i < 10 else HealthReading.failed(
            "nvme smart-log /dev/nvme1n1: exit 1")}
    got = judged(windows(72, health), n=72)
    for rule in ("g4.media_errors", "g4.critical_warnings"):
        assert got[rule].outcome is Outcome.ERROR
        assert got[rule].evidence[0].startswith("windows read 10 of 72 (14%); not read: "
                                                "#10 nvme smart-log /dev/nvme1n1: exit 1;")
    # A FAIL found in what was read stands: more windows could only add media errors.
    def worse(i):
        return CLEAN | {SMART: ok(media_errors=2 * (i > 0), media_errors_delta=2 * (i == 1),
                                  critical_warning=0) if i < 10 else
                        HealthReading.failed("nvme smart-log: exit 1")}
    assert judged(windows(72, worse), n=72)["g4.media_errors"].outcome is Outcome.FAIL


def test_an_fio_job_error_is_a_verify_failure_naming_the_window_and_errno():
    def health(i):
        if i < 3:
            return dict(CLEAN)
        return CLEAN | {VERIFY: HealthReading(
            status="alert", values={"verify_errors": 0.0, "job_errors": 1.0},
            reason="fio write pass: job error ENOSPC (28), No space left on device")}
    got = judged(windows(8, health))["g4.verify_errors"]
    assert got.outcome is Outcome.FAIL and got.value == 5
    assert got.note.startswith("window #3: fio write pass: job error ENOSPC (28), No space "
                               "left on device; the storage refused 5 of 8 write-then-verify")
    assert got.evidence[0] == "windows read 8 of 8"
    # A job error fails the pass whatever the ceiling on verify mismatches allows.
    plan = SoakPlan(run_id="r", duration=2400.0, window=300.0, g3_throughput=10.0)
    lenient = {m.id: m for m in soak_measurements(windows(8, health), [], plan,
                                                  G4Limits(verify_errors_max=100))}
    assert lenient["g4.verify_errors"].outcome is Outcome.FAIL


# ---- the kernel log: the site's device names, and windows whose read failed --------------

def test_the_device_filter_matches_devices_as_the_site_file_writes_them():
    text = (KERNEL_DATA / "nvme_neighbours.log").read_text()
    hits = scan_kernel_log(text, devices=["/dev/nvme1n1"])
    assert [h.device for h in hits] == ["nvme1", "nvme1n1", "nvme1n1p1", "nvme1n1p1"]
    # nvme1's controller lines and namespaces, never nvme10's (the old prefix test took both).
    assert {h.device for h in scan_kernel_log(text, devices=["nvme1"])} == {
        "nvme1", "nvme1n1", "nvme1n10", "nvme1n1p1", "nvme1n2"}
    assert [h.device for h in scan_kernel_log(text, devices=["/dev/sda"])] == ["sda", "sda1"]
    assert [h.device for h in scan_kernel_log(text, devices=["/dev/md0"])] == ["md0p1"]
    pcie = (KERNEL_DATA / "nvme_pcie.log").read_text()
    assert len(scan_kernel_log(pcie, devices=["/dev/nvme0n1"])) == 9


def dmesg_then(answers):
    """A dmesg that answers each call from the list: text, or None for a refused read."""
    def answer(argv):
        text = answers.pop(0)
        return Completed(argv, 1, "", "dmesg: read kernel buffer failed: Operation not "
                         "permitted") if text is None else Completed(argv, 0, text, "")
    return ScriptedRunner(answer)


def test_the_collector_counts_the_target_device_named_as_a_dev_path():
    text = (KERNEL_DATA / "nvme_neighbours.log").read_text()
    t0 = scan_kernel_log(text)[0].t
    reading = KernelLog(dmesg_then([text]), devices=["/dev/nvme1n1"]).collect(
        WindowContext(index=0, start=t0 - 1, end=t0 + 60, since=t0 - 1))
    assert reading.status == "alert" and reading.values["hits"] == 4


def test_a_device_named_by_a_by_id_link_counts_under_the_name_it_leads_to(tmp_path):
    """A /dev/disk/by-id link ("nvme-Vendor_SERIAL") names no device the kernel logs: read by
    its own name, the filter matched nothing and every error of the disk counted 0."""
    (tmp_path / "nvme1n1").touch()
    link = tmp_path / "by-id" / "nvme-Vendor_Model_SERIAL123"
    link.parent.mkdir()
    link.symlink_to(tmp_path / "nvme1n1")
    text = (KERNEL_DATA / "nvme_neighbours.log").read_text()
    t0 = scan_kernel_log(text)[0].t
    window = WindowContext(index=0, start=t0 - 1, end=t0 + 60, since=t0 - 1)
    by_link = KernelLog(dmesg_then([text]), devices=[str(link)])
    assert by_link.devices == ("nvme1n1",)
    assert by_link.collect(window).values["hits"] == 4


def test_lines_of_a_window_whose_read_failed_are_counted_in_the_next_read():
    text = (KERNEL_DATA / "nvme_neighbours.log").read_text()
    t0 = scan_kernel_log(text)[0].t
    log = KernelLog(dmesg_then(["", None, text]), devices=["/dev/nvme1n1"])
    ctxs = [WindowContext(index=i, start=t0 - 30 + 10 * i, end=t0 - 20 + 10 * i,
                          since=t0 - 30 + 10 * i) for i in range(3)]  # the lines: window #2
    ctxs[1] = ctxs[1].model_copy(update={"end": t0 + 60})  # now they fall in window #1
    ctxs[2] = ctxs[2].model_copy(update={"since": t0 + 60, "start": t0 + 60, "end": t0 + 90})
    readings = [log.collect(c) for c in ctxs]
    assert [r.status for r in readings] == ["ok", "error", "alert"]
    assert readings[2].values["hits"] == 4  # window #1's lines, read at window #2


# ---- real fio on a real filesystem that fills up or goes read-only -----------------------

def collector(scratch: Path) -> FioVerify:
    return FioVerify(SubprocessRunner(), scratch, size=2 << 20, block=65536, rate="0",
                     direct=False, ioengine="psync")  # tmpfs refuses O_DIRECT


def ctx(i=0):
    return WindowContext(index=i, start=0.0, end=1.0, since=0.0)


def fill(folder: Path) -> None:
    with (folder / "kv-filler").open("ab", buffering=0) as handle:
        try:
            while True:
                handle.write(bytes(65536))
        except OSError:
            pass


@pytest.fixture
def small_target(tmp_path):
    need_root("mount", "umount", "fio")
    with tmpfs(tmp_path / "target", "size=8M") as mount:
        yield mount


def test_a_full_target_is_an_fio_job_error_enospc_not_a_failed_reading(small_target):
    verify = collector(small_target / "kvgate-soak-verify")
    assert verify.collect(ctx()).status == "ok"
    fill(small_target)
    reading = verify.collect(ctx(1))
    assert reading.status == "alert", reading.reason
    assert reading.values["job_errors"] == 1
    assert reading.reason == "fio write pass: job error ENOSPC (28), No space left on device"
    assert any("err=28" in d for d in reading.details), reading.details


def test_a_target_gone_read_only_is_an_fio_job_error_erofs(small_target):
    import subprocess
    verify = collector(small_target / "kvgate-soak-verify")
    assert verify.collect(ctx()).status == "ok"
    subprocess.run(["mount", "-o", "remount,ro", str(small_target)], check=True)
    reading = verify.collect(ctx(1))
    assert reading.status == "alert", reading.reason
    assert reading.reason == "fio write pass: job error EROFS (30), Read-only file system"


def test_a_shortened_soak_whose_target_fills_from_window_3_of_8_fails_g4(small_target,
                                                                       tmp_path):
    """The recorded case: before the fix, G4 PASS with "2 write-then-verify passes"."""
    clock = FakeClock()

    def engine_fills_the_target(window, status):  # after window #2 is committed
        if window.index == 2:
            fill(small_target)
    with Store(tmp_path / "out") as store:
        store.begin_run("soak-1", "test site")
        plan = SoakPlan(run_id="soak-1", duration=8 * 20.0, window=20.0, g3_throughput=50.0)
        runner = SoakRunner.start(store, plan, FakeLoad(clock), clock=clock,
                                  collectors=[collector(small_target / "kvgate-soak-verify")],
                                  on_window=engine_fills_the_target)
        runner.run()
        got = {m.id: m for m in runner.measurements(G4Limits())}
    verify = got["g4.verify_errors"]
    assert verify.outcome is Outcome.FAIL and verify.value == 5, verify
    assert verify.note.startswith("window #3: fio write pass: job error ENOSPC (28)")
    assert "refused 5 of 8 write-then-verify passes (windows [3, 4, 5, 6, 7])" in verify.note
    assert verify.evidence[0] == "windows read 8 of 8"
    assert gate_verdict([m.outcome for m in got.values()]) is Outcome.FAIL


def test_a_smart_baseline_that_could_not_be_read_leaves_window_0_unread():
    """A SMART baseline that could not be read leaves the first window's errors unknown."""
    calls = []

    def answer(argv):
        calls.append(argv)
        if len(calls) == 1:
            return Completed(argv, 1, "", "permission denied")
        return Completed(argv, 0, tool_text("nvme_smart_log_2.3.json"), "")
    reader = Smart(ScriptedRunner(answer), ["/dev/nvme1n1"])
    reader.prime(0.0)
    first, second = reader.collect(ctx(0)), reader.collect(ctx(1))
    assert first.status == "error" and "no SMART baseline for window #0" in first.reason
    assert "permission denied" in first.reason
    assert second.status == "ok" and second.values["media_errors_delta"] == 0
