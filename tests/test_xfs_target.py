"""The real G1 fio job set on a real XFS (striped like a RAID, on a loop device): it runs, it
measures, and it writes nothing on the filesystem but its own two files in the target dir."""

from __future__ import annotations

import os
from pathlib import Path

from _loopdev import loop_device, mkfs_xfs, mounted, need_root

from gates.core.configuration import FioSettings, Target
from gates.storage import (
    SubprocessRunner,
    bytes_needed,
    files_written,
    g1_steps,
    resolve_target,
    run_step,
)
from gates.storage.jobs import READ_FILE, VERIFY_FILE, WRITE_FILE

GiB = 1024**3


def tiny_fio() -> FioSettings:
    """The smallest G1 settings that still exercise every step, steady state included."""
    return FioSettings.model_validate({
        "file_size": "32MiB",
        # The shortest steady-state window the settings accept, and no more runtime than it
        # needs: runtime >= ramp + window + 1 s.
        "steady_state": {"window": "5s", "ramp": "1s"},
        "runtime": "7s",
        "qd_sweep": [1, 4],
        "qd_sweep_runtime": "1s",
        "latency_runtime": "3s",  # the default 30 s would be most of the test's time
        "precondition_passes": 1,
        "timeout": "60s",
    })


def everything_under(root: Path) -> set[str]:
    """Every file and directory below root, relative to it."""
    found = set()
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            found.add((Path(folder) / name).relative_to(root).as_posix())
    return found


def test_g1_fio_steps_on_real_xfs(tmp_path):
    need_root("losetup", "mkfs.xfs", "mount", "fio")
    fio = tiny_fio()
    evidence = tmp_path / "evidence"  # outside the filesystem under test
    evidence.mkdir()
    with loop_device(tmp_path / "xfs.img", 1 * GiB) as loopdev:
        mkfs_xfs(loopdev, "-d", "su=64k,sw=4")
        with mounted(loopdev, tmp_path / "mnt") as mnt:
            target = Target(directory=mnt / "kvgate", create=True)
            directory, device = resolve_target(target, bytes_needed(fio),
                                               files_written(g1_steps(fio)),
                                               destructive=False, typed_serial="")
            assert (directory, device) == (mnt / "kvgate", "")

            runner = SubprocessRunner()
            runs = {step.key: run_step(runner, step, fio, directory, evidence)
                    for step in g1_steps(fio)}

            failed = {key: run.error for key, run in runs.items() if not run.ok}
            assert not failed, failed
            seqread = runs["seqread"].report.named("seqread")
            assert seqread and seqread[0].read.bw_bytes > 0
            assert runs["seqwrite"].report.named("seqwrite")[0].write.bw_bytes > 0
            assert {j.jobname for j in runs["qd-sweep"].report.entries()} == {
                "randread-qd1", "randread-qd4"}
            # Nothing but our three files (read, write, verify), in the target directory.
            assert everything_under(mnt) == {"kvgate", f"kvgate/{READ_FILE}",
                                             f"kvgate/{WRITE_FILE}", f"kvgate/{VERIFY_FILE}"}
            assert (directory / READ_FILE).stat().st_size == fio.file_size
    # The evidence of every step stayed outside the target.
    assert {p.name for p in evidence.iterdir()} >= {
        f"fio-{step.key}.{ext}" for step in g1_steps(fio) for ext in ("fio", "json", "log")}


def test_tiny_settings_are_valid():
    # Fast guard: the integration test's own settings still pass _settings' validators.
    fio = tiny_fio()
    assert fio.runtime >= fio.steady_state.ramp + fio.steady_state.window + 1
    assert fio.file_size == 32 * 1024**2
