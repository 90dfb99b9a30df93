"""gates.storage.devref: the KV device's short KV-restore read between repetitions (real fio)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gates.core.configuration import FioSettings
from gates.storage import DeviceReader, SubprocessRunner
from gates.storage.devref import REFERENCE_BYTES, REFERENCE_FILE, reference_steps
from gates.storage.runner import Completed, ScriptedRunner

needs_fio = pytest.mark.skipif(shutil.which("fio") is None,
                               reason="fio is not installed (apt-get install fio)")


def settings(**kw) -> FioSettings:
    values = {"file_size": "8MiB", "runtime": "7s", "ioengine": "psync", "direct": False,
              "steady_state": {"criterion": "bw:50%", "window": "5s", "ramp": "1s"},
              "kv_block": "128KiB", "kv_jobs": 2, "kv_iodepth": 1, "timeout": "60s",
              "hosts": ["fio-server-a"], **kw}
    return FioSettings(**values)


def test_the_read_is_g1s_kv_restore_pattern_shortened_on_its_own_file():
    write, read = reference_steps(settings(), 0.5)
    job = read.jobs[0].options
    assert (job["rw"], job["bs"], job["numjobs"], job["iodepth"]) == ("randread", "131072",
                                                                     "2", "1")
    assert job["runtime"] == "0.5s" and job["time_based"] == "1"
    assert job["filename"] == write.jobs[0].options["filename"] == REFERENCE_FILE
    assert write.jobs[0].options["size"] == job["size"] == str(REFERENCE_BYTES)


def test_a_kv_block_larger_than_the_file_reads_the_file():
    _, read = reference_steps(settings(kv_block="1GiB", file_size="2GiB"), 1.0)
    assert read.jobs[0].options["bs"] == str(REFERENCE_BYTES)


def test_the_reader_runs_here_with_o_direct_whatever_g1s_hosts_and_direct(tmp_path):
    seen = []

    def fio(argv):
        seen.append(argv)
        return Completed(argv=tuple(argv), returncode=1, stderr="no")
    reader = DeviceReader(runner=ScriptedRunner(fio), fio=settings(), target=tmp_path,
                          evidence_dir=tmp_path, seconds=0.5)
    speed, why = reader()
    assert speed is None and why.startswith("the KV device reference could not write its file")
    assert not any(a.startswith("--client") for a in seen[0])
    jobfile = next(Path(a) for a in seen[0] if a.endswith(".fio"))
    assert "direct=1" in jobfile.read_text()


@needs_fio
def test_a_real_reading_is_a_speed_and_keeps_its_evidence(tmp_path):
    target, evidence = tmp_path / "target", tmp_path / "evidence"
    target.mkdir()
    evidence.mkdir()
    kept: list[Path] = []
    reader = DeviceReader(runner=SubprocessRunner(), fio=settings(ioengine="psync"),
                          target=target, evidence_dir=evidence, seconds=0.3, keep=kept.append,
                          label="g2-devref")
    first, why = reader()
    second, why2 = reader()
    if why and "Invalid argument" in why:  # a filesystem without O_DIRECT (tmpfs)
        pytest.skip(f"this filesystem takes no O_DIRECT: {why}")
    assert not why and not why2 and first > 0 and second > 0
    assert (target / REFERENCE_FILE).stat().st_size == REFERENCE_BYTES
    names = sorted(p.name for p in kept)
    # written once, then read twice: each step's job file, JSON and log, numbered in order
    assert "fio-g2-devref-1.fio" in names and "fio-g2-devref-3.json" in names
    assert not any(n.startswith("fio-g2-devref-4") for n in names)
    assert all(p.parent == evidence for p in kept)


@needs_fio
def test_a_target_that_vanished_is_a_reason_not_a_traceback(tmp_path):
    reader = DeviceReader(runner=SubprocessRunner(), fio=settings(),
                          target=tmp_path / "gone", evidence_dir=tmp_path, seconds=0.3)
    speed, why = reader()
    assert speed is None and "the KV device reference could not write its file" in why
