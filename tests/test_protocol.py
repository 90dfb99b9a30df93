"""The arm protocol: an arm kept running for all its repetitions, against the real simulator."""

import os
import sys

import psutil
import pytest

from gates.core.configuration import Arm, WorkloadSettings
from gates.engines import ProtocolError
from gates.engines.protocol import run_arm_once, start_arm

SIM = ["{python}", "-m", "gates.sim", "--profile", "tiny", "--kv-dir", "{kv_dir}", "--port",
       "{port}"]
WORKLOAD = WorkloadSettings(contexts=2, context_tokens=256, question_tokens=8, output_tokens=4,
                            chunk_tokens=256, warmup=0)


def sim_arm(tmp_path, **extra):
    return Arm(kind="launch", engine="kvgate-sim", model="kvgate-sim-tiny", command=SIM,
               kv_dir=tmp_path / "target" / "kv", startup_timeout=60.0, stop_timeout=10.0,
               fresh_each_repetition=False, **extra)


def test_a_kept_arm_serves_every_repetition_from_one_process(tmp_path):
    arm = sim_arm(tmp_path)
    (tmp_path / "target").mkdir()
    process = start_arm("candidate", arm, tmp_path / "candidate.log", "r1", tmp_path / "target")
    try:
        pid = process.pid
        reps = [run_arm_once("candidate", arm, WORKLOAD, 1, i, log=tmp_path / f"r{i}.log",
                             kv_root=tmp_path / "target", run_id="r1", process=process)
                for i in range(2)]
        assert process.alive() and process.pid == pid  # not restarted between repetitions
    finally:
        process.stop()
    assert not process.alive()
    for r in reps:
        # The reset between repetitions and the emptied kv_dir: every probe read its KV from
        # the files of its own repetition's seed, none came from the GPU cache.
        assert r.errors == 0 and r.evidence.storage_read_tokens == r.evidence.expected_tokens == 512
        assert r.evidence.gpu_hit_tokens == 0
        assert "posix_fadvise(DONTNEED)" in r.page_cache
        assert r.evidence.process_read_bytes is not None
    assert not any((tmp_path / f"r{i}.log").exists() for i in range(2))  # one log: the kept one


def test_a_kept_arm_that_will_not_start_names_the_arm_and_its_log(tmp_path):
    arm = sim_arm(tmp_path).model_copy(update={"command": [sys.executable, "-c",
                                                           "import sys; sys.exit(3)"]})
    (tmp_path / "target").mkdir()
    try:
        start_arm("candidate", arm, tmp_path / "candidate.log", "r1", tmp_path / "target")
    except ProtocolError as exc:
        assert str(exc).startswith("arm 'candidate' (start): ") and "exited with code 3" in str(exc)
        assert "last lines of" in str(exc)
    else:
        raise AssertionError("a server that exits at once was taken for a running arm")


def test_an_arm_s_cpus_hold_the_engine_and_everything_it_forks(tmp_path):
    core = min(os.sched_getaffinity(0))
    arm = sim_arm(tmp_path).model_copy(update={"cpus": [core], "kv_dir": None})
    process = start_arm("baseline", arm, tmp_path / "baseline.log", "r1")
    try:
        assert psutil.Process(process.pid).cpu_affinity() == [core]
    finally:
        process.stop()


def test_cpus_this_host_cannot_give_are_refused_before_the_engine_starts(tmp_path):
    arm = sim_arm(tmp_path).model_copy(update={"cpus": [4096], "kv_dir": None})
    try:
        start_arm("baseline", arm, tmp_path / "baseline.log", "r1")
    except ProtocolError as exc:
        assert "cpus = [4096]: core(s) 4096 are not available" in str(exc)
    else:
        raise AssertionError("an impossible core set was accepted")
    assert not (tmp_path / "baseline.log").exists()


def test_the_device_read_signal_follows_the_kv_dir_where_it_really_leads(tmp_path):
    """#25 item 10: a kv_dir written "x/../kv" (no x) is kv; its device is still watched."""
    from gates.engines.protocol import kv_devices

    (tmp_path / "target" / "kv").mkdir(parents=True)
    plain = kv_devices(sim_arm(tmp_path), [])
    dotted = kv_devices(sim_arm(tmp_path).model_copy(
        update={"kv_dir": tmp_path / "target" / "x" / ".." / "kv"}), [])
    assert dotted == plain
    assert kv_devices(sim_arm(tmp_path), ["nvme9n1"]) == ["nvme9n1"]  # named devices win
    if not plain:
        pytest.skip(f"{tmp_path} is on no local block device (tmpfs?): nothing to watch")


def test_a_launched_arm_whose_kv_dir_cannot_be_found_is_an_error_not_a_dropped_signal(
        tmp_path):
    from gates.engines.protocol import kv_devices

    gone = sim_arm(tmp_path).model_copy(update={"kv_dir": tmp_path / "gone" / "kv"})
    with pytest.raises(ProtocolError, match=r"kv_dir .*gone/kv: cannot find the block device"):
        kv_devices(gone, [])


@pytest.mark.parametrize("blind", [{"engine": "vllm"}, {"metrics_path": "/no-metrics-here"}])
def test_an_arm_whose_counters_cannot_show_the_writes_still_waits_for_them(tmp_path, blind):
    """#27: the simulator writes its chunks from background threads (a .tmp name, renamed).
    Measured through an adapter whose write counters it does not expose, or with no readable
    /metrics at all, the counters cannot say when the writes are done, so the page-cache step
    waits for the directory itself (on the code before: a bare FileNotFoundError on a .tmp)."""
    arm = sim_arm(tmp_path).model_copy(update=blind)
    (tmp_path / "target").mkdir()
    workload = WORKLOAD.model_copy(update={"contexts": 8, "context_tokens": 1024,
                                           "chunk_tokens": 16})
    rep = run_arm_once("candidate", arm, workload, 4, 0, log=tmp_path / "r.log",
                       kv_root=tmp_path / "target", run_id="r1")
    assert rep.errors == 0
    # Every chunk of the seed (8 contexts x 1,024 / 16 tokens) left the page cache; the code
    # before dropped 500 of 512 in one run here, and the probe read the rest from memory.
    assert "on 512 KV files" in rep.page_cache and "held still" in rep.page_cache
    assert rep.evidence.kv_dir_bytes > 0
