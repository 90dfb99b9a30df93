"""The G1 job set as data, and the job files it renders to."""

from __future__ import annotations

import re

import pytest

from gates.core.configuration import FioSettings
from gates.storage import bytes_needed, files_written, g1_steps
from gates.storage.jobs import (
    READ_FILE,
    VERIFY_FILE,
    WRITE_FILE,
    JobFileError,
    render_jobfile,
)

DEVICE = "/dev/disk/by-path/pci-0000:00:1f.2-nvme-1"


@pytest.fixture
def fio() -> FioSettings:
    return FioSettings(file_size="64MiB", runtime="20s", qd_sweep=[1, 4, 16],
                       qd_sweep_runtime="3s", kv_jobs=3, kv_iodepth=8, kv_block="128KiB",
                       precondition_passes=2, seq_iodepth=32,
                       steady_state={"criterion": "iops:10%", "window": "6s", "ramp": "2s"})


def options(text: str) -> dict[str, dict[str, str]]:
    """A rendered job file read back as {section: {option: value}}."""
    sections: dict[str, dict[str, str]] = {}
    current = None
    for line in text.splitlines():
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
        else:
            key, _, value = line.partition("=")
            current[key] = value
    return sections


def test_step_keys_and_jobs(fio):
    steps = g1_steps(fio)
    assert [s.key for s in steps] == ["precondition", "seqread", "seqwrite", "randread-qd1",
                                      "qd-sweep", "kvrestore", "verify"]
    assert {s.key: [j.name for j in s.jobs] for s in steps} == {
        "precondition": ["precondition"], "seqread": ["seqread"], "seqwrite": ["seqwrite"],
        "randread-qd1": ["randread-qd1"],
        "qd-sweep": ["randread-qd1", "randread-qd4", "randread-qd16"],
        "kvrestore": ["kvrestore"], "verify": ["verify"]}
    assert {s.key: s.direction for s in steps} == {
        "precondition": "write", "seqread": "read", "seqwrite": "write",
        "randread-qd1": "read", "qd-sweep": "read", "kvrestore": "read", "verify": "write"}


def test_precondition_writes_the_read_file_fully(fio):
    (job,) = g1_steps(fio)[0].jobs
    assert job.options["rw"] == "write"
    assert job.options["filename"] == READ_FILE
    assert job.options["size"] == str(64 * 1024**2)
    assert job.options["loops"] == "2"
    assert "time_based" not in job.options and "runtime" not in job.options


@pytest.mark.parametrize(("key", "rw", "filename"), [("seqread", "read", READ_FILE),
                                                     ("seqwrite", "write", WRITE_FILE)])
def test_sequential_jobs(fio, key, rw, filename):
    step = next(s for s in g1_steps(fio) if s.key == key)
    (job,) = step.jobs
    assert job.options["rw"] == rw
    assert job.options["filename"] == filename
    assert job.options["bs"] == str(1024**2)
    assert job.options["iodepth"] == "32"
    assert (job.options["time_based"], job.options["runtime"]) == ("1", "20s")
    assert (job.options["ss"], job.options["ss_dur"], job.options["ss_ramp"]) == (
        "iops:10%", "6s", "2s")
    assert step.seconds == 20


def test_qd1_job(fio):
    (job,) = next(s for s in g1_steps(fio) if s.key == "randread-qd1").jobs
    assert (job.options["rw"], job.options["bs"], job.options["iodepth"]) == (
        "randread", "4k", "1")
    assert job.options["filename"] == READ_FILE
    assert "ss" not in job.options


def test_qd_sweep_is_stonewalled(fio):
    step = next(s for s in g1_steps(fio) if s.key == "qd-sweep")
    assert [j.options["iodepth"] for j in step.jobs] == ["1", "4", "16"]
    for job in step.jobs:
        assert job.options["stonewall"] == "1"  # one depth at a time, never concurrently
        assert (job.options["rw"], job.options["bs"]) == ("randread", "4k")
        assert job.options["runtime"] == "3s"
        assert "ss" not in job.options
    assert step.seconds == 3 * 3


def test_kvrestore_job(fio):
    (job,) = next(s for s in g1_steps(fio) if s.key == "kvrestore").jobs
    assert job.options["bs"] == str(128 * 1024)
    assert (job.options["numjobs"], job.options["iodepth"]) == ("3", "8")
    assert job.options["group_reporting"] == "1"
    assert job.options["ss"] == "iops:10%"


def test_verify_job_writes_then_checks_every_block(fio):
    """crc32c in every KV-chunk block, read back and checked; every bad block counted."""
    (job,) = next(s for s in g1_steps(fio) if s.key == "verify").jobs
    assert job.options == {
        "rw": "write", "filename": VERIFY_FILE, "bs": str(128 * 1024), "iodepth": "8",
        "size": str(64 * 1024**2), "verify": "crc32c", "do_verify": "1", "verify_fatal": "0",
        "verify_dump": "0", "verify_state_save": "0", "continue_on_error": "verify"}
    small = fio.model_copy(update={"file_size": 16 * 1024**2})
    (job,) = next(s for s in g1_steps(small) if s.key == "verify").jobs
    assert job.options["size"] == str(16 * 1024**2)  # never more than [fio] file_size
    assert next(s for s in g1_steps(fio) if s.key == "verify").hosts is None  # fio runs here
    shared = fio.model_copy(update={"hosts": ["10.0.0.1", "10.0.0.2"]})
    # one writer: a second host writing the same file would be read back as corruption
    assert next(s for s in g1_steps(shared) if s.key == "verify").hosts == ["10.0.0.1"]


def test_render_pins_directory_and_plain_names(fio):
    for step in g1_steps(fio):
        text = render_jobfile(step, "/srv/array/kvgate", fio)
        parsed = options(text)
        assert parsed["global"]["directory"] == "/srv/array/kvgate"
        assert parsed["global"]["ioengine"] == "libaio"
        assert parsed["global"]["direct"] == "1"
        # a fio server would otherwise name the files "<client ip>.kvgate-read.dat"
        assert parsed["global"]["unique_filename"] == "0"
        assert list(parsed)[1:] == [j.name for j in step.jobs]
        for name, job in parsed.items():
            if name != "global":
                assert "/" not in job["filename"], (step.key, job["filename"])
                assert "directory" not in job
        assert text.count("directory=") == 1


def test_render_buffered_io(fio):
    fio.direct, fio.ioengine = False, "psync"
    parsed = options(render_jobfile(g1_steps(fio)[1], "/t", fio))
    assert (parsed["global"]["direct"], parsed["global"]["ioengine"]) == ("0", "psync")


def test_raw_device_mode(fio):
    for step in g1_steps(fio, DEVICE):
        text = render_jobfile(step, "", fio)
        assert "directory=" not in text
        for name, job in options(text).items():
            if name != "global":
                # fio splits filename at ':' (a list of files): the colons must be escaped
                assert job["filename"] == DEVICE.replace(":", "\\:")


def test_directory_colons_are_escaped(fio):
    text = render_jobfile(g1_steps(fio)[0], "/mnt/a:b", fio)
    assert "directory=/mnt/a\\:b\n" in text


@pytest.mark.parametrize("directory", ["/mnt/x#1", "/mnt/x;y", "/mnt/${HOME}", "/mnt/$ncpus",
                                       "/mnt/a\nrw=trim", "/mnt/trailing ", " /mnt/leading"])
def test_directory_fio_would_misread_is_refused(fio, directory):
    with pytest.raises(JobFileError, match="fio cannot take directory="):
        render_jobfile(g1_steps(fio)[0], directory, fio)


def test_every_value_is_one_line(fio):
    for step in g1_steps(fio):
        for line in render_jobfile(step, "/t", fio).splitlines():
            assert re.fullmatch(r"(#.*|\[[\w-]+\]|[a-z_]+=[^\n;#]*|)", line), line


def test_files_written(fio):
    assert files_written(g1_steps(fio)) == {READ_FILE, WRITE_FILE, VERIFY_FILE}
    assert all("/" not in name for name in files_written(g1_steps(fio)))
    assert files_written(g1_steps(fio, DEVICE)) == {DEVICE}


def test_bytes_needed(fio):
    assert bytes_needed(fio) == 2 * 64 * 1024**2 + 64 * 1024**2  # read, write, verify files
