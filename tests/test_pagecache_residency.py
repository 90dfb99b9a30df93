"""#43 case 3: the page-cache drop is measured (mincore), not believed, and a target whose
devices cannot be watched says so in the evidence chain. Real files, real mincore, real tmpfs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gates.core.verdicts import Cause
from gates.inference import Repetition, drop_page_cache, g3_chains
from gates.proof import ProofContext, judge_chain

MiB = 1 << 20
SHM = Path("/dev/shm")


def _fstype(path: Path) -> str:
    st = os.stat(path)
    number = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[2] == number:
            return fields[fields.index("-", 6) + 1]
    return ""


def _shm_dir(tmp_path: Path) -> Path:
    if not SHM.is_dir() or _fstype(SHM) != "tmpfs":
        pytest.skip("/dev/shm is not a tmpfs here")
    where = SHM / f"kvgate-test-{os.getpid()}-{tmp_path.name}"
    where.mkdir()
    return where


@pytest.fixture
def shm(tmp_path):
    where = _shm_dir(tmp_path)
    yield where
    shutil.rmtree(where, ignore_errors=True)


def _cached_file(path: Path, size: int) -> None:
    path.write_bytes(os.urandom(size))
    with path.open("rb") as f:  # read back: every page is in the page cache now
        while f.read(MiB):
            pass


def test_residency_is_measured_on_real_files_before_and_after_the_drop(tmp_path):
    if _fstype(tmp_path) in ("tmpfs", ""):
        pytest.skip(f"{tmp_path} is on tmpfs: DONTNEED cannot take effect there")
    _cached_file(tmp_path / "a.bin", 4 * MiB)
    _cached_file(tmp_path / "b.bin", 3 * MiB + 123)  # a tail that ends inside a page
    drop = drop_page_cache(tmp_path)
    assert (drop.files, drop.bytes) == (2, 7 * MiB + 123)
    assert drop.resident_before == 7 * MiB + 123  # written and read: all cached
    assert drop.resident_after == 0 and drop.verified and drop.failure() == ""
    assert drop.deviation("of repetition 1") is None  # a verified drop deviates from nothing
    assert "0 after, of 7,340,155 bytes in 2 KV files" in drop.line()
    if shutil.which("fincore"):  # util-linux's own count agrees with ours, where it is installed
        said = subprocess.run(["fincore", "--bytes", "--raw", "--noheadings", "-o", "RES",
                               str(tmp_path / "a.bin")], capture_output=True, text=True)
        assert said.returncode == 0 and int(said.stdout) == 0


def test_the_mincore_seam_counts_what_util_linux_fincore_counts(tmp_path):
    from gates.inference.residency import resident_bytes

    if not shutil.which("fincore"):
        pytest.skip("util-linux fincore is not installed: no second opinion here")
    path = tmp_path / "half.bin"
    _cached_file(path, 8 * MiB)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 4 * MiB, os.POSIX_FADV_DONTNEED)  # drop the first half only
        ours = resident_bytes(fd)
    finally:
        os.close(fd)
    said = subprocess.run(["fincore", "--bytes", "--raw", "--noheadings", "-o", "RES",
                           str(path)], capture_output=True, text=True, check=True)
    assert ours == int(said.stdout)
    if _fstype(tmp_path) != "tmpfs":
        assert ours == 4 * MiB


def test_a_drop_on_tmpfs_cannot_take_effect_and_says_how_many_bytes_stayed(shm):
    # tmpfs pages are the file itself: DONTNEED leaves every one of them.
    _cached_file(shm / "ctx-0000.bin", 2 * MiB)
    drop = drop_page_cache(shm)
    assert drop.resident_after == drop.bytes == 2 * MiB and not drop.verified
    why = drop.failure()
    assert "did not take effect: 2,097,152 of 2,097,152 bytes" in why and "mincore" in why
    found = drop.deviation("of repetition 1 at concurrency 8")
    assert found is not None and found.cause is Cause.PAGE_CACHE_KEPT and found.blocks
    assert found.text.startswith("page cache not dropped before the probe of repetition 1 at "
                           "concurrency 8: the drop did not take effect: 2,097,152 of")


def test_a_file_kept_mapped_and_locked_stays_resident_and_is_named(tmp_path):
    """Another process maps and mlocks one KV file (an engine holding its cache mapped)."""
    (tmp_path / "kv").mkdir()
    locked, free = tmp_path / "kv" / "locked.bin", tmp_path / "kv" / "free.bin"
    _cached_file(locked, MiB)
    _cached_file(free, MiB)
    ready = tmp_path / "ready"
    holder = subprocess.Popen([sys.executable, "-c", f"""
import ctypes, mmap, os, time
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
libc.mlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
fd = os.open({str(locked)!r}, os.O_RDONLY)
addr = libc.mmap(None, {MiB}, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
rc = libc.mlock(addr, {MiB})  # faults every page in and keeps it there
open({str(ready)!r}, 'w').write(str(rc))
time.sleep(60)
"""])
    try:
        deadline = time.monotonic() + 30
        while not (ready.exists() and ready.read_text()) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert ready.read_text() == "0", "mlock refused (RLIMIT_MEMLOCK below 1 MiB?)"
        drop = drop_page_cache(tmp_path / "kv")
    finally:
        holder.kill()
        holder.wait()
    if _fstype(tmp_path) != "tmpfs":
        assert drop.resident_after == MiB  # the locked file's pages; the free one's left
    assert not drop.verified
    assert f"{drop.resident_after:,} of {2 * MiB:,} bytes" in drop.failure()


MEASURED = dict(arm="candidate", concurrency=1, repetition=0, ttfts=[1.0],
                output_throughput=10.0, sent=1, errors=0, expected_kv_tokens=1000,
                storage_read_tokens=1000.0, gpu_hit_tokens=0.0, probe_seconds=1.0,
                process_read_bytes=1000 * 8192, kv_dir="/t/kv", kv_dir_bytes=1000 * 8192,
                page_cache="posix_fadvise(DONTNEED) after fsync on 4 KV files (8.2 MB)")


def _chain(**update):
    rep = Repetition.model_validate({**MEASURED, **update})
    return g3_chains([rep], [], ProofContext(memory_bytes=24 << 30), 8192)[1]


def test_a_drop_believed_from_its_description_no_longer_rules_memory_out():
    """The measured case: no watched device, the engine's reads seen in /proc/PID/io alone, a
    working set that fits in memory. The drop's text once ruled memory out (a signed PASS)."""
    chain = _chain()
    [ws] = [s for s in chain if s.signal == "Probe KV working set vs memory"]
    assert not ws.rules_out_memory and "not measured" in ws.note
    verdict = judge_chain(chain)
    assert verdict.inconclusive, verdict


def test_an_unverified_drop_is_named_by_its_bytes_in_the_controls_and_a_verified_one_counts():
    from gates.proof import CacheDrop

    left = CacheDrop(how="dropped", files=4, bytes=8_192_000, resident_before=8_192_000,
                     resident_after=4_096_000)
    chain = _chain(evidence={**_chain_evidence(), "page_cache": left.model_dump()})
    [ws] = [s for s in chain if s.signal == "Probe KV working set vs memory"]
    assert not ws.rules_out_memory and "4,096,000 of 8,192,000 bytes" in ws.note
    [row] = [s for s in chain if s.signal.startswith("page cache of the KV files")]
    assert row.value == 4_096_000 and "4,096,000 after" in row.note
    assert judge_chain(chain).inconclusive
    done = left.model_copy(update={"resident_after": 0})
    chain = _chain(evidence={**_chain_evidence(), "page_cache": done.model_dump()})
    [ws] = [s for s in chain if s.signal == "Probe KV working set vs memory"]
    assert ws.rules_out_memory and "verified" in ws.note
    assert not judge_chain(chain).inconclusive


def _chain_evidence() -> dict:
    return Repetition.model_validate(MEASURED).evidence.model_dump()


def test_a_target_on_tmpfs_says_its_devices_could_not_be_watched(shm, tmp_path):
    """The real simulator on a kv_dir in tmpfs: no block device for kvgate to watch. The
    chain says so by name (it was silent, and g3.device_reads NOT APPLICABLE), and the drop
    that tmpfs cannot honour is a deviation naming its bytes."""
    from test_protocol import WORKLOAD, sim_arm

    from gates.core.configuration import G3Limits
    from gates.core.verdicts import Outcome
    from gates.engines.protocol import run_arm_once
    from gates.proof import storage_proof

    arm = sim_arm(shm)
    (shm / "target").mkdir()
    rep = run_arm_once("candidate", arm, WORKLOAD, 1, 0, log=tmp_path / "r.log",
                       kv_root=shm / "target", run_id="r1")
    assert rep.errors == 0
    why = rep.evidence.devices_unwatched
    assert "tmpfs" in why and str(shm / "target" / "kv") in why
    chain = g3_chains([rep], [], ProofContext(memory_bytes=24 << 30), 1024)[1]
    [row] = [s for s in chain if s.signal == "block devices"]
    assert row.agreement == "inconclusive" and "could not be watched" in row.note
    # tmpfs is memory: the process read nothing from storage, so the chain cannot pass either
    assert "tmpfs" in row.note and judge_chain(chain).outcome is not Outcome.PASS
    [devices] = [m for m in storage_proof(1, [rep.evidence], G3Limits(), 1024)
                 if m.id == "g3.device_reads"]
    assert devices.outcome is Outcome.ERROR and "could not be watched" in devices.note
    drop = rep.evidence.page_cache
    assert drop is not None and not drop.verified and drop.resident_after == drop.bytes > 0
    assert f"{drop.bytes:,} of {drop.bytes:,} bytes" in str(drop.deviation("of repetition 1"))


def test_an_unwatched_target_does_not_pass_on_proc_pid_io_alone_even_with_a_verified_drop():
    """The engine may read a copy of its KV from a disk outside the target: /proc/PID/io
    counts that too. Only the target's devices (or its storage NICs) can say whose reads."""
    from gates.proof import CacheDrop, StorageReads

    done = CacheDrop(how="dropped", files=4, bytes=8_192_000, resident_before=8_192_000,
                     resident_after=0)
    why = "kv_dir /t/kv is on fuse.sshfs (device 0:52), with no local block device"
    unwatched = {**_chain_evidence(), "page_cache": done.model_dump(), "devices_unwatched": why}
    chain = _chain(evidence=unwatched)
    [row] = [s for s in chain if s.signal == "block devices"]
    assert row.agreement == "inconclusive" and why in row.note
    verdict = judge_chain(chain)
    assert verdict.inconclusive and "could not be watched" in verdict.reason
    # A network filesystem whose storage NICs are watched: they carry the storage side.
    wired = {**unwatched, "storage": StorageReads(nic_bytes=8_192_000).model_dump()}
    chain = _chain(evidence=wired)
    [row] = [s for s in chain if s.signal == "block devices"]
    assert row.agreement == "not exposed" and why in row.note and "storage NICs" in row.note
    assert not judge_chain(chain).inconclusive


SIM_PROOF = ["proof", "--engine", "kvgate-sim",
             "--before", "tests/data/metrics/kvgate-sim.before.prom",
             "--after", "tests/data/metrics/kvgate-sim.after.prom", "--expected-tokens", "65536",
             "--kv-bytes-per-token", "1024", "--process-bytes", "67108864", "--memory", "24GiB"]


@pytest.mark.parametrize("extra, code, said", [
    # The site's word alone: it once passed on /proc/PID/io alone (exit 0).
    (["--page-cache-dropped"], 2, "the residency of the KV files was not measured"),
    # What the site measured after its drop (fincore --bytes): the bytes decide.
    (["--page-cache-bytes", "67108864", "--page-cache-resident", "67108864"], 2,
     "67,108,864 of 67,108,864 bytes"),
    (["--page-cache-bytes", "67108864", "--page-cache-resident", "0"], 0, "verified by mincore"),
])
def test_kvgate_proof_believes_a_drop_only_as_measured(capsys, monkeypatch, extra, code, said):
    from gates.cli import main

    monkeypatch.chdir(Path(__file__).parent.parent)
    assert main(SIM_PROOF + extra) == code
    assert said in capsys.readouterr().out


def test_kvgate_proof_refuses_half_a_residency_measurement(capsys, monkeypatch):
    from gates.cli import main

    monkeypatch.chdir(Path(__file__).parent.parent)
    assert main(SIM_PROOF + ["--page-cache-resident", "0"]) == 2
    out = capsys.readouterr()
    assert "--page-cache-bytes" in out.out + out.err


def test_a_file_that_cannot_be_mapped_is_named_and_the_drop_is_not_believed(tmp_path, monkeypatch):
    """A FUSE filesystem mounted direct_io refuses mmap (ENODEV): mincore cannot look, so the
    drop is unverified and says which file and why (the seam raises as the real one would)."""
    import errno

    from gates.inference import pagecache

    def refused(fd):
        raise OSError(errno.ENODEV, "mmap: No such device")

    _cached_file(tmp_path / "ctx-0000.bin", 8192)
    monkeypatch.setattr(pagecache, "resident_bytes", refused)
    drop = drop_page_cache(tmp_path)
    assert drop.unmeasured == ["ctx-0000.bin: mmap: No such device (errno 19)"]
    assert not drop.verified and drop.resident_after == 0 and drop.bytes == 8192
    assert "1 files could not be measured: ctx-0000.bin: mmap: No such device" in drop.failure()
