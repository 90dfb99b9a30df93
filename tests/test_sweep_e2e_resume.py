"""`kvgate sweep` killed and resumed end to end on simulator arms over loopback: a size committed
before the kill is kept as it was, the sweep goes on from the size it was in the middle of
(kill -9, or Ctrl-C, which stops it cleanly with exit 130), and a resume on another site is
refused naming what changed (#45 item 4). The world and the helpers
are test_sweep_e2e's; a file of its own so the two sweeps go to different pytest-xdist workers
(--dist loadfile keeps a file on one).
"""

import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest
from _edits import edited
from _timing import TimingFailure
from test_sweep_e2e import fair, record_of, site_text, sweep, world

from gates.inference import SweepPoint

__all__ = ["world"]  # the module fixture, built again for this file


def _points(db: Path, run_id: str) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            return c.execute("SELECT count(*) FROM sweep_points WHERE run_id = ?",
                             (run_id,)).fetchone()[0]
    except sqlite3.Error:  # not created yet
        return 0


def _run_id(db: Path) -> str:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            row = c.execute("SELECT run_id FROM sweep_plans").fetchone()
            return row[0] if row else ""
    except sqlite3.Error:
        return ""


def _rows(db: Path, run_id: str, like: str) -> int:
    """Evidence rows of the run whose name holds `like` (a size's tag: a size under way)."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            return c.execute("SELECT count(*) FROM evidence WHERE run_id = ? AND path LIKE ?",
                             (run_id, f"%{like}%")).fetchone()[0]
    except sqlite3.Error:
        return 0


def _stop_mid_size(world: Path, proc, out: str, points: int, tag: str, sig: int) -> str:
    """Signal the sweep's process group once `points` sizes are committed and the next size
    (tag) has stored evidence of its own: stopped in the middle of that size."""
    db, deadline, run_id = world / out / "kvgate.sqlite", time.monotonic() + 300, ""
    while time.monotonic() < deadline and proc.poll() is None:
        run_id = run_id or _run_id(db)
        if run_id and _points(db, run_id) >= points and _rows(db, run_id, tag):
            break
        time.sleep(0.1)
    assert proc.poll() is None and _points(db, run_id) == points, proc.communicate()[0]
    os.killpg(proc.pid, sig)
    return run_id


def test_a_sweep_killed_mid_size_refuses_another_site_and_resumes_to_the_end(world):
    target, out = world / "disk" / "two", "killed"
    proc = sweep(world, site=site_text(target, ["768KiB", "1280KiB"]), out=out, popen=True)
    # kill -9 in the middle of the second size: its evidence rows are stored, its point is not.
    run_id = _stop_mid_size(world, proc, out, 1, "-5ctx", signal.SIGKILL)
    proc.wait(timeout=30)
    with sqlite3.connect(world / out / "kvgate.sqlite") as c:
        first = c.execute("SELECT body FROM sweep_points WHERE idx = 0").fetchone()[0]
    assert not list((world / out).glob("sweep-*"))  # no page for a sweep still measuring

    # Another site, another target, the candidate capped to the baseline's speed: refused.
    other = site_text(world / "disk" / "other", ["768KiB", "1280KiB"]).replace(
        'name = "sweep site"', 'name = "another site"').replace(
        '"--kv-dir", "{kv_dir}"]', '"--kv-dir", "{kv_dir}", "--read-limit", "1MB/s"]')
    moved = sweep(world, "--resume", run_id, out=out, site=other)
    assert moved.returncode == 2 and "Traceback" not in moved.stderr, moved.stderr
    said = " ".join(moved.stderr.split())
    assert 'site.name = "sweep site" then, "another site" now' in said, said
    assert "target.directory = " in said and str(world / "disk" / "other") in said

    done = sweep(world, "--resume", run_id, out=out)
    assert f"sweep {run_id}: 2 working sets" in done.stdout, done.stdout + done.stderr
    assert "[1/2]" not in done.stdout and "[2/2]" in done.stdout  # size 1 was not measured again
    r, _ = record_of(world, out)
    assert r.run_id == run_id and [p.contexts for p in r.points] == [3, 5]
    fair(done, r)
    assert r.points[0] == SweepPoint.model_validate_json(first)  # as committed before the kill
    # The killed attempt's evidence is kept as it was listed; the new attempt's has names of
    # its own (the manifest never lists one name twice).
    assert any("-5ctx-try2" in name for name in r.evidence), sorted(r.evidence)
    assert any("-5ctx" in name and "-try" not in name for name in r.evidence)


@pytest.mark.timing  # the Ctrl-C races the size's end: a busy machine can let the sweep win
def test_a_sweep_interrupted_mid_size_stops_cleanly_and_resumes(world):
    # A store of its own per attempt: the timing marker's retry must not find the first one's.
    target, out = world / "disk" / "one", f"interrupted-{time.monotonic_ns()}"
    # No device reference between repetitions: a Ctrl-C that lands while kvgate starts its fio
    # leaves that fio behind (gates/storage's runner, said in #45's report), holding the target.
    site, limits = world / "site-interrupted.toml", world / "thresholds-no-devref.toml"
    site.write_text(site_text(target, ["768KiB"]))
    limits.write_text(edited((world / "thresholds.toml").read_text(),
                             'device_reference = "0.5s"', 'device_reference = "0s"',
                             where="thresholds.toml"))
    proc = sweep(world, "--site", str(site), "--thresholds", str(limits), out=out, popen=True)
    run_id = _stop_mid_size(world, proc, out, 0, "-3ctx", signal.SIGINT)  # Ctrl-C
    said, _ = proc.communicate(timeout=120)
    if proc.returncode == 0 and _points(world / out / "kvgate.sqlite", run_id) == 1:
        raise TimingFailure(f"the sweep ended its only size before the Ctrl-C landed (load "
                            f"average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs): "
                            "nothing was interrupted")
    assert proc.returncode == 130 and "Traceback" not in said, said
    assert f"kvgate sweep --resume {run_id}" in " ".join(said.split()), said
    done = sweep(world, "--resume", run_id, out=out)
    assert "[1/1]" in done.stdout, done.stdout + done.stderr
    fair(done, record_of(world, out)[0])


@pytest.mark.parametrize("out", ["killed", "nowhere"])  # a store without it, or no store
def test_resuming_a_sweep_that_is_not_there_is_bad_input(world, out):
    done = sweep(world, "--resume", "20261205T000000Z-abcdef", out=out)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "no sweep 20261205T000000Z-abcdef in" in done.stderr, done.stderr
