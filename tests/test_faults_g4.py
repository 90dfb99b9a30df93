"""G4 on storage that fails (issue #44): `kvgate run g4` for real, its target — the soak's
write-then-verify scratch and the launched simulator's KV directory — on the fault filesystem
(tests/faultfs/), which refuses the verify file's writes with EIO from the third pass on. A
refused pass is a failure of the storage, never a gap: g4.verify_errors FAILs naming the first
window it happened in (#2: windows count from 0) and the errno.

The fault is counted on the verify file's first block (bytes [0, 1)): every write pass writes it
exactly once, however FUSE splits the writes, so "after 2" is "from the third pass on".
"""

from __future__ import annotations

import errno
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _edits import edited
from _soak import g3_for_soak, soak_site
from faultfs import Fault
from faultfs.fixture import faultfs  # noqa: F401  (the fixture)


def site_text(target: Path) -> str:
    return soak_site(target, target_extra='min_free = "0"\n',
                     soak_extra="warmup_windows = 0  # every window judged, from the first\n")


def passing_g3(out: Path) -> None:
    """A G3 that passed, with the repetitions G4 takes its operating point from."""
    g3_for_soak(out, reduction=60)


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_eio_in_the_verify_pass_from_window_3_fails_naming_the_window_and_errno(
        faultfs, tmp_path, repo):  # noqa: F811
    target = faultfs.mountpoint / "target"
    (tmp_path / "site.toml").write_text(site_text(target))
    # A few seconds of soak cannot hold a drift limit meant for hours: relaxed, so that the
    # verify rule decides.
    (tmp_path / "thresholds.toml").write_text(edited(
        (repo / "thresholds.toml").read_text(), 'ttft_drift_max = "10 %"',
        'ttft_drift_max = "1000 %"', where="thresholds.toml"))
    passing_g3(tmp_path / "out")
    faultfs.set(Fault("error", op="write", errno=errno.EIO, path="*/kvgate-soak-verify.dat",
                      start=0, end=1, after=2))
    done = subprocess.run(
        [sys.executable, "-m", "gates.cli", "run", "g4", "--site", "site.toml", "--thresholds",
         "thresholds.toml", "--out", "out", "--soak-duration", "10s", "--soak-window", "2s"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    records = list((tmp_path / "out").glob("*/g4.json"))
    assert len(records) == 1, done.stdout[-3000:] + done.stderr[-3000:]
    g4 = json.loads(records[0].read_text())
    by_id = {x["id"]: x for x in g4["measurements"] if x.get("id")}
    verify = by_id["g4.verify_errors"]
    assert g4["verdict"] == "FAIL" and done.returncode == 1, (verify, done.stdout[-2000:])
    assert verify["outcome"] == "FAIL", verify
    [rule] = faultfs.stats()["faults"]
    assert rule["seen"] >= 3 and rule["fired"] >= 1, rule
    # Windows count from 0: the third pass is window #2's, and every later one was refused too.
    assert verify["note"].startswith("window #2: ") and "EIO" in verify["note"], verify["note"]


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_bytes_flipped_on_read_are_verify_errors_at_their_offset(faultfs):  # noqa: F811
    """The storage returns other bytes than were written (ten bytes of the fourth 64 KiB block):
    G4's write-then-verify pass, with its shipped engine and O_DIRECT (libaio, direct = true),
    counts verify errors at that block, an alert reading; g4.verify_errors allows none."""
    from gates.soak.fio_verify import FioVerify
    from gates.soak.health import WindowContext
    from gates.storage import SubprocessRunner

    block = 65536
    verify = FioVerify(SubprocessRunner(), faultfs.mountpoint / "scratch", size=1 << 20,
                       block=block, rate="0", ioengine="libaio", direct=True)
    faultfs.set(Fault("flip", path="*/kvgate-soak-verify.dat", start=3 * block + 100,
                      end=3 * block + 110))
    reading = verify.collect(WindowContext(index=0, start=0.0, end=1.0, since=0.0))
    assert reading.status == "alert", reading.reason
    assert reading.values["verify_errors"] >= 1 and "job_errors" not in reading.values
    assert any(f"offset {3 * block} length {block}" in d for d in reading.details), \
        reading.details
    assert faultfs.stats()["faults"][0]["fired"] >= 1


# ---- a heavy-tailed stall from window N on; faults that clear again --------------------------

def windows_committed(out: Path) -> int:
    """Windows of the soak committed so far (0 before its store or its table exists)."""
    from gates.store import Store
    try:
        with Store(out, read_only=True) as store:
            return store.db.execute("SELECT COUNT(*) FROM soak_windows").fetchone()[0]
    except Exception:  # noqa: BLE001  (not yet created: nothing committed)
        return 0


def soak_with_fault_from(tmp_path: Path, repo: Path, faultfs, site: str, fault: Fault,  # noqa: F811
                         from_window: int, duration: str, window: str,
                         clear_at: int | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    """`kvgate run g4`, ``fault`` set once ``from_window`` windows are committed (cleared once
    ``clear_at`` are, if given); the G4 record as JSON."""
    import time
    (tmp_path / "site.toml").write_text(site)
    (tmp_path / "thresholds.toml").write_text((repo / "thresholds.toml").read_text())
    passing_g3(tmp_path / "out")
    soak = subprocess.Popen(
        [sys.executable, "-m", "gates.cli", "run", "g4", "--site", "site.toml", "--thresholds",
         "thresholds.toml", "--out", "out", "--soak-duration", duration, "--soak-window", window],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    steps = [(from_window, lambda: faultfs.set(fault))]
    steps += [(clear_at, faultfs.clear)] if clear_at is not None else []
    try:
        for at, act in steps:
            while soak.poll() is None and windows_committed(tmp_path / "out") < at:
                time.sleep(0.1)
            act()
        output, _ = soak.communicate(timeout=300)
    finally:
        if soak.poll() is None:
            soak.kill()
            soak.wait()
    [record] = (tmp_path / "out").glob("*/g4.json")
    return subprocess.CompletedProcess(soak.args, soak.returncode, output, ""), \
        json.loads(record.read_text())


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_a_heavy_tailed_stall_from_window_6_fails_the_floor_naming_its_windows(
        faultfs, tmp_path, repo):  # noqa: F811
    """From window #6 on (the test sets the fault once six windows are committed), every read
    of the engine's KV chunks stalls at least 50 ms, Pareto-tailed (shape 1.2, capped at 0.5 s).
    Each session's later turns restore its first turn's 128 chunks (2 048 tokens: twice the
    tiny GPU cache; the third and fourth turns find them written, whatever the writers' lag),
    so the soak's throughput falls to a fraction of the first span's: the
    floor FAILs on a span the fault hit (never PASS; in a 30 s rehearsal an undecided floor
    would be REPORTED, so the stall is made far larger than the noise of a busy machine)."""
    target = faultfs.mountpoint / "target"
    site = edited(edited(site_text(target), "first_tokens = 128", "first_tokens = 2048",
                         where="the G4 site"), "turns = 2", "turns = 4", where="the G4 site")
    fault = Fault("delay", op="read", path="/target/kv-candidate/*.kv", delay=0.05,
                  tail="pareto", alpha=1.2, max_delay=0.5, seed=11)
    done, g4 = soak_with_fault_from(tmp_path, repo, faultfs, site, fault, 6, "30s", "2s")
    floor = {x["id"]: x for x in g4["measurements"] if x.get("id")}["g4.throughput_floor"]
    assert floor["outcome"] == "FAIL" and floor["value"] < 50, floor
    assert g4["verdict"] == "FAIL" and done.returncode == 1, done.stdout[-2000:]
    # The span it fails on is one the fault hit, and the record names its windows.
    # A window the stall stretched may make a span alone: "(window #9, 1 window)".
    named = [re.match(r"lowest later span \(windows? #(\d+)", e) for e in floor["evidence"]]
    assert any(named), floor["evidence"]
    first_hit = int(next(m for m in named if m)[1])
    assert first_hit >= 6, floor["evidence"]
    assert f"window #{first_hit}: " in "\n".join(floor["evidence"]), floor["evidence"]
    [rule] = faultfs.stats()["faults"]
    assert rule["fired"] > 0, rule


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_a_fault_that_clears_again_names_the_windows_it_hit(faultfs, tmp_path, repo):  # noqa: F811
    """The verify file's writes are refused with EIO in the third and fourth passes only (the
    rule fires twice, then clears): g4.verify_errors FAILs naming window #2 first and the
    windows hit, [2, 3]; the passes after it, which succeeded, are not named."""
    target = faultfs.mountpoint / "target"
    (tmp_path / "site.toml").write_text(site_text(target))
    (tmp_path / "thresholds.toml").write_text(edited(
        (repo / "thresholds.toml").read_text(), 'ttft_drift_max = "10 %"',
        'ttft_drift_max = "1000 %"', where="thresholds.toml"))
    passing_g3(tmp_path / "out")
    faultfs.set(Fault("error", op="write", errno=errno.EIO, path="*/kvgate-soak-verify.dat",
                      start=0, end=1, after=2, times=2))
    done = subprocess.run(
        [sys.executable, "-m", "gates.cli", "run", "g4", "--site", "site.toml", "--thresholds",
         "thresholds.toml", "--out", "out", "--soak-duration", "12s", "--soak-window", "2s"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    [record] = (tmp_path / "out").glob("*/g4.json")
    g4 = json.loads(record.read_text())
    verify = {x["id"]: x for x in g4["measurements"] if x.get("id")}["g4.verify_errors"]
    assert verify["outcome"] == "FAIL" and g4["verdict"] == "FAIL", (verify, done.stdout[-2000:])
    assert verify["note"].startswith("window #2: ") and "EIO" in verify["note"], verify["note"]
    assert "refused 2 of 6 write-then-verify passes (windows [2, 3])" in verify["note"], \
        verify["note"]
    [rule] = faultfs.stats()["faults"]
    assert rule["fired"] == 2 and rule["seen"] >= 6, rule
