"""Running fio: the command-runner seam, run_step on a scripted runner, then real fio runs."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gates.core.configuration import FioSettings
from gates.storage import (
    SubprocessRunner,
    ToolMissing,
    fio_version,
    g1_steps,
    parse_fio_json,
    run_step,
)
from gates.storage.fioerrors import job_errors
from gates.storage.fiorun import client_address, client_args, host_name
from gates.storage.jobs import READ_FILE
from gates.storage.runner import INSTALL_HINTS, Completed, ScriptedRunner

DATA = Path(__file__).parent / "data" / "fio"
FIO = shutil.which("fio")
needs_fio = pytest.mark.skipif(FIO is None, reason="fio is not installed (apt-get install fio)")


def tiny(**kw) -> FioSettings:
    """The smallest job set the settings allow: 8 MiB files, a 5 s steady-state window."""
    values = {"file_size": "8MiB", "runtime": "7s", "ioengine": "psync", "direct": False,
              "steady_state": {"criterion": "bw:50%", "window": "5s", "ramp": "1s"},
              "qd_sweep": [1, 2], "qd_sweep_runtime": "1s", "precondition_passes": 1,
              "timeout": "60s", **kw}
    return FioSettings(**values)


def steps(fio: FioSettings, device: str = "") -> dict:
    return {s.key: s for s in g1_steps(fio, device)}


def output_path(argv: tuple[str, ...]) -> Path:
    return Path(next(a for a in argv if a.startswith("--output=")).split("=", 1)[1])


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    target, evidence = tmp_path / "target", tmp_path / "evidence"
    target.mkdir()
    evidence.mkdir()
    return target, evidence


# ---- run_step on a scripted runner ------------------------------------------------------

def test_fio_missing_gives_the_install_hint(dirs):
    target, evidence = dirs

    def missing(argv):
        raise ToolMissing(f"'{argv[0]}' not found on PATH: {INSTALL_HINTS['fio']}")

    fio = tiny()
    run = run_step(ScriptedRunner(missing), steps(fio)["seqread"], fio, target, evidence)
    assert not run.ok and run.report is None
    assert "apt-get install fio" in run.error
    assert run.evidence == [evidence / "fio-seqread.fio"]
    assert run.evidence[0].is_file()


def test_fio_missing_for_real_gives_the_install_hint(dirs):
    target, evidence = dirs
    fio = tiny(binary=str(target / "no-such-dir" / "fio"))
    run = run_step(SubprocessRunner(), steps(fio)["precondition"], fio, target, evidence)
    assert "not found" in run.error and INSTALL_HINTS["fio"] in run.error
    with pytest.raises(ToolMissing, match="install fio"):
        fio_version(SubprocessRunner(), fio.binary)


def test_fio_under_another_name_still_gets_the_fio_hint(dirs):
    target, evidence = dirs
    fio = tiny(binary="kvgate-fio-absent")
    with pytest.raises(ToolMissing, match="apt-get install fio") as caught:
        fio_version(SubprocessRunner(), fio.binary)
    assert "'kvgate-fio-absent' not found" in str(caught.value)
    run = run_step(SubprocessRunner(), steps(fio)["seqread"], fio, target, evidence)
    assert "apt-get install fio" in run.error and "kvgate-fio-absent" in run.error


def test_timeout(dirs):
    target, evidence = dirs
    fio = tiny(timeout="30s")
    runner = ScriptedRunner(lambda argv: Completed(argv, -9, "", "", 37.0, timed_out=True))
    run = run_step(runner, steps(fio)["seqread"], fio, target, evidence)
    assert not run.ok
    assert "37 s" in run.error  # fio.timeout + the step's 7 s
    # #27: the figure is explained, with the key that sets it (it was "the 37 s timeout").
    assert "planned 7 s plus site.toml [fio] timeout = 30 s" in run.error, run.error
    assert runner.options == [{"timeout": 37.0, "cwd": target}]
    assert (evidence / "fio-seqread.log").read_text().splitlines()[1] == "exit -9"


def test_nonzero_exit_without_output_shows_stderr(dirs):
    target, evidence = dirs
    stderr = "fio: engine libaio not loadable\nfio: failed to load engine\nfio: job dropped\n"
    runner = ScriptedRunner(lambda argv: Completed(argv, 1, "", stderr))
    fio = tiny()
    run = run_step(runner, steps(fio)["seqread"], fio, target, evidence)
    assert run.report is None
    assert run.error.startswith("fio exited 1: ")
    assert "fio: engine libaio not loadable | fio: failed to load engine | fio: job dropped" \
        in run.error
    assert [p.name for p in run.evidence] == ["fio-seqread.fio", "fio-seqread.log"]
    assert "engine libaio not loadable" in (evidence / "fio-seqread.log").read_text()


def _answer_with(name: str, code: int = 0, stderr: str = ""):
    def handler(argv):
        output_path(argv).write_text((DATA / name).read_text())
        return Completed(argv, code, "", stderr)
    return handler


def test_job_error_28_is_named(dirs):
    target, evidence = dirs
    fio = tiny()
    stderr = (DATA / "job_error.stderr.txt").read_text()
    runner = ScriptedRunner(_answer_with("job_error.json", 1, stderr))
    run = run_step(runner, steps(fio)["precondition"], fio, target, evidence)
    assert not run.ok
    assert run.report is not None and run.report.jobs[0].error == 28
    # #44: the errno by name and where fio hit it (the first of its io_u error lines).
    assert run.error == ("job enospc: error 28 (ENOSPC, No space left on device) on file "
                         "/tmp/fiorec/small/f; first failed I/O on /tmp/fiorec/small/f: write "
                         "at offset 8388608, 1048576 bytes (4 failed I/Os printed)")
    names = [p.name for p in run.evidence]
    assert names == ["fio-precondition.fio", "fio-precondition.log", "fio-precondition.json"]
    assert all(p.is_file() for p in run.evidence)


def test_good_run_and_its_evidence(dirs):
    target, evidence = dirs
    fio = tiny()
    runner = ScriptedRunner(_answer_with("seqread_1m.json"))
    run = run_step(runner, steps(fio)["seqread"], fio, target, evidence)
    assert run.ok and run.error == ""
    assert run.report.jobs[0].read.bw_bytes == 1518897010
    (argv,) = runner.calls
    jobfile = evidence / "fio-seqread.fio"
    assert argv == (fio.binary, "--output-format=json+",
                    f"--output={evidence / 'fio-seqread.json'}", str(jobfile))
    assert runner.options[0]["cwd"] == target
    assert f"directory={target}\n" in jobfile.read_text()
    log = (evidence / "fio-seqread.log").read_text()
    assert log.startswith(f"$ {' '.join(argv)}\nexit 0\n")


def test_nonzero_exit_with_clean_report_is_an_error(dirs):
    target, evidence = dirs
    fio = tiny()
    runner = ScriptedRunner(_answer_with("seqread_1m.json", 1, "fio: something odd\n"))
    run = run_step(runner, steps(fio)["seqread"], fio, target, evidence)
    assert run.report is not None and not run.ok
    assert run.error == "fio exited 1: fio: something odd"


def test_an_older_report_is_never_read(dirs):
    target, evidence = dirs
    fio = tiny()
    (evidence / "fio-seqread.json").write_text((DATA / "seqread_1m.json").read_text())
    runner = ScriptedRunner(lambda argv: Completed(argv, 1, "", "fio: killed\n"))
    run = run_step(runner, steps(fio)["seqread"], fio, target, evidence)
    assert run.report is None
    assert "fio exited 1" in run.error and "killed" in run.error


def test_garbage_output_is_an_error(dirs):
    target, evidence = dirs

    def handler(argv):
        output_path(argv).write_bytes(b"\xff\xfe not json")
        return Completed(argv, 0, "", "")

    fio = tiny()
    run = run_step(ScriptedRunner(handler), steps(fio)["seqread"], fio, target, evidence)
    assert run.report is None and "no JSON object" in run.error


def test_runner_oserror_is_an_error(dirs):
    target, evidence = dirs

    def handler(argv):
        raise PermissionError(13, "Permission denied", argv[0])

    fio = tiny()
    run = run_step(ScriptedRunner(handler), steps(fio)["seqread"], fio, target, evidence)
    assert "could not start fio" in run.error and "Permission denied" in run.error


def test_unusable_target_path_never_reaches_fio(tmp_path):
    target, evidence = tmp_path / "x#y", tmp_path
    target.mkdir()
    runner = ScriptedRunner(lambda argv: pytest.fail("fio must not run"))
    fio = tiny()
    run = run_step(runner, steps(fio)["precondition"], fio, target, evidence)
    assert "fio cannot take directory=" in run.error
    assert runner.calls == [] and run.evidence == []


def test_raw_device_jobs_run_in_the_evidence_dir(dirs):
    _, evidence = dirs
    fio = tiny()
    runner = ScriptedRunner(_answer_with("seqread_1m.json"))
    run_step(runner, steps(fio, "/dev/nvme9n1")["seqread"], fio, None, evidence)
    assert runner.options[0]["cwd"] == evidence
    text = (evidence / "fio-seqread.fio").read_text()
    assert "directory=" not in text and "filename=/dev/nvme9n1\n" in text


def test_relative_paths_are_made_absolute(dirs, monkeypatch):
    target, evidence = dirs
    monkeypatch.chdir(target.parent)
    fio = tiny()
    runner = ScriptedRunner(_answer_with("seqread_1m.json"))
    run = run_step(runner, steps(fio)["seqread"], fio, Path("target"), Path("evidence"))
    assert run.ok
    (argv,) = runner.calls
    assert Path(argv[-1]).is_absolute() and output_path(argv).is_absolute()
    assert f"directory={target}\n" in Path(argv[-1]).read_text()


# ---- client/server arguments ------------------------------------------------------------

def test_client_args(tmp_path):
    jobfile = tmp_path / "fio-seqread.fio"
    fio = tiny(hosts=["10.0.0.1", "store-2", "fd00::2", "[fd00::3]", "ip6:fd00::4"],
               server_port=9000)
    assert client_args(fio, jobfile) == [
        "--client=10.0.0.1,9000", str(jobfile), "--client=store-2,9000", str(jobfile),
        "--client=ip6:fd00::2,9000", str(jobfile), "--client=ip6:fd00::3,9000", str(jobfile),
        "--client=ip6:fd00::4,9000", str(jobfile)]
    assert client_address("sock:/run/fio.sock", 9000) == "sock:/run/fio.sock"
    assert [host_name(h) for h in fio.hosts] == ["10.0.0.1", "store-2", "fd00::2", "fd00::3",
                                                 "fd00::4"]


def test_client_run_arguments(dirs):
    target, evidence = dirs
    fio = tiny(hosts=["127.0.0.1"], server_port=8765)
    runner = ScriptedRunner(_answer_with("client_server.json"))
    run = run_step(runner, steps(fio)["seqread"], fio, target, evidence)
    assert run.ok, run.error
    assert runner.calls[0][3:] == ("--client=127.0.0.1,8765", str(evidence / "fio-seqread.fio"))


def test_a_silent_server_is_an_error(dirs):
    target, evidence = dirs
    fio = tiny(hosts=["127.0.0.1", "10.9.9.9"])
    runner = ScriptedRunner(_answer_with("client_server.json"))
    run = run_step(runner, steps(fio)["seqread"], fio, target, evidence)
    assert run.error == "no results from fio server(s) 10.9.9.9"


# ---- the real command runner ------------------------------------------------------------

def test_runner_captures_output():
    done = SubprocessRunner().run([sys.executable, "-c", "import sys; print('out'); "
                                   "print('err', file=sys.stderr); sys.exit(3)"], timeout=30)
    assert (done.returncode, done.stdout, done.stderr, done.timed_out) == (3, "out\n", "err\n",
                                                                          False)


def test_runner_survives_bytes_that_are_not_utf8():
    done = SubprocessRunner().run([sys.executable, "-c", "import sys; "
                                   "sys.stdout.buffer.write(b'ok \\xff\\xfe')"], timeout=30)
    assert done.returncode == 0 and done.stdout.startswith("ok ")


def test_runner_kills_on_timeout():
    ticks: list[float] = []
    done = SubprocessRunner(tick_interval=0.05).run(["sleep", "30"], timeout=0.3,
                                                    on_tick=ticks.append)
    assert done.timed_out and done.returncode == -9
    assert ticks and ticks == sorted(ticks)


def test_runner_missing_cwd_is_not_a_missing_tool(tmp_path):
    with pytest.raises(FileNotFoundError):
        SubprocessRunner().run(["true"], timeout=10, cwd=tmp_path / "gone")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_runner_kills_the_child_when_interrupted(tmp_path):
    pidfile = tmp_path / "pid"

    def interrupt(elapsed: float) -> None:
        if pidfile.exists() and pidfile.read_text().strip():
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        SubprocessRunner(tick_interval=0.05).run(
            ["sh", "-c", f"echo $$ > {pidfile}; exec sleep 30"], timeout=30, on_tick=interrupt)
    assert _gone(int(pidfile.read_text()))


PARENT = """
import sys
from gates.storage import SubprocessRunner
SubprocessRunner().run(["sh", "-c", f"echo $$ > {sys.argv[1]}; exec sleep 60"], timeout=120)
"""


def _wait_for(found, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if result := found():
            return result
        time.sleep(0.1)
    pytest.fail(f"{what} did not happen within {seconds:g} s")


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _kill_leftovers(pids) -> None:
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()


def test_the_runners_child_dies_when_kvgate_is_killed(tmp_path):
    pidfile = tmp_path / "pid"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(pidfile)])
    child = 0
    try:
        child = _wait_for(lambda: pidfile.exists() and pidfile.read_text().strip()
                          and int(pidfile.read_text()), 30, "the child starting")
        assert _alive(child)
        parent.kill()  # kill -9: no handler, no finally of kvgate's runs
        parent.wait(timeout=10)
        _wait_for(lambda: not _alive(child), 5, f"the child {child} ending with its parent")
    finally:
        parent.kill()
        _kill_leftovers([child] if child else [])


def _fio_under(kvgate: psutil.Process) -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        return [p for p in kvgate.children(recursive=True) if p.name() == "fio"]
    return []


def _cmdline(process: psutil.Process) -> str:
    """A process's command line, or "" once it has ended (fio's precondition job ends as
    seqread starts: its zombie has no command line to read)."""
    with contextlib.suppress(psutil.Error):
        return " ".join(process.cmdline())
    return ""


@needs_fio
def test_kill_9_of_kvgate_during_g1_leaves_no_fio(tmp_path, repo, tiny_site):
    """The reported case: kvgate killed mid-job, fio must not go on writing the target."""
    # A long job that steady state cannot end early: without the fix fio would run 60 s more.
    site = tiny_site(tmp_path / "target")
    assert 'runtime = "7s"' in site and 'criterion = "bw:50%"' in site
    site = site.replace('runtime = "7s"', 'runtime = "60s"').replace(
        'criterion = "bw:50%"', 'criterion = "bw:0.001%"')
    (tmp_path / "site.toml").write_text(site)
    kvgate = subprocess.Popen([sys.executable, "-m", "gates.cli", "run", "g1", "--site",
                               str(tmp_path / "site.toml"), "--thresholds",
                               str(repo / "thresholds.toml"), "--out", str(tmp_path / "reports")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen: set[int] = set()
    try:
        parent = psutil.Process(kvgate.pid)

        def seqread_workers():
            fio = _fio_under(parent)
            seen.update(p.pid for p in fio)
            return len(fio) >= 2 and any("fio-seqread" in _cmdline(p) for p in fio)

        _wait_for(seqread_workers, 120, "fio's sequential-read job (with its worker) starting")
        kvgate.kill()
        kvgate.wait(timeout=10)
        _wait_for(lambda: not any(map(_alive, seen)), 5,
                  f"every fio process of the killed run ({sorted(seen)}) ending")
    finally:
        kvgate.kill()
        _kill_leftovers(seen)


# ---- real fio ---------------------------------------------------------------------------

@needs_fio
def test_fio_version():
    assert fio_version(SubprocessRunner()).startswith("fio-")


@needs_fio
def test_real_precondition_then_seqread(dirs):
    target, evidence = dirs
    fio = tiny()
    runner = SubprocessRunner()
    pre = run_step(runner, steps(fio)["precondition"], fio, target, evidence)
    assert pre.ok, pre.error
    assert pre.report.named("precondition")[0].write.io_bytes == 8 * 1024**2
    read = run_step(runner, steps(fio)["seqread"], fio, target, evidence)
    assert read.ok, read.error
    (job,) = read.report.named("seqread")
    assert job.read.bw_bytes > 0
    assert job.steadystate is not None and len(job.steadystate.data.bw) == 5
    assert sorted(p.name for p in target.iterdir()) == [READ_FILE]
    assert all(p.name.startswith("kvgate-") and p.suffix == ".dat" for p in target.iterdir())
    assert sorted(p.name for p in evidence.iterdir()) == [
        "fio-precondition.fio", "fio-precondition.json", "fio-precondition.log",
        "fio-seqread.fio", "fio-seqread.json", "fio-seqread.log"]


@needs_fio
def test_real_qd_sweep_is_one_depth_at_a_time(dirs):
    target, evidence = dirs
    fio = tiny()
    run = run_step(SubprocessRunner(), steps(fio)["qd-sweep"], fio, target, evidence)
    assert run.ok, run.error
    assert [(j.jobname, j.groupid) for j in run.report.jobs] == [("randread-qd1", 0),
                                                                 ("randread-qd2", 1)]
    assert all(j.read.iops > 0 for j in run.report.jobs)
    assert [p.name for p in target.iterdir()] == [READ_FILE]


@needs_fio
def test_real_target_with_a_colon(tmp_path):
    target = tmp_path / "array:1"
    target.mkdir()
    fio = tiny()
    run = run_step(SubprocessRunner(), steps(fio)["precondition"], fio, target, tmp_path)
    assert run.ok, run.error
    assert [p.name for p in target.iterdir()] == [READ_FILE]
    assert (target / READ_FILE).stat().st_size == 8 * 1024**2


@needs_fio
def test_real_enospc(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs")
    small = tmp_path / "small"
    small.mkdir()
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4M", "tmpfs", str(small)],
                           capture_output=True, text=True)
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mount.stderr.strip()}")
    try:
        fio = tiny(file_size="16MiB")
        run = run_step(SubprocessRunner(), steps(fio)["precondition"], fio, small, tmp_path)
        assert not run.ok
        assert "No space left on device" in run.error, run.error
        assert [p.name for p in run.evidence] == [
            "fio-precondition.fio", "fio-precondition.log", "fio-precondition.json"]
        assert all(p.is_file() for p in run.evidence)
        assert "No space left on device" in (tmp_path / "fio-precondition.log").read_text()
    finally:
        done = subprocess.run(["umount", str(small)], capture_output=True)
        if done.returncode != 0:
            subprocess.run(["umount", "-l", str(small)], capture_output=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_port(port: int, server: subprocess.Popen, seconds: float = 5) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.skip(f"fio --server exited: {server.stderr.read()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    pytest.skip(f"fio --server did not listen on port {port}")


@needs_fio
def test_real_client_server_on_loopback(dirs):
    target, evidence = dirs
    port = _free_port()
    server = subprocess.Popen([FIO, f"--server=ip:127.0.0.1,{port}"], cwd=target.parent,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_port(port, server)
        fio = tiny(hosts=["127.0.0.1"], server_port=port)
        step = steps(fio)["qd-sweep"]
        jobfile = evidence / "fio-qd-sweep.fio"
        assert client_args(fio, jobfile) == [f"--client=127.0.0.1,{port}", str(jobfile)]
        run = run_step(SubprocessRunner(), step, fio, target, evidence)
        assert run.ok, run.error
        report = run.report
        assert report.jobs == [] and report.client_stats
        assert report.hosts() == ["127.0.0.1"]
        assert [(e.jobname, e.hostname, e.port) for e in report.entries()] == [
            ("randread-qd1", "127.0.0.1", port), ("randread-qd2", "127.0.0.1", port)]
        assert all(e.read.iops > 0 for e in report.entries())
        assert [p.name for p in target.iterdir()] == [READ_FILE]
    finally:
        server.terminate()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=5)


def test_jobs_sharing_a_file_are_each_named_and_the_first_failed_io_is_the_file_s():
    """fio's io_u error lines name a file, not a job: where two jobs of a step read one file
    (the queue-depth sweep) each job is named with its errno and file, and the offset is said
    of the file, never pinned on one job."""
    fio = tiny(qd_sweep=[1, 4])
    report = parse_fio_json(json.dumps({"jobs": [
        {"jobname": "randread-qd1", "error": 5}, {"jobname": "randread-qd4", "error": 5}]}))
    stderr = ("fio: io_u error on file /t/kvgate-read.dat: Input/output error: read "
              "offset=4096, buflen=4096\n"
              "fio: io_u error on file /t/kvgate-read.dat: Input/output error: read "
              "offset=8192, buflen=4096\n")
    said = job_errors(report, steps(fio)["qd-sweep"], stderr, "/t")
    assert said == (
        "job randread-qd1: error 5 (EIO, Input/output error) on file /t/kvgate-read.dat; "
        "job randread-qd4: error 5 (EIO, Input/output error) on file /t/kvgate-read.dat; "
        "first failed I/O on /t/kvgate-read.dat: read at offset 4096, 4096 bytes "
        "(2 failed I/Os printed)")
    # fio's own error codes above errno's, and a job without io_u lines: the file still named
    report = parse_fio_json(json.dumps({"jobs": [{"jobname": "seqwrite", "error": 200}]}))
    assert job_errors(report, steps(fio)["seqwrite"], "", "/t") == (
        "job seqwrite: error 200 (fio error) on file /t/kvgate-write.dat")
