"""The simulator's storage tier, on real files under tmp_path."""

import asyncio
import errno
import os
import threading
import time

import pytest

import gates.sim.tier as _sim_tier
from gates.sim.model import chunk_hashes, get_profile, root_hash
from gates.sim.payload import chunk_payload, verify_payload
from gates.sim.tier import KvTier, Throttle

TINY = get_profile("tiny")


def _hashes(n: int, salt: int = 0) -> list[bytes]:
    return chunk_hashes([salt] + list(range(16 * n - 1)), 16, root_hash(TINY.model_id))


@pytest.fixture
def tier(tmp_path):
    t = KvTier(tmp_path, TINY)
    yield t
    t.close()


def test_written_chunks_are_whole_files_under_the_kv_dir(tier, tmp_path):
    h = _hashes(1)[0]
    assert h not in tier
    tier.write_chunk(h)
    path = tier.path_for(h)
    assert path.is_relative_to(tmp_path / TINY.model_id)
    assert path.stat().st_size == TINY.chunk_bytes
    assert path.read_bytes() == chunk_payload(h, TINY)
    assert h in tier and len(tier) == 1
    assert tier.read_chunk(h) == chunk_payload(h, TINY)
    assert tier.stats["write_bytes"] == tier.stats["read_bytes"] == TINY.chunk_bytes


def test_background_writes_are_deduplicated_and_drained(tier):
    hashes = _hashes(8)
    for h in hashes + hashes:
        tier.write_later(h, chunk_payload(h, TINY))
    asyncio.run(tier.drain())
    assert tier.pending_writes == 0 and len(tier) == 8
    assert tier.stats["write_chunks"] == 8 and tier.stats["write_errors"] == 0


def test_index_is_rebuilt_after_a_restart(tmp_path):
    hashes = _hashes(5)
    first = KvTier(tmp_path, TINY)
    for h in hashes:
        first.write_chunk(h)
    first.close()
    junk = first.root / "ab"
    junk.mkdir(exist_ok=True)
    (junk / ("ab" * 16 + ".kv")).write_bytes(b"short")  # wrong size: not a chunk
    (junk / "notes.txt").write_text("hello")
    leftover = junk / ("ab" * 16 + ".kv.tmp123-4")  # a write cut short by a crash
    leftover.write_bytes(b"x")
    second = KvTier(tmp_path, TINY)
    try:
        assert all(h in second for h in hashes) and len(second) == 5
        assert second.skipped_files == 2
        assert not leftover.exists()
        assert second.read_chunk(hashes[2]) == chunk_payload(hashes[2], TINY)
    finally:
        second.close()


def test_direct_io_is_used_where_the_filesystem_allows(tier):
    # tmp_path is on the root filesystem here; a filesystem refusing O_DIRECT is the next test.
    if not tier.direct_io:
        pytest.skip(f"this filesystem refuses O_DIRECT: {tier.io_note}")
    assert tier.io_note == ""


def _refuse_direct(monkeypatch):
    real_open = os.open

    def fake_open(path, flags, *args, **kwargs):
        if flags & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(_sim_tier.os, "open", fake_open)


def test_falls_back_to_buffered_reads_and_says_so(tmp_path, monkeypatch):
    _refuse_direct(monkeypatch)
    tier = KvTier(tmp_path, TINY)
    try:
        assert not tier.direct_io
        assert "O_DIRECT refused" in tier.io_note and "page cache" in tier.io_note
        h = _hashes(1)[0]
        tier.write_chunk(h)
        assert tier.read_chunk(h) == chunk_payload(h, TINY)
    finally:
        tier.close()
    with pytest.raises(OSError, match="O_DIRECT required"):
        KvTier(tmp_path, TINY, direct_io=True)


def test_buffered_by_request(tmp_path):
    tier = KvTier(tmp_path, TINY, direct_io=False)
    assert not tier.direct_io and "by request" in tier.io_note
    tier.close()


def test_parallel_readers_return_the_right_bytes_in_order(tmp_path):
    tier = KvTier(tmp_path, TINY, readers=4)
    hashes = _hashes(32, salt=7)
    for h in hashes:
        tier.write_chunk(h)
    threads = set()

    def note_thread(data: bytes) -> bytes:
        threads.add(threading.current_thread().name)
        time.sleep(0.002)  # hold the reader a moment so the others get work
        return data

    try:
        got = asyncio.run(tier.read_chunks(hashes, note_thread))
    finally:
        tier.close()
    assert got == [chunk_payload(h, TINY) for h in hashes]
    assert len(threads) > 1 and all(name.startswith("kv-read") for name in threads)
    assert tier.stats["read_chunks"] == 32


def test_corruption_fault_changes_what_is_read_not_the_file(tier):
    h = _hashes(1)[0]
    tier.write_chunk(h)
    tier.corrupt_fraction = 1.0
    bad = tier.read_chunk(h)
    assert bad != chunk_payload(h, TINY) and not verify_payload(bad)
    assert tier.path_for(h).read_bytes() == chunk_payload(h, TINY)
    tier.corrupt_fraction = 0.0
    assert tier.read_chunk(h) == chunk_payload(h, TINY)


def test_read_throttle_caps_bandwidth(tmp_path):
    rate = 8 * TINY.chunk_bytes / 0.25  # 8 chunks should take about 0.25 s
    tier = KvTier(tmp_path, TINY, read_bytes_per_s=rate)
    hashes = _hashes(8, salt=3)
    for h in hashes:
        tier.write_chunk(h)
    start = time.monotonic()
    try:
        asyncio.run(tier.read_chunks(hashes))
    finally:
        tier.close()
    assert time.monotonic() - start >= 0.24


def test_throttle_books_bandwidth_on_a_fake_clock():
    now = [10.0]
    slept = []
    t = Throttle(1000.0, clock=lambda: now[0], sleep=slept.append)
    assert t.reserve(500) == pytest.approx(10.5)
    assert t.reserve(500) == pytest.approx(11.0)  # queued behind the first
    t.wait_until(11.0)
    assert slept == [pytest.approx(1.0)]
    t.bytes_per_s = None
    assert t.reserve(10**9) == 10.0


def test_a_read_refused_o_direct_later_falls_back_for_good(tier, monkeypatch):
    if not tier.direct_io:
        pytest.skip("this filesystem refuses O_DIRECT from the start")
    h = _hashes(1)[0]
    tier.write_chunk(h)
    _refuse_direct(monkeypatch)
    assert tier.read_chunk(h) == chunk_payload(h, TINY)
    assert not tier.direct_io and "O_DIRECT read refused" in tier.io_note


def test_a_chunk_deleted_behind_the_tiers_back_is_an_error_and_forgotten(tier):
    a, b = _hashes(2)
    tier.write_chunk(a)
    tier.write_chunk(b)
    tier.path_for(a).unlink()
    got = asyncio.run(tier.read_chunks([a, b], return_exceptions=True))
    assert isinstance(got[0], FileNotFoundError) and got[1] == chunk_payload(b, TINY)
    assert a not in tier and b in tier
    assert tier.stats["read_errors"] == 1 and tier.last_read_error
