"""The target lock (issue #17): one run at a time on a target, and none while a leftover fio
works in it. Real processes hold and lose the lock; real fio is the leftover."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gates.core.configuration import Target
from gates.storage import TargetBusy, TargetError, lock_target
from gates.storage.lock import LOCK_FILE

HOLDER = """
import sys
from pathlib import Path
from gates.core.configuration import Target
from gates.storage import lock_target
lock = lock_target(Target(directory=Path(sys.argv[1]), create=True), sys.argv[2],
                   "2026-12-01T10:00:00Z")
print("held", flush=True)
sys.stdin.read()  # until the test closes our stdin
lock.release()
"""


@pytest.fixture
def holder():
    """Start another process that takes a target's lock; every one is gone after the test."""
    started: list[subprocess.Popen] = []

    def start(directory: Path, run_id: str = "run-A") -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(directory), run_id],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        started.append(proc)
        assert proc.stdout.readline().strip() == "held", "the holder could not take the lock"
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait(timeout=10)


def take(directory: Path, run_id: str = "run-B", create: bool = False):
    return lock_target(Target(directory=directory, create=create), run_id, "2026-12-01T11:00:00Z")


def test_a_second_process_is_refused_with_the_holders_pid_and_run(tmp_path, holder):
    target = tmp_path / "target"
    held = holder(target, "run-A")
    owner = json.loads((target / LOCK_FILE).read_text())
    assert owner == {"pid": held.pid, "run_id": "run-A", "started": "2026-12-01T10:00:00Z",
                     "host": socket.gethostname()}
    with pytest.raises(TargetBusy) as refused:
        take(target)
    text = str(refused.value)
    assert "\n" not in text
    assert f"target {target} is in use by kvgate run run-A (pid {held.pid}" in text
    assert f"kill {held.pid}" in text and "wait for that run to finish" in text
    assert isinstance(refused.value, TargetError | ValueError)


def test_the_lock_is_free_again_when_its_holder_ends(tmp_path, holder):
    target = tmp_path / "target"
    held = holder(target)
    held.stdin.close()
    assert held.wait(timeout=10) == 0
    assert not (target / LOCK_FILE).exists()  # released: nothing of ours is left in the target
    lock = take(target)
    assert json.loads((target / LOCK_FILE).read_text())["pid"] == os.getpid()
    lock.release()
    assert list(target.iterdir()) == []


def test_the_lock_is_free_again_when_its_holder_is_killed(tmp_path, holder):
    target = tmp_path / "target"
    held = holder(target)
    held.send_signal(signal.SIGKILL)
    held.wait(timeout=10)
    assert (target / LOCK_FILE).exists()  # left behind by kill -9, but nobody holds it
    lock = take(target, "run-C")
    assert json.loads((target / LOCK_FILE).read_text())["run_id"] == "run-C"
    lock.release()


def test_sessions_of_one_process_share_its_hold(tmp_path):
    first = take(tmp_path)
    second = take(tmp_path)
    assert second is first
    second.release()
    assert (tmp_path / LOCK_FILE).exists()  # the first session still runs
    first.release()
    assert not (tmp_path / LOCK_FILE).exists()


def test_a_missing_target_is_created_then_locked_only_where_allowed(tmp_path):
    assert take(tmp_path / "absent") is None  # create = false: the gates say why, as before
    assert not (tmp_path / "absent").exists()
    assert take(tmp_path / "no-parent" / "target", create=True) is None
    lock = take(tmp_path / "made", create=True)
    assert (tmp_path / "made" / LOCK_FILE).is_file()
    lock.release()


def test_a_link_planted_as_the_lock_file_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    target = tmp_path / "target"
    target.mkdir()
    (target / LOCK_FILE).symlink_to(elsewhere)
    with pytest.raises(TargetBusy, match="its lock file"):
        take(target)
    assert not elsewhere.exists()


FIO = shutil.which("fio")
needs_fio = pytest.mark.skipif(FIO is None, reason="fio is not installed (apt-get install fio)")


@needs_fio
def test_a_leftover_fio_in_the_target_refuses_the_run(tmp_path):
    """A fio a killed run left behind holds no lock; it is found by its files and cwd."""
    target = tmp_path / "target"
    target.mkdir()
    fio = subprocess.Popen([FIO, "--name=leftover", "--rw=write", "--size=4m", "--bs=4k",
                            "--filename=left.dat", "--time_based", "--runtime=60s",
                            "--rate=1m"], cwd=target, start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with pytest.raises(TargetBusy) as refused:
            take(target)
        assert f"target {target} is in use by fio (pid {fio.pid}" in str(refused.value)
        assert not (target / LOCK_FILE).exists()  # let go again, nothing of ours left
    finally:
        os.killpg(fio.pid, signal.SIGKILL)
        fio.wait(timeout=10)
    take(target).release()  # fio gone: the target is free


# ---- through `kvgate run` ----------------------------------------------------------------

def _run_g1(tmp_path: Path, site: str, repo: Path, out: str = "reports"):
    (tmp_path / "site.toml").write_text(site)
    return subprocess.run([sys.executable, "-m", "gates.cli", "run", "g1", "--site",
                           str(tmp_path / "site.toml"), "--thresholds",
                           str(repo / "thresholds.toml"), "--out", str(tmp_path / out)],
                          capture_output=True, text=True, timeout=300)


def test_a_second_kvgate_run_on_a_held_target_is_refused_and_writes_nothing(
        tmp_path, repo, tiny_site, holder):
    target = tmp_path / "target"
    held = holder(target, "run-A")
    lock_text = (target / LOCK_FILE).read_text()
    done = _run_g1(tmp_path, tiny_site(target), repo)
    output = " ".join((done.stdout + done.stderr).split())  # rich wraps long lines
    assert done.returncode == 2, output
    assert f"target {target} is in use by kvgate run run-A (pid {held.pid}" in output
    assert [p.name for p in target.iterdir()] == [LOCK_FILE]
    assert (target / LOCK_FILE).read_text() == lock_text
    assert not list((tmp_path / "reports").glob("*/g1.json"))


def test_a_finished_kvgate_run_lets_the_target_go(tmp_path, repo, tiny_site):
    target = tmp_path / "target"
    site = tiny_site(target)
    assert "[fio]\n" in site
    site = site.replace("[fio]\n", '[fio]\nbinary = "fio-absent"\n')  # a quick run
    done = _run_g1(tmp_path, site, repo)
    assert list((tmp_path / "reports").glob("*/g1.json")), done.stdout + done.stderr
    assert target.is_dir() and not (target / LOCK_FILE).exists()
    take(target).release()


def test_a_run_that_cannot_be_registered_lets_the_target_go(tmp_path, repo, tiny_site):
    """A run id the store already holds is refused at open(); the target's lock, taken just
    before, is released then, not when the process exits."""
    from gates.options import RunOptions
    from gates.session import GateSession

    (tmp_path / "site.toml").write_text(tiny_site(tmp_path / "target"))
    def options(run_id):
        return RunOptions(site=tmp_path / "site.toml", thresholds=repo / "thresholds.toml",
                          out=tmp_path / "reports", run_id=run_id)

    GateSession.open(options("run-1")).finish()
    with pytest.raises(Exception, match="run-1"):
        GateSession.open(options("run-1"))
    # The target is free again (the lock file stayed, held by this process, before the fix).
    assert not (tmp_path / "target" / LOCK_FILE).exists()
    GateSession.open(options("run-2")).finish()
