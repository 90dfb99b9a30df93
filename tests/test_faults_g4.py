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
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _chain import SITE, add_gate, m, open_run
from _edits import edited
from faultfs import Fault
from faultfs.fixture import faultfs  # noqa: F401  (the fixture)

from gates.core import Limit
from gates.store import Store

SIM = '["{python}", "-m", "gates.sim", "--profile", "tiny", "--port", "{port}"'


def site_text(target: Path) -> str:
    return f"""
[site]
name = "{SITE}"
[target]
directory = "{target}"
create = true
min_free = "0"
[fio]
file_size = "16MiB"
[soak]
warmup_windows = 0                   # every window judged, counted from the first
sessions = 2
turns = 2
first_tokens = 128
turn_tokens = 16
output_tokens = 8
verify_size = "4MiB"
[arms.candidate]
kind = "launch"
model = "kvgate-sim-tiny"
startup_timeout = "60s"
stop_timeout = "10s"
command = {SIM}, "--kv-dir", "{{kv_dir}}"]
kv_dir = "{target}/kv-candidate"
"""


def passing_g3(out: Path) -> None:
    """A G3 that passed, with the repetitions G4 takes its operating point from."""
    with Store(out) as store:
        folder = open_run(store, "g3-run")
        reps = folder / "evidence" / "g3-candidate-repetitions.json"
        reps.write_text(json.dumps([{"arm": "candidate", "concurrency": 2, "repetition": r,
                                     "ttfts": [0.1], "output_throughput": 1.0, "sent": 4,
                                     "errors": 0} for r in range(2)]))
        store.add_evidence("g3-run", reps)
        add_gate(store, "g3-run", "g3", measurements=[
            m("g3.ttft_p50_reduction", 60, Limit.at_least(30, "%"), 2)])


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
