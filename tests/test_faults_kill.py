"""kill -9 of `kvgate run g4` while its storage stalls (issue #44), then `kvgate soak resume`:
nothing committed is lost or changed. The target (the verify scratch and the simulator's KV
directory) is on the fault filesystem (tests/faultfs/); the store and the reports are not (the
storage under test stalls, not kvgate's own disk).

What "unchanged" means, measured: every row of the store (every table but soak_runners, the one
table a runner updates: its heartbeat) before the kill is there after the resume, byte for
byte (SHA-256 of the row); the earlier run's record and report files hash the same; and
`kvgate verify` says that run is intact, before and after.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from faultfs import Fault
from faultfs.fixture import faultfs  # noqa: F401  (the fixture)
from test_faults_g4 import passing_g3, site_text, windows_committed

from gates.core.verdicts import Cause, Deviation
from gates.store import DB_NAME

MARK = "KVGATE_FAULT_KILL"  # in the environment of every process this test starts
MUTABLE = {"soak_runners"}  # a runner's heartbeat and state: updated by design


def kvgate(tmp_path: Path, *args: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gates.cli", *args], cwd=tmp_path,
                            env={**os.environ, MARK: str(tmp_path)}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **popen)


def finished(proc: subprocess.Popen, timeout: float = 300) -> str:
    output, _ = proc.communicate(timeout=timeout)
    return output


def rows(out: Path) -> dict[tuple[str, int], str]:
    """(table, rowid) -> SHA-256 of the row, for every row of every table of the store."""
    db = sqlite3.connect(f"file:{out / DB_NAME}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {(t, r[0]): hashlib.sha256(repr(r[1:]).encode()).hexdigest()
                for t in tables if t not in MUTABLE
                for r in db.execute(f"SELECT rowid, * FROM {t}")}  # noqa: S608 (own tables)
    finally:
        db.close()


def newest_soak(out: Path) -> str:
    db = sqlite3.connect(f"file:{out / DB_NAME}?mode=ro", uri=True)
    try:
        return db.execute("SELECT run_id FROM soak_plans ORDER BY rowid DESC LIMIT 1").fetchone()[0]
    finally:
        db.close()


def files(run: Path) -> dict[str, str]:
    """Relative path -> SHA-256 of every file of a run folder."""
    return {str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run.rglob("*")) if p.is_file()}


def verify(tmp_path: Path, run: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "gates.cli", "verify", str(run)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    # 0: intact and signed by a trusted key; 4: intact (every hash holds), but unsigned.
    assert (done.returncode == 0 and "intact" in done.stdout) or (
        done.returncode == 4 and "hashes hold" in done.stdout), done.stdout + done.stderr
    return done.stdout


def ours(tmp_path: Path) -> list[int]:
    """Processes this test started (kvgate and what it launched), by their environment."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"{MARK}={tmp_path}".encode() in environ:
            found.append(int(pid))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def end(tmp_path: Path, known: list[int] = (), timeout: float = 60) -> None:
    """SIGKILL what this test started (``known``, and what /proc says is ours) and wait until
    it is gone. A process killed with I/O in flight on the stalled mount (fio's libaio) lingers
    until that I/O completes, its environment unreadable meanwhile: kvgate refuses the target
    to a resume until then ("in use by fio"), as it should."""
    deadline = time.monotonic() + timeout
    while pids := [p for p in {*known, *ours(tmp_path)} if alive(p)]:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert time.monotonic() < deadline, f"still running after SIGKILL: {pids}"
        time.sleep(0.2)


def test_kill_9_while_the_storage_stalls_then_resume_loses_nothing(faultfs, tmp_path):  # noqa: F811
    (tmp_path / "site.toml").write_text(site_text(faultfs.mountpoint / "target"))
    repo = Path(__file__).resolve().parent.parent
    (tmp_path / "thresholds.toml").write_text((repo / "thresholds.toml").read_text())
    passing_g3(tmp_path / "out")
    soak = ("run", "g4", "--site", "site.toml", "--thresholds", "thresholds.toml", "--out", "out")
    # An earlier run, whole: a short soak (the 5 windows G4's rules need) with its record,
    # reports and summary.
    earlier = kvgate(tmp_path, *soak, "--soak-duration", "5s", "--soak-window", "1s")
    said = finished(earlier)
    [earlier_run] = [p.parent for p in (tmp_path / "out").glob("*/g4.json")]
    assert earlier.returncode in (0, 1), said[-3000:]
    verify(tmp_path, earlier_run)
    earlier_files = files(earlier_run)

    # The soak to kill: a process group of its own, so kill -9 reaches kvgate and fio at once.
    victim = kvgate(tmp_path, *soak, "--soak-duration", "16s", "--soak-window", "2s",
                    start_new_session=True)
    known: list[int] = []
    try:
        while victim.poll() is None and windows_committed(tmp_path / "out") < 5 + 3:
            time.sleep(0.1)  # the earlier soak's 5 windows, then 3 of this one
        assert victim.poll() is None, finished(victim)[-3000:]
        # Every read and write on the target now stalls 3 s: kvgate's window waits on fio's
        # verify pass and on the engine, and is killed in the middle of it.
        faultfs.set(Fault("delay", op="any", delay=3.0))
        time.sleep(4)
        before = rows(tmp_path / "out")
        fired = faultfs.stats()["faults"][0]["fired"]
        known = ours(tmp_path)  # kvgate, fio, the engine: while they live, /proc names them
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait(timeout=30)
    finally:
        faultfs.clear()  # so the I/O the killed processes left in flight can complete
        end(tmp_path, known)  # and the engine kvgate launched in a session of its own
    assert victim.returncode == -signal.SIGKILL and fired > 0  # killed while stalled
    run_id = newest_soak(tmp_path / "out")
    assert run_id != earlier_run.name
    committed = {k for k in before if k[0] == "soak_windows"}
    assert len(committed) >= 8, committed

    resumed = kvgate(tmp_path, "soak", "resume", run_id, "--out", "out")
    try:
        said = finished(resumed)
    finally:
        end(tmp_path)
    assert resumed.returncode in (0, 1), said[-3000:]
    assert (tmp_path / "out" / run_id / "g4.json").exists(), said[-3000:]
    after = rows(tmp_path / "out")
    changed = [k for k, digest in before.items() if after.get(k) != digest]
    assert not changed, changed[:10]
    assert files(earlier_run) == earlier_files
    verify(tmp_path, earlier_run)
    # The resumed soak names the gap the kill left, and its windows go on from where it was.
    g4 = json.loads((tmp_path / "out" / run_id / "g4.json").read_text())
    found = [Deviation.model_validate(d) for d in g4["deviations"]]
    assert any(d.cause is Cause.SOAK_GAP for d in found), g4["deviations"]
