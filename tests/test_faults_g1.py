"""G1 on storage that fails (issue #44): the real G1 path — `kvgate run g1` and its fio job set,
real fio with the shipped I/O engine (libaio) and direct = true — on the fault filesystem
(tests/faultfs/). An I/O error is an ERROR naming the job, the errno and the file; a stall on a
share of I/Os FAILs the QD1 p99.

O_DIRECT: FUSE honours it here (the kernel sends every I/O of an O_DIRECT file to the
filesystem, bypassing the page cache above it); the passthrough then reads and writes its backing
directory buffered, so the faults sit exactly at the storage interface fio measures.
"""

from __future__ import annotations

import errno
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from faultfs import Fault
from faultfs.fixture import faultfs  # noqa: F401  (the fixture)

from gates.core.configuration import load_thresholds
from gates.core.verdicts import Outcome
from gates.storage import StepOutcome, SubprocessRunner, g1_steps, run_step
from gates.storage import g1 as _g1
from gates.storage.jobs import VERIFY_FILE

pytestmark = pytest.mark.skipif(shutil.which("fio") is None,
                                reason="fio is not installed (apt-get install fio)")

REPO = Path(__file__).resolve().parent.parent
READ_FILE, WRITE_FILE = "kvgate-read.dat", "kvgate-write.dat"
# measurement name -> the fio job its note must name
READ_JOBS = {"Sequential read 1 MiB bandwidth": "seqread",
             "4 KiB random read QD1 p99 latency": "randread-qd1",
             "KV-restore read bandwidth": "kvrestore"}


def run_g1(tmp_path: Path, site_text: str) -> tuple[subprocess.CompletedProcess, dict]:
    """`kvgate run g1` as a user runs it, in a child process, with the demo limits."""
    (tmp_path / "site.toml").write_text(site_text)
    out = tmp_path / "reports"
    done = subprocess.run([sys.executable, "-m", "gates.cli", "run", "g1", "--site",
                           str(tmp_path / "site.toml"), "--thresholds",
                           str(REPO / "thresholds.toml"), "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    [record] = out.glob("*/g1.json")
    return done, json.loads(record.read_text())


def by_name(record: dict) -> dict[str, dict]:
    return {m["name"]: m for m in record["measurements"]}


def test_eio_on_reads_is_an_error_naming_job_errno_and_file(faultfs, tmp_path,  # noqa: F811
                                                             tiny_site):
    """The array writes but cannot read back: every read job's figure is an ERROR that says
    which job, which errno and which file; the writes it could do are still measured."""
    target = faultfs.mountpoint / "target"
    faultfs.set(Fault("error", op="read", errno=errno.EIO, path=f"/target/{READ_FILE}"))
    done, record = run_g1(tmp_path, tiny_site(target))
    assert done.returncode == 2, done.stdout + done.stderr
    assert record["verdict"] == "ERROR"
    measured = by_name(record)
    for name, job in READ_JOBS.items():
        note = measured[name]["note"]
        assert measured[name]["outcome"] == "ERROR", measured[name]
        assert f"job {job}" in note and "EIO" in note and str(target / READ_FILE) in note, note
    sweep = next(m for n, m in measured.items() if n.startswith("4 KiB random read IOPS"))
    assert sweep["outcome"] == "ERROR" and "EIO" in sweep["note"], sweep
    assert measured["Sequential write 1 MiB bandwidth"]["outcome"] == "PASS"
    # `kvgate run g1` judges its verify job too: its own file reads back as written
    assert measured["fio verify errors"]["outcome"] == "PASS", measured["fio verify errors"]
    assert faultfs.stats()["faults"][0]["fired"] > 0


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS])
def test_a_refused_write_is_an_error_naming_job_errno_and_file(faultfs, tmp_path,  # noqa: F811
                                                               tiny_site, code):
    """The array fills up (or goes read-only) four writes into the precondition: its job and
    the write job are ERRORs naming the errno and their files; the read jobs say they were not
    run and why."""
    said = errno.errorcode[code]
    target = faultfs.mountpoint / "target"
    faultfs.set(Fault("error", op="write", errno=code, after=4))
    done, record = run_g1(tmp_path, tiny_site(target))
    assert done.returncode == 2, done.stdout + done.stderr
    measured = by_name(record)
    write = measured["Sequential write 1 MiB bandwidth"]
    assert write["outcome"] == "ERROR", write
    assert "job seqwrite" in write["note"] and said in write["note"] \
        and str(target / WRITE_FILE) in write["note"], write["note"]
    for name in READ_JOBS:
        note = measured[name]["note"]
        assert measured[name]["outcome"] == "ERROR", measured[name]
        assert note.startswith("not run: preconditioning failed (job precondition") \
            and said in note and str(target / READ_FILE) in note, note


def demo_limits():
    thresholds, _ = load_thresholds(REPO / "thresholds.toml", "demo")
    return thresholds.g1


@pytest.mark.parametrize("fault", [
    Fault("delay", op="read", share=0.02, delay=0.04, seed=5),
    Fault("delay", op="read", share=0.02, delay=0.03, tail="pareto", alpha=1.2, max_delay=0.5,
          seed=5)], ids=["fixed", "heavy-tailed"])
def test_a_stall_on_a_share_of_reads_fails_the_qd1_p99(faultfs, tmp_path, fault):  # noqa: F811
    """2 % of 4 KiB reads stalled 30-40 ms or more: the QD1 p99 is at least the stall, above the
    demo profile's 20 ms, so it FAILs (enough I/Os remain for a p99: about 4 000 in 4 s)."""
    from gates.core.configuration import FioSettings

    fio = FioSettings(file_size="16MiB", runtime="7s", latency_runtime="4s",
                      steady_state={"criterion": "bw:50%", "window": "5s", "ramp": "1s"})
    steps = {s.key: s for s in g1_steps(fio)}
    target = faultfs.mountpoint / "target"
    target.mkdir()
    runner, evidence = SubprocessRunner(), tmp_path / "evidence"
    evidence.mkdir()
    assert run_step(runner, steps["precondition"], fio, target, evidence).ok
    faultfs.set(fault.__class__(**{**fault.__dict__, "path": f"/target/{READ_FILE}"}))
    run = run_step(runner, steps["randread-qd1"], fio, target, evidence)
    measured = _g1.qd1_latency(StepOutcome(report=run.report, error=run.error), demo_limits())
    assert measured.outcome is Outcome.FAIL, (measured.value, measured.note)
    assert measured.value >= fault.delay * 1e6  # µs
    [rule] = faultfs.stats()["faults"]
    assert rule["fired"] >= 0.01 * rule["seen"], rule


# ---- data integrity: G1's write-then-verify job --------------------------------------------

def verify_run(faultfs, tmp_path, fault=None):  # noqa: F811
    """G1's own verify step (shipped libaio, direct = true) on the fault filesystem, judged."""
    from gates.core.configuration import FioSettings

    fio = FioSettings(file_size="16MiB")
    [step] = [s for s in g1_steps(fio) if s.key == "verify"]
    target = faultfs.mountpoint / "target"
    target.mkdir()
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    if fault:
        faultfs.set(fault)
    run = run_step(SubprocessRunner(), step, fio, target, evidence)
    outcome = StepOutcome(report=run.report, error=run.error,
                          verify_failures=run.verify_failures)
    return target, run, _g1.verify_errors(outcome)


def test_bytes_flipped_on_read_in_the_verify_job_fail_naming_the_blocks(faultfs,  # noqa: F811
                                                                         tmp_path):
    """The array returns other bytes than were written (ten bytes of the fourth block):
    g1.verify_errors FAILs, counting the block and naming its offset, length and file."""
    block = 256 * 1024  # the shipped [fio] kv_block: the verify job's block
    target, run, measured = verify_run(faultfs, tmp_path, Fault(
        "flip", op="read", path=f"/target/{VERIFY_FILE}", start=3 * block + 100,
        end=3 * block + 110))
    assert measured.outcome is Outcome.FAIL, (measured.value, measured.note)
    assert measured.value == 1 and measured.id == "g1.verify_errors"
    assert f"offset {3 * block} length {block}" in measured.note \
        and str(target / VERIFY_FILE) in measured.note, measured.note
    assert not run.error, run.error  # a verify mismatch is the rule's FAIL, not a job error
    # fio runs in the target: no verify dump or *-verify.state file is left beside the data
    assert [p.name for p in target.iterdir()] == [VERIFY_FILE]


def test_three_flipped_blocks_are_each_counted(faultfs, tmp_path):  # noqa: F811
    """verify_fatal = 0 and continue_on_error = verify: every bad block is counted, not the
    first alone."""
    block = 256 * 1024
    _, _, measured = verify_run(faultfs, tmp_path, Fault(
        "flip", op="read", path=f"/target/{VERIFY_FILE}", start=3 * block + 100,
        end=5 * block + 110))
    assert measured.outcome is Outcome.FAIL and measured.value == 3, measured.note
    assert "3 blocks" in measured.note, measured.note


def test_a_clean_mount_passes_the_verify_job(faultfs, tmp_path):  # noqa: F811
    """Every byte read back as written: 0 verify errors, PASS, and the note says how much was
    checked."""
    _, run, measured = verify_run(faultfs, tmp_path)
    assert measured.outcome is Outcome.PASS, measured.note
    assert measured.value == 0 and "16 MiB" in measured.note, measured.note


def test_eio_in_the_verify_job_is_an_error_naming_job_errno_and_file(faultfs,  # noqa: F811
                                                                      tmp_path):
    """The verify job's reads fail: ERROR (nothing was verified), naming the job, EIO and the
    file — never a PASS on 0 counted mismatches."""
    target, _, measured = verify_run(faultfs, tmp_path, Fault(
        "error", op="read", errno=errno.EIO, path=f"/target/{VERIFY_FILE}"))
    assert measured.outcome is Outcome.ERROR, (measured.value, measured.note)
    assert "job verify" in measured.note and "EIO" in measured.note \
        and str(target / VERIFY_FILE) in measured.note, measured.note
