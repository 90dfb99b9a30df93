"""`kvgate sweep` killed and resumed end to end on simulator arms over loopback: a size committed
before the kill is kept as it was, the sweep goes on from the next one. The world and the helpers
are test_sweep_e2e's; a file of its own so the two sweeps go to different pytest-xdist workers
(--dist loadfile keeps a file on one).
"""

import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest
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


def test_a_killed_sweep_resumes_at_its_first_size_without_a_point(world):
    target, out = world / "disk" / "two", "killed"
    proc = sweep(world, site=site_text(target, ["768KiB", "1280KiB"]), out=out,
                 popen=True)
    db, deadline = world / out / "kvgate.sqlite", time.monotonic() + 300
    run_id = ""
    while time.monotonic() < deadline and proc.poll() is None:
        run_id = run_id or _run_id(db)
        if run_id and _points(db, run_id) >= 1:
            break
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()[0]
    os.killpg(proc.pid, signal.SIGKILL)  # kvgate and every engine it started
    proc.wait(timeout=30)
    with sqlite3.connect(db) as c:
        first = c.execute("SELECT body FROM sweep_points WHERE idx = 0").fetchone()[0]
    assert not list((world / out).glob("sweep-*"))  # no page for a sweep still measuring

    done = sweep(world, "--resume", run_id, out=out)
    assert f"sweep {run_id}: 2 working sets" in done.stdout, done.stdout + done.stderr
    assert "[1/2]" not in done.stdout and "[2/2]" in done.stdout  # size 1 was not measured again
    r, _ = record_of(world, out)
    assert r.run_id == run_id and [p.contexts for p in r.points] == [3, 5]
    fair(done, r)
    assert r.points[0] == SweepPoint.model_validate_json(first)  # as committed before the kill


@pytest.mark.parametrize("out", ["killed", "nowhere"])  # a store without it, or no store
def test_resuming_a_sweep_that_is_not_there_is_bad_input(world, out):
    done = sweep(world, "--resume", "20261205T000000Z-abcdef", out=out)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "no sweep 20261205T000000Z-abcdef in" in done.stderr, done.stderr
