"""The fault filesystem itself (tests/faultfs/): the rules on their own, then each fault mode on
a real FUSE mount, seen through plain system calls as an engine or fio would see them."""

from __future__ import annotations

import contextlib
import errno
import os
import random
import time
from pathlib import Path

import pytest
from faultfs import Fault, FaultTable, flipped, missing, mounted
from faultfs.faults import delay_of
from faultfs.fixture import faultfs  # noqa: F401  (the fixture)

BLOCK = 4096


def payload(n: int, seed: int = 7) -> bytes:
    return random.Random(seed).randbytes(n)


def write_file(fs, name: str, data: bytes) -> Path:
    path = fs.mountpoint / name
    path.write_bytes(data)
    return path


def reads(path: Path, count: int, size: int = BLOCK) -> list[int | OSError]:
    """``count`` reads of ``size`` bytes at offset 0, each one's length or its error."""
    fd = os.open(path, os.O_RDONLY)
    out: list[int | OSError] = []
    try:
        for _ in range(count):
            try:
                out.append(len(os.pread(fd, size, 0)))
            except OSError as exc:
                out.append(exc)
    finally:
        os.close(fd)
    return out


# ---- the rules alone (no FUSE) -----------------------------------------------------------

def test_a_rule_fires_after_n_matching_operations_and_clears_after_times():
    table = FaultTable()
    table.set([Fault("error", op="read", errno=errno.EIO, after=2, times=3)])
    got = [table.decide("read", "/f", 0, BLOCK).errno for _ in range(7)]
    assert got == [0, 0, errno.EIO, errno.EIO, errno.EIO, 0, 0]
    assert table.decide("write", "/f", 0, BLOCK).errno == 0  # writes are not counted
    assert table.stats()["faults"][0]["seen"] == 7 and table.stats()["ops"]["write"] == 1


def test_a_rule_matches_its_byte_range_and_path_only():
    table = FaultTable()
    table.set([Fault("error", errno=errno.ENOSPC, path="/kv/*", start=8192, end=12288)])
    assert table.decide("write", "/kv/a", 8192, BLOCK).errno == errno.ENOSPC
    assert table.decide("read", "/kv/a", 12287, 1).errno == errno.ENOSPC
    assert table.decide("write", "/kv/a", 4096, BLOCK).errno == 0  # ends where the range starts
    assert table.decide("write", "/kv/a", 12288, BLOCK).errno == 0
    assert table.decide("write", "/other", 8192, BLOCK).errno == 0


def test_flipped_inverts_exactly_the_range_given_in_file_offsets():
    data = bytes(range(16))
    out = flipped(data, 100, [(104, 107), (90, 101)])
    assert [i for i in range(16) if out[i] != data[i]] == [0, 4, 5, 6]
    assert all(out[i] == data[i] ^ 0xFF for i in (0, 4, 5, 6))


def test_a_heavy_tailed_delay_is_never_below_its_minimum_and_often_far_above():
    fault = Fault("delay", delay=0.01, tail="pareto", alpha=1.5, max_delay=1.0)
    rng = random.Random(3)
    delays = [delay_of(fault, rng) for _ in range(2000)]
    assert min(delays) >= 0.01 and max(delays) <= 1.0
    # P(X > 3 x_min) = 3^-1.5 = 0.19 for a Pareto of shape 1.5: about 385 of 2000.
    assert 250 < sum(d > 0.03 for d in delays) < 520


def test_a_rule_that_cannot_be_met_is_refused():
    with pytest.raises(ValueError, match="flip applies to reads only"):
        Fault("flip", op="write")
    with pytest.raises(ValueError, match="share 1.5"):
        Fault("delay", share=1.5)


# ---- on a real mount -----------------------------------------------------------------------

def test_a_read_after_n_operations_returns_the_errno(faultfs):  # noqa: F811
    path = write_file(faultfs, "a.dat", payload(BLOCK))
    faultfs.set(Fault("error", op="read", errno=errno.EIO, after=3))
    got = reads(path, 5)
    assert got[:3] == [BLOCK] * 3
    assert all(isinstance(e, OSError) and e.errno == errno.EIO for e in got[3:]), got


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EIO])
def test_a_write_after_n_operations_returns_the_errno(faultfs, code):  # noqa: F811
    faultfs.set(Fault("error", op="write", errno=code, after=2))
    fd = os.open(faultfs.mountpoint / "w.dat", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        assert os.pwrite(fd, payload(BLOCK), 0) == BLOCK
        assert os.pwrite(fd, payload(BLOCK), BLOCK) == BLOCK
        with pytest.raises(OSError) as raised:
            os.pwrite(fd, payload(BLOCK), 2 * BLOCK)
    finally:
        os.close(fd)
    assert raised.value.errno == code
    assert (faultfs.backing / "w.dat").stat().st_size == 2 * BLOCK  # nothing of the third
    assert reads(faultfs.mountpoint / "w.dat", 1) == [BLOCK]  # reads are untouched


def test_an_error_on_a_byte_range_spares_the_rest_of_the_file(faultfs):  # noqa: F811
    path = write_file(faultfs, "r.dat", payload(4 * BLOCK))
    faultfs.set(Fault("error", op="read", errno=errno.EIO, start=2 * BLOCK, end=3 * BLOCK))
    fd = os.open(path, os.O_RDONLY)
    try:
        assert len(os.pread(fd, BLOCK, BLOCK)) == BLOCK
        assert len(os.pread(fd, BLOCK, 3 * BLOCK)) == BLOCK
        with pytest.raises(OSError) as raised:
            os.pread(fd, BLOCK, 2 * BLOCK)
    finally:
        os.close(fd)
    assert raised.value.errno == errno.EIO


def test_a_byte_flip_changes_exactly_the_bytes_in_range(faultfs):  # noqa: F811
    data = payload(4 * BLOCK)
    path = write_file(faultfs, "f.dat", data)
    faultfs.set(Fault("flip", start=5000, end=5010))
    got = path.read_bytes()
    assert [i for i in range(len(data)) if got[i] != data[i]] == list(range(5000, 5010))
    assert all(got[i] == data[i] ^ 0xFF for i in range(5000, 5010))
    assert (faultfs.backing / "f.dat").read_bytes() == data  # the stored bytes are intact
    faultfs.clear()
    assert path.read_bytes() == data


def test_a_short_write_returns_fewer_bytes_and_stores_only_those(faultfs):  # noqa: F811
    faultfs.set(Fault("short", keep=0.25))
    data = payload(BLOCK)
    fd = os.open(faultfs.mountpoint / "s.dat", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        written = os.pwrite(fd, data, 0)
    finally:
        os.close(fd)
    assert written == BLOCK // 4
    assert (faultfs.backing / "s.dat").read_bytes() == data[:BLOCK // 4]


def test_a_delay_hits_its_share_of_operations(faultfs):  # noqa: F811
    """Counted over N reads, not timed tightly: a busy machine only makes reads slower, so every
    read the filesystem delayed takes at least the delay, and the share delayed is a binomial
    count with a seeded draw."""
    n, share, delay = 200, 0.25, 0.05
    path = write_file(faultfs, "d.dat", payload(BLOCK))
    faultfs.set(Fault("delay", op="read", share=share, delay=delay, seed=11))
    fd = os.open(path, os.O_RDONLY)
    took = []
    try:
        for _ in range(n):
            start = time.monotonic()
            os.pread(fd, BLOCK, 0)
            took.append(time.monotonic() - start)
    finally:
        os.close(fd)
    [rule] = faultfs.stats()["faults"]
    assert rule["seen"] == n
    # Binomial(200, 0.25): mean 50, sd 6.1; four sd either side.
    assert 25 <= rule["fired"] <= 75, rule
    assert sum(t >= delay for t in took) >= rule["fired"]


def test_a_fault_on_other_files_leaves_this_one_alone(faultfs):  # noqa: F811
    path = write_file(faultfs, "kept.dat", payload(BLOCK))
    faultfs.set(Fault("error", errno=errno.EIO, path="/kv/*"))
    assert reads(path, 2) == [BLOCK, BLOCK]


def test_a_rule_for_one_process_spares_the_others():
    table = FaultTable()
    table.set([Fault("error", op="read", errno=errno.EIO, process="*-m gates.sim *")])
    assert table.by_process()
    engine = "/usr/bin/python3 -m gates.sim --profile tiny --kv-dir /kv"
    assert table.decide("read", "/kv/a", 0, BLOCK, engine).errno == errno.EIO
    assert table.decide("read", "/kv/a", 0, BLOCK, "python -m gates.cli run g3").errno == 0
    table.set([Fault("error", op="read")])
    assert not table.by_process()


def test_a_read_fails_for_the_process_named_and_succeeds_for_the_others(faultfs):  # noqa: F811
    """The engine's reads of a file fail while kvgate's own read of it succeeds: the rule looks
    at the calling process's command line (FUSE names the caller, /proc/PID/cmdline says it)."""
    import subprocess
    import sys

    path = write_file(faultfs, "kv.dat", payload(BLOCK))
    faultfs.set(Fault("error", op="read", errno=errno.EIO, process="* faultfs-victim"))
    child = subprocess.run([sys.executable, "-c", "import sys; open(sys.argv[1], 'rb').read()",
                            str(path), "faultfs-victim"], capture_output=True, text=True,
                           timeout=60)
    assert child.returncode == 1 and "Errno 5" in child.stderr, child.stderr
    assert reads(path, 2) == [BLOCK, BLOCK]  # this process: not named, not refused
    assert faultfs.stats()["faults"][0]["fired"] >= 1


def test_the_mount_is_gone_after_a_failing_test_with_a_file_still_open(tmp_path):
    if why := missing():
        pytest.skip(f"needs a FUSE fault filesystem: {why}")
    with pytest.raises(RuntimeError, match="the test failed"), mounted(tmp_path) as fs:
        fd = os.open(fs.mountpoint / "open.dat", os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"x")
        process = fs.process
        raise RuntimeError("the test failed")
    assert not os.path.ismount(tmp_path / "mnt")
    assert process.poll() is not None
    with pytest.raises(OSError) as raised:  # the file's server is gone, the test is not stuck
        os.fstat(fd)
    assert raised.value.errno == errno.ENOTCONN
    with contextlib.suppress(OSError):  # close's flush meets the same ENOTCONN
        os.close(fd)


def test_eio_while_kvgate_hashes_the_kv_files_is_a_phase_error_naming_file_and_errno(
        faultfs):  # noqa: F811
    # The G3 read-back hashes every KV file before the drop and after the probe: a refused read
    # there was "check did not measure: [Errno 5] Input/output error", naming no file.
    from gates.inference import PhaseError, drop_page_cache
    from gates.inference.kv_files import read_back

    write_file(faultfs, "chunk-0007.kv", payload(BLOCK))
    stored: dict[str, str] = {}
    drop_page_cache(faultfs.mountpoint, stored)
    faultfs.set(Fault("error", op="read", errno=errno.EIO))
    with pytest.raises(PhaseError, match=r"KV file chunk-0007\.kv at offset 0: EIO \(5\)"):
        read_back(faultfs.mountpoint, stored)
    with pytest.raises(PhaseError, match=r"KV file chunk-0007\.kv at offset 0: EIO \(5\)"):
        drop_page_cache(faultfs.mountpoint, {})
