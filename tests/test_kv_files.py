"""Walks over a KV directory while its engine may still be writing (#27 item 1).

Engines write their KV files asynchronously, under a temporary name they then rename (the
simulator's tier, LMCache's local-disk backend, vLLM's offloading connector): the page-cache
step must wait until the directory holds still and must survive a file renamed under it.
A real writer thread renames files under the walker here; nothing is mocked but the clock of
the timeout case.
"""

import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest

from gates.inference import PhaseError, drop_page_cache, stored_bytes
from gates.inference.kv_dir import MARKER
from gates.inference.kv_files import look, wait_until_settled


class RenamingWriter(threading.Thread):
    """Writes KV-sized files as a connector does: to a temporary name, then renamed."""

    def __init__(self, kv_dir, files: int | None, pause: float = 0.0005):
        super().__init__(daemon=True)
        self.kv_dir, self.files, self.pause = kv_dir, files, pause
        self.stop, self.written = threading.Event(), 0

    def run(self):
        while not self.stop.is_set() and (self.files is None or self.written < self.files):
            sub = self.kv_dir / f"{self.written % 7:02x}"
            sub.mkdir(exist_ok=True)
            final = sub / f"chunk-{self.written:05d}.kv"
            tmp = final.with_name(final.name + f".tmp{os.getpid()}-{threading.get_ident()}")
            tmp.write_bytes(b"k" * 8192)
            time.sleep(self.pause)  # the window a walker can list the .tmp name in
            os.replace(tmp, final)
            self.written += 1


def test_the_page_cache_drop_waits_for_a_writer_that_renames_under_it(tmp_path):
    (tmp_path / MARKER).write_text("marker")
    writer = RenamingWriter(tmp_path, files=400)
    writer.start()
    time.sleep(0.02)  # the writer is mid-stream when the drop starts
    said = drop_page_cache(tmp_path).how  # on today's main: FileNotFoundError on a .tmp name
    dropped_at, written_then = time.monotonic(), writer.written
    writer.join(timeout=30)
    assert writer.written == 400 and "held still" in said
    assert not list(tmp_path.rglob("*.tmp*"))
    # It dropped what was there once two looks 0.5 s apart agreed: every file, when the writer
    # had finished by then (a writer starved for 0.5 s on a busy machine looks finished).
    count = int(said.split(" on ")[1].split()[0])
    assert count == written_then or written_then < 400, (said, written_then, dropped_at)
    assert count >= 1


def test_a_walk_survives_files_renamed_and_removed_under_it(tmp_path):
    writer = RenamingWriter(tmp_path, files=None, pause=0.0)
    writer.start()
    try:
        deadline = time.monotonic() + 2.0
        looks = 0
        while time.monotonic() < deadline:
            seen = look(tmp_path)  # never FileNotFoundError, whatever vanished mid-walk
            assert all(size >= 0 for size, _, _ in seen.values())
            stored_bytes(tmp_path)
            looks += 1
    finally:
        writer.stop.set()
        writer.join(timeout=10)
    assert looks > 1 and writer.written > 0


class Clock:
    """A clock the sleep moves: the timeout case runs in no time."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        (self.dir / f"late-{self.now:.2f}.kv").write_bytes(b"x")  # still being written


def test_a_directory_that_never_settles_names_itself_and_what_changed(tmp_path):
    clock = Clock()
    clock.dir = tmp_path
    with pytest.raises(PhaseError) as caught:
        wait_until_settled(tmp_path, timeout=5.0, clock=clock, sleep=clock.sleep)
    said = str(caught.value)
    assert str(tmp_path) in said
    assert "did not hold still within 5 s" in said
    assert "1 file appeared (late-5.00.kv)" in said
    assert "nothing else writes into it" in said


def test_a_quiet_directory_settles_at_once(tmp_path):
    (tmp_path / "a.kv").write_bytes(b"a" * 10)
    clock = Clock()
    waited = wait_until_settled(tmp_path, interval=0.5, clock=clock,
                                sleep=lambda s: setattr(clock, "now", clock.now + s))
    assert waited.seconds == 0.5 and waited.files == 1 and waited.bytes == 10


def look_as(user: int, kv_dir: Path) -> str:
    """look(kv_dir) in a forked child running as ``user`` (the interpreter lives under /root,
    which another user may not execute): its listing, or the PhaseError it raised."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to the user, look, say what happened, and end here
        try:
            os.setgid(user)
            os.setuid(user)
            try:
                said = str(sorted(look(kv_dir)))
            except PhaseError as exc:
                said = f"PhaseError: {exc}"
            os.write(write, said.encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as answer:
        said = answer.read()
    os.waitpid(pid, 0)
    return said


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the walk as another user")
def test_a_folder_kvgate_may_not_list_is_an_error_not_left_out():
    """An engine running as root keeps a 0700 folder per rank; kvgate as another user cannot
    list it. Before: os.walk passed over it, and the page-cache drop, the read-back and the
    bytes stored looked at the other folders only."""
    # In /tmp itself: pytest's tmp_path lies under a 0700 folder the other user may not pass.
    kv_dir = Path(tempfile.mkdtemp(prefix="kvgate-kvdir-"))
    try:
        kv_dir.chmod(0o755)
        (kv_dir / "rank0").mkdir(mode=0o700)
        (kv_dir / "rank0" / "chunk-0.kv").write_bytes(b"k" * 4096)
        (kv_dir / "rank1").mkdir(mode=0o755)
        (kv_dir / "rank1" / "chunk-0.kv").write_bytes(b"k" * 4096)
        said = look_as(65534, kv_dir)
        assert said.startswith(f"PhaseError: kvgate cannot list {kv_dir / 'rank0'}: "
                               "Permission denied (EACCES)"), said
        assert sorted(look(kv_dir)) == ["rank0/chunk-0.kv", "rank1/chunk-0.kv"]  # root sees all
    finally:
        shutil.rmtree(kv_dir)
