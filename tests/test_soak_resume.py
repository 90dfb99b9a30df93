"""Issue #17, "Nothing silent": a killed soak is said to be dead, and resumes as it was started.

Before the fix `kvgate soak status` showed a soak whose runner had been killed with kill -9 as
if it were running ("window 3/9, gaps 0 s"), and `kvgate soak resume` dropped --force and ended
BLOCKED under a new run id, leaving the killed engine's log outside every record's evidence.

The end-to-end test runs `kvgate run g4 --force` for real (a launched simulator arm, fio verify
on a temporary directory) in a child process, kills that process with SIGKILL after a few
committed windows, then asks `kvgate soak status` and `kvgate soak resume` as a user would.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from _soak import ENDPOINT_ARMS, g3_for_soak, soak_site
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gates.cli import main
from gates.core.verdicts import Cause, Deviation
from gates.soak import SoakPlan, SoakRunner, carry_engine_logs
from gates.soak.liveness import RunnerMark, judge, process_gone, this_runner
from gates.soak.runner import SoakBusy
from gates.soak.store import SoakStore
from gates.store import Store


def site_text(target: Path) -> str:
    return soak_site(target, engine="kvgate-sim", other_arms=ENDPOINT_ARMS)


def failed_g3(out: Path) -> None:
    """A G3 that did not pass (so G4 needs --force), with the repetitions G4 starts from."""
    g3_for_soak(out, reduction=5, throughput=50.0)


def kvgate(*argv, cwd):
    done = subprocess.run([sys.executable, "-m", "gates.cli", *map(str, argv)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout.replace("\n", " ") + done.stderr


def killed_soak(root: Path, windows: int) -> tuple[str, int, list]:
    """`kvgate run g4 --force …` killed with SIGKILL once `windows` windows are committed."""
    out = root / "out"
    child = subprocess.Popen(
        [sys.executable, "-m", "gates.cli", "run", "g4", "--force", "--site", "site.toml",
         "--thresholds", "thresholds.toml", "--out", "out", "--soak-duration", "12s",
         "--soak-window", "2s"], cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run_id, committed = "", []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and child.poll() is None:
            if (out / "kvgate.sqlite").exists():
                with Store(out) as peek:
                    soaks = SoakStore(peek)
                    run_id = soaks.latest()
                    committed = soaks.windows(run_id) if run_id else []
                if len(committed) >= windows:
                    break
            time.sleep(0.1)
        assert len(committed) >= windows, f"the soak did not get going (exit {child.poll()})"
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    with Store(out) as store:
        committed = SoakStore(store).windows(run_id)
    return run_id, child.pid, committed


@pytest.fixture
def world(tmp_path, repo):
    (tmp_path / "site.toml").write_text(site_text(tmp_path / "target"))
    (tmp_path / "target").mkdir()
    (tmp_path / "thresholds.toml").write_text((repo / "thresholds.toml").read_text())
    failed_g3(tmp_path / "out")
    return tmp_path


def test_a_forced_soak_killed_mid_run_is_said_dead_and_resumes_forced_in_its_run(world):
    run_id, pid, before = killed_soak(world, windows=2)
    out, folder = world / "out", world / "out" / run_id
    assert 2 <= len(before) < 6
    killed_log = (folder / "evidence" / "g4-arm-candidate.log").read_text()
    assert "=== kvgate: arm candidate starting" in killed_log
    assert not (folder / "g4.json").exists()  # kill -9: the record was never written

    code, said = kvgate("soak", "status", run_id, "--out", out, cwd=world)
    assert code == 1, said
    assert f"window {len(before)}/6" in said
    resume = f"kvgate soak resume {run_id} --out {out}"
    assert f"runner: not running (runner pid {pid} is gone, last heartbeat at " in said
    assert f"): resume with `{resume}`" in said

    # Resumed from elsewhere, naming neither file: the soak's plan knows them, and --force.
    code, said = kvgate(*resume.split()[1:], cwd=world.parent)
    # A 12 s soak may FAIL stability, or its drift be MARGINAL (undecided); never BLOCKED.
    assert code in (0, 1), said[-3000:]
    assert f"resuming soak {run_id} in its own run {run_id}, forced past the upstream gate" \
        in said
    assert {p.name for p in out.iterdir() if p.is_dir()} == {"g3-run", "pytest-html", run_id}
    record = json.loads((folder / "g4.json").read_text())
    assert record["run_id"] == run_id and record["forced"] is True
    assert record["verdict"] in ("PASS", "FAIL", "MARGINAL"), said[-3000:]
    found = [Deviation.model_validate(d) for d in record["deviations"]]
    assert Deviation(cause=Cause.FORCED, text="FORCED: run despite the upstream gate: G3 did "
                     "not pass (run g3-run: FAIL)") in found
    # The gap, of its cause whatever its words.
    assert any(d.cause is Cause.SOAK_GAP and d.text.startswith("not running for ")
               for d in found), found
    assert record["facts"]["windows"] == ("6 of 6 committed; the first 1 (one window) left out "
                                          "of throughput and TTFT as the warm-up")
    assert record["facts"]["soak run"] == run_id
    # The killed engine's log is evidence of the record, under a name that says so.
    # All of it: the engine (told to stop by SIGTERM when its runner died, PR_SET_PDEATHSIG)
    # may still log its dying words, an in-flight request's error, after the test read it.
    earlier = folder / "evidence" / "g4-arm-candidate.before-resume-1.log"
    assert earlier.read_text().startswith(killed_log)
    assert {"evidence/g4-arm-candidate.before-resume-1.log",
            "evidence/g4-arm-candidate.log"} <= set(record["evidence"])
    assert record["facts"]["engine logs before the resume"].startswith(
        "evidence/g4-arm-candidate.before-resume-1.log (")
    assert "=== kvgate: arm candidate starting" in \
        (folder / "evidence" / "g4-arm-candidate.log").read_text()
    with Store(out) as store:
        after = SoakStore(store).windows(run_id)
    assert [w.model_dump() for w in after[:len(before)]] == [w.model_dump() for w in before]

    code, said = kvgate("soak", "status", run_id, "--out", out, cwd=world)
    assert code == 0 and "runner: finished" in said and "window 6/6" in said
    code, said = kvgate("verify", folder, cwd=world)
    assert code == 4 and "ALTERED" not in said, said  # intact; the tests sign nothing


# ---- status and resume around a runner killed in a child process --------------------------

SLEEPER = """
import sys, time
from pathlib import Path
from gates.core.verdicts import RequestRecord
from gates.soak import SoakPlan, SoakRunner
from gates.store import Store

class Sleep:
    def run(self, index, seconds):
        time.sleep(seconds)
        return [RequestRecord(request_id=f"w{index}", t0=0.0, ttft=0.1, e2e=0.2,
                              content_times=[0.1, 0.2], output_tokens=10)]

store = Store(Path(sys.argv[1]))
store.begin_run("soak-k", "test site")
SoakRunner.start(store, SoakPlan(run_id="soak-k", duration=60.0, window=0.5), Sleep()).run()
"""


@pytest.fixture
def running(tmp_path):
    """A soak runner in a child process, two windows in; yields (out, child)."""
    out = tmp_path / "out"
    child = subprocess.Popen([sys.executable, "-c", SLEEPER, str(out)])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if (out / "kvgate.sqlite").exists():
                with Store(out) as peek:
                    if len(SoakStore(peek).windows("soak-k")) >= 2:
                        break
            time.sleep(0.05)
        yield out, child
    finally:
        child.kill()
        child.wait()


def test_status_of_a_runner_killed_with_sigkill_says_not_running_and_how_to_resume(
        running, capsys):
    out, child = running
    assert main(["soak", "status", "soak-k", "--out", str(out)]) == 0
    assert f"runner: running (runner pid {child.pid}, last heartbeat at " in \
        capsys.readouterr().out
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert main(["soak", "status", "--out", str(out)]) == 1
    said = capsys.readouterr().out.replace("\n", " ")
    assert f"runner: not running (runner pid {child.pid} is gone, last heartbeat at " in said
    assert f"): resume with `kvgate soak resume soak-k --out {out}`" in said


def test_a_soak_whose_runner_is_alive_is_not_resumed_beside_it(running, capsys):
    out, child = running
    assert main(["soak", "resume", "soak-k", "--out", str(out)]) == 2
    err = capsys.readouterr().err.replace("\n", " ")
    assert f"soak soak-k is running (runner pid {child.pid}" in err
    assert "it cannot be resumed beside its runner" in err
    with Store(out) as store:
        with pytest.raises(SoakBusy, match="while its runner may still write windows"):
            SoakRunner.resume(store, "soak-k", load=None)
        assert not [d for d in SoakStore(store).deviations("soak-k") if d.kind == "gap"]


# ---- the runner's mark, judged --------------------------------------------------------------

def mark(**kw):
    return RunnerMark(**({"pid": os.getpid(), "created": this_runner().created,
                          "host": this_runner().host, "heartbeat": 1000.0} | kw))


def test_a_reused_pid_a_stale_heartbeat_and_another_host_are_told_apart():
    resume = "kvgate soak resume r"
    fresh = judge(mark(), window=300, finished=False, resume=resume, now=1010.0)
    assert fresh.kind == "running" and not fresh.text.startswith("not")
    reused = judge(mark(created=1.0), 300, False, resume, now=1010.0)
    assert reused.kind == "gone" and "is gone (that pid is now another process)" in reused.text
    assert process_gone(os.getpid(), 1.0) and not process_gone(os.getpid(),
                                                                this_runner().created)
    hung = judge(mark(), 300, False, resume, now=1000.0 + 3 * 300 + 61)
    assert hung.kind == "hung" and hung.busy
    assert hung.text.startswith(f"not responding (runner pid {os.getpid()} is alive")
    away = judge(mark(host="elsewhere", pid=1), 300, False, resume, now=1010.0)
    assert away.kind == "running" and "the pid cannot be checked from here" in away.text
    lost = judge(mark(host="elsewhere", pid=1), 300, False, resume, now=1000.0 + 3 * 300 + 61)
    assert lost.kind == "gone" and lost.text.endswith(f"resume with `{resume}`")
    stopped = judge(mark(state="stopped", reason="ArmError: engine died"), 300, False, resume)
    assert stopped.text.startswith(f"not running (runner pid {os.getpid()} stopped before the "
                                   "last window: ArmError: engine died")
    assert judge(None, 300, True, resume).kind == "finished"
    assert judge(None, 300, False, resume).kind == "unknown"


def test_the_runner_marks_itself_and_says_why_it_stopped(tmp_path):
    class Boom:
        def run(self, index, seconds):
            raise RuntimeError("engine gone")
    with Store(tmp_path) as store:
        store.begin_run("r", "s")
        runner = SoakRunner.start(store, SoakPlan(run_id="r", duration=10, window=5), Boom())
        assert SoakStore(store).runner("r").state == "running"
        with pytest.raises(RuntimeError):
            runner.run()
        left = SoakStore(store).runner("r")
        assert (left.state, left.reason, left.pid) == ("stopped", "RuntimeError: engine gone",
                                                       os.getpid())


# ---- the earlier engine logs carried into the resumed record's evidence ---------------------

def test_earlier_engine_logs_are_carried_into_the_resumed_run_by_name(tmp_path):
    with Store(tmp_path) as store:
        store.begin_run("a", "s")
        log = store.run_dir("a") / "evidence" / "g4-arm-candidate.log"
        log.write_text("engine before the kill\nTraceback (most recent call last)\n")
        # In the soak's own run: renamed, hashed; the resumed engine writes the usual name.
        new, carried = carry_engine_logs(store, "a", "a", log.name)
        assert new == log and not log.exists()
        assert [p.name for p in carried] == ["g4-arm-candidate.before-resume-1.log"]
        assert "evidence/g4-arm-candidate.before-resume-1.log" in store.manifest("a")
        # The soak's run has its G4 record already: the logs are copied into the new run.
        log.write_text("engine after the first resume\n")
        store.add_evidence("a", log)
        store.begin_run("b", "s")
        new, carried = carry_engine_logs(store, "b", "a", log.name)
        assert new == store.run_dir("b") / "evidence" / log.name
        assert [p.read_text() for p in carried] == [
            "engine before the kill\nTraceback (most recent call last)\n",
            "engine after the first resume\n"]
        assert set(store.manifest("b")) == {"evidence/g4-arm-candidate.before-resume-1.log",
                                            "evidence/g4-arm-candidate.before-resume-2.log"}
        # A log hashed already in the soak's run is never appended to.
        new, carried = carry_engine_logs(store, "a", "a", log.name)
        assert new.name == "g4-arm-candidate.after-resume-1.log" and carried == []


# ---- a soak resumed again and again: every engine log it leaves is listed ----------------------

LOG = "g4-arm-candidate.log"


@settings(max_examples=60, deadline=None)
@given(engines=st.lists(st.tuples(st.booleans(), st.booleans()), min_size=2, max_size=6))
@example(engines=[(True, True), (True, False), (True, True)])  # #27: the log left unlisted
def test_every_engine_log_of_a_soak_resumed_again_and_again_is_listed(engines):
    """Each engine (the soak's, then each resume's) writes its log or not, and its soak returns
    (the log is hashed) or is killed (it is not). Before #27 an engine log written after a
    resume (<log>.after-resume-N.log) whose resume was killed was never carried by the next
    one: its bundle failed `kvgate verify` with "unlisted". Each resume must list every
    earlier log, and hand its engine a file that does not exist yet."""
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp)) as store:
        store.begin_run("a", "s")
        here = store.run_dir("a") / "evidence"
        log = here / LOG
        for n, (wrote, returned) in enumerate(engines):
            if n:  # a resume in the soak's own run (its run has no G4 record yet)
                log, _ = carry_engine_logs(store, "a", "a", LOG)
                assert not log.exists()
                listed = set(store.manifest("a"))
                assert {f"evidence/{p.name}" for p in here.glob("*.log")} <= listed
            if wrote:
                with log.open("a") as handle:
                    handle.write(f"engine {n}\n")
            if wrote and returned:
                store.add_evidence("a", log)
