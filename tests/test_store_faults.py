"""Issue #27, "The store without a net": every failure of kvgate.sqlite is said, never a traceback.

Before the fix, every open and write of the store let sqlite3.Error through: a full
filesystem ended a run in INTERNALERROR, a store locked by another process, a garbage or
truncated file, a read-only mount (even for the read-only `kvgate soak status` and `kvgate
bundle`) each printed a traceback, and `kvgate soak status --out EMPTY_DIR` created a store.
Now one StoreError (gates/store/faults.py) names the file, the cause and what to do, and the
command line and the pytest plugin report it and exit 2. Real SQLite files throughout: garbage
bytes, a truncated store, a lock held by a second connection, and (as root) a read-only and a
full tmpfs.
"""

from __future__ import annotations

import sqlite3
import subprocess
import tempfile
from pathlib import Path

import pytest
from _chain import SITE, full_chain, open_run
from _loopdev import need_root, tmpfs
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gates.cli import main
from gates.core.verdicts import Limit, Measurement
from gates.report import KEY_DIR_ENV, new_key, write_summary
from gates.soak import SoakPlan
from gates.soak.store import SoakStore
from gates.store import DB_NAME, Store, StoreError, faults

RUN = "r1"


def real_store(out: Path) -> Path:
    """A real store with one run in it; returns the store file."""
    with Store(out) as store:
        open_run(store, RUN)
    return out / DB_NAME


def said(capsys) -> str:
    """Everything a command printed, on one line (messages must not depend on the width)."""
    both = capsys.readouterr()
    return (both.out + both.err).replace("\n", " ")


def no_traceback(text: str) -> None:
    assert "Traceback" not in text and "INTERNALERROR" not in text, text


# ---- a file that is not a store --------------------------------------------------------------

def test_garbage_bytes_as_the_store_are_named_with_the_cause_and_what_to_do(tmp_path, capsys,
                                                                           monkeypatch):
    monkeypatch.setenv(KEY_DIR_ENV, str(tmp_path / "keys"))  # waive signs before it looks
    new_key(tmp_path / "keys")
    out = tmp_path / "reports"
    out.mkdir()
    (out / DB_NAME).write_bytes(b"these are not the bytes of a database\n" * 200)
    with pytest.raises(StoreError) as caught:
        Store(out)
    text = str(caught.value)
    assert text.startswith(f"kvgate store {out.resolve() / DB_NAME}: it is not an SQLite "
                           "database")
    assert "(SQLite: file is not a database)" in text and "move it aside" in text
    for argv in (["soak", "status", "--out", str(out)], ["bundle", RUN, "--out", str(out)],
                 ["waive", RUN, "x", "--reason", "r", "--by", "b", "--out", str(out)]):
        assert main(argv) == 2, argv
        told = said(capsys)
        no_traceback(told)
        assert "it is not an SQLite database" in told and str(out / DB_NAME) in told, argv


def test_a_truncated_store_is_called_damaged(tmp_path, capsys):
    db = real_store(tmp_path / "reports")
    db.write_bytes(db.read_bytes()[:5000])  # the header is whole, the pages behind it are not
    with pytest.raises(StoreError, match="it is damaged \\(truncated or corrupted\\) \\(SQLite: "
                       "database disk image is malformed\\)"):
        Store(db.parent)
    assert main(["soak", "status", "--out", str(db.parent)]) == 2
    told = said(capsys)
    no_traceback(told)
    assert "it is damaged (truncated or corrupted)" in told
    assert f"try `sqlite3 {db.resolve()} .recover`" in told


def test_an_sqlite_file_that_is_no_kvgate_store_is_named_by_the_readers(tmp_path, capsys):
    out = tmp_path / "reports"
    out.mkdir()
    sqlite3.connect(out / DB_NAME).execute("CREATE TABLE photos (id)").connection.close()
    assert main(["bundle", RUN, "--out", str(out)]) == 2
    assert "it is an SQLite database, but not a kvgate store (it has no runs table)" in \
        said(capsys)


STORE_BYTES = st.one_of(
    st.binary(max_size=3000),
    st.binary(max_size=3000).map(lambda b: b"SQLite format 3\x00" + b),  # past the magic
)


def _flipped(data: bytes, flips: list[tuple[int, int]]) -> bytes:
    """A real store with some of its bytes replaced: damage SQLite must find on its own."""
    out = bytearray(data)
    for at, value in flips:
        out[at % len(out)] = value
    return bytes(out)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=STORE_BYTES, flips=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)),
                                       max_size=12), flip=st.booleans())
@example(raw=b"", flips=[], flip=False)
@example(raw=b"", flips=[(3967, 128)], flip=True)  # a run id byte no longer UTF-8 (busy CI run)
def test_any_bytes_as_the_store_give_a_store_or_a_store_error_never_sqlite3(raw, flips, flip):
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        if flip:
            db = real_store(out)
            for name in (f"{DB_NAME}-wal", f"{DB_NAME}-shm"):
                (out / name).unlink(missing_ok=True)
            db.write_bytes(_flipped(db.read_bytes(), flips))
        else:
            (out / DB_NAME).write_bytes(raw)
        for opened in (lambda: Store.reading(out), lambda: Store(out)):
            try:
                with opened() as store:
                    store.run(RUN)
                    store.records(RUN)
                    SoakStore(store).latest()
            except StoreError as exc:
                assert str(out / DB_NAME) in str(exc)


# ---- a store another process holds ------------------------------------------------------------

def test_a_store_locked_by_another_process_says_so_and_what_to_do(tmp_path, monkeypatch):
    db = real_store(tmp_path / "reports")
    monkeypatch.setattr(faults, "BUSY_TIMEOUT", 0.2)  # not the 30 s a real run waits
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with Store(db.parent) as store:
            assert store.run(RUN) is not None  # WAL: a reader is not held up
            with pytest.raises(StoreError) as caught:
                store.begin_run("r2", SITE)
            assert not store.db.in_transaction
        assert str(caught.value).startswith(f"kvgate store {db}: another process holds it "
                                            "locked")
        assert "(SQLite: database is locked)" in str(caught.value)
        assert "wait for that process to finish or stop it" in str(caught.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with Store(db.parent) as store:
        assert store.run("r2") is None and not (db.parent / "r2").exists()


# ---- read-only commands create nothing ---------------------------------------------------------

def test_soak_status_of_a_folder_without_a_store_creates_none(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["soak", "status", "--out", str(empty)]) == 2
    told = said(capsys)
    assert f"kvgate store {empty.resolve() / DB_NAME}: there is none" in told
    assert list(empty.iterdir()) == []
    assert main(["soak", "resume", "r", "--out", str(tmp_path / "nowhere")]) == 2
    assert not (tmp_path / "nowhere").exists()


@pytest.fixture
def read_only(tmp_path):
    """A tmpfs holding a store with a recorded run and a soak, remounted read-only (root only)."""
    need_root("mount", "umount")
    with tmpfs(tmp_path / "ro", "size=8M") as mount:
        out = mount / "reports"
        with Store(out) as store:
            full_chain(store, RUN, gates=("g1",))
            write_summary(store, SITE, RUN)
            open_run(store, "soak")
            SoakStore(store).save_plan(SoakPlan(run_id="soak", duration=60.0, window=10.0))
        done = subprocess.run(["mount", "-o", "remount,ro", str(mount)], capture_output=True,
                              text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot remount read-only: {done.stderr.strip()}")
        yield out
        subprocess.run(["mount", "-o", "remount,rw", str(mount)], capture_output=True)


def test_status_and_bundle_read_a_store_on_a_read_only_mount(read_only, tmp_path, capsys):
    assert sorted(p.name for p in read_only.glob(f"{DB_NAME}*")) == [DB_NAME]  # no -wal, -shm
    assert main(["soak", "status", "soak", "--out", str(read_only)]) == 1  # never started
    told = said(capsys)
    no_traceback(told)
    assert "G4 soak: window 0/6" in told
    bundle = tmp_path / "copy.bundle.tar.gz"
    assert main(["bundle", RUN, "--out", str(read_only), "-o", str(bundle)]) == 0
    assert main(["verify", str(bundle)]) in (0, 4)  # intact (signed or not)
    assert "ALTERED" not in said(capsys)


def test_a_run_into_a_read_only_mount_says_it_cannot_write_there(read_only):
    with pytest.raises(StoreError) as caught:
        Store(read_only)
    assert str(caught.value).startswith(f"kvgate store {read_only / DB_NAME}: it cannot be "
                                        "opened (its folder is missing, not writable, or on a "
                                        "read-only mount)")
    with pytest.raises(StoreError, match="the reports folder .*: it cannot be written"):
        Store(read_only / "elsewhere")


# ---- a full filesystem -------------------------------------------------------------------------

def fill(folder: Path) -> None:
    """Fill the filesystem under folder to its last block."""
    for size in (65536, 512):
        with (folder / f"filler-{size}").open("wb", buffering=0) as handle:
            try:
                while True:
                    handle.write(bytes(size))
            except OSError:
                pass


@pytest.fixture
def small_disk(tmp_path):
    need_root("mount", "umount")
    with tmpfs(tmp_path / "small", "size=2M") as mount:
        yield mount


def test_a_write_to_a_full_filesystem_names_the_store_and_says_to_free_space(small_disk):
    with Store(small_disk / "reports") as store:
        open_run(store, RUN)
        fill(small_disk)
        big = Measurement.measured("figure", 1.0, Limit.at_least(0, "x"), note="n" * 200_000)
        with pytest.raises(StoreError) as caught:
            store.add_measurement(RUN, "g1", big)
        with pytest.raises(StoreError):
            store.add_samples(RUN, "g1", "s", [(float(t), 1.0) for t in range(50_000)])
        assert not store.db.in_transaction
    text = str(caught.value)
    assert text.startswith(f"kvgate store {small_disk.resolve() / 'reports' / DB_NAME}: the "
                           "filesystem holding it is full")
    assert "(SQLite: database or disk is full)" in text and "free space there" in text


SUITE = """
import pytest
from pathlib import Path
from gates import Limit, Measurement

pytestmark = [pytest.mark.gate, pytest.mark.g1]


def fill(folder):
    for size in (65536, 512):  # to the last block
        with (folder / f"filler-{{size}}").open("wb", buffering=0) as handle:
            try:
                while True:
                    handle.write(bytes(size))
            except OSError:
                pass


def test_figure(check):
    check(Measurement.measured("first", 12.0, Limit.at_least(10, "GB/s")))
    {fill}
    check(Measurement.measured("second", 12.0, Limit.at_least(10, "GB/s"), note="n" * 200000))
"""




def test_a_run_whose_disk_fills_up_says_its_record_is_not_stored_and_exits_2(gate_dir,
                                                                            small_disk):
    out = small_disk / "reports"
    gate_dir.makepyfile(test_g1_fill=SUITE.format(fill=f"fill(Path({str(small_disk)!r}))"))
    result = gate_dir.runpytest("-m", "g1", "--out", str(out))
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == 2, text
    no_traceback(text)
    assert "G1: a measurement could not be stored, so the run stops: kvgate store" in text
    assert "the filesystem holding it is full" in text


def test_a_disk_that_fills_after_the_last_check_says_the_records_are_not_stored(gate_dir,
                                                                               small_disk):
    """Every measurement was stored; the gate's record, report and bundle, written when the
    session ends, meet the full disk: said, exit 2, no traceback (plugin.pytest_sessionfinish)."""
    out = small_disk / "reports"
    suite = SUITE.format(fill=f"fill(Path({str(small_disk)!r}))").replace(
        '    check(Measurement.measured("second", 12.0, Limit.at_least(10, "GB/s"), '
        'note="n" * 200000))\n', "")
    assert '"second"' not in suite
    gate_dir.makepyfile(test_g1_fill=suite)
    result = gate_dir.runpytest("-m", "g1", "--out", str(out))
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == 2, text
    no_traceback(text)
    assert "the run's gate records could not be stored: kvgate store" in text
    assert "the filesystem holding it is full" in text and "free space there" in text


def test_a_run_on_a_garbage_store_does_not_start_and_says_why(gate_dir):
    gate_dir.makepyfile(test_g1_fill=SUITE.format(fill="pass"))
    out = gate_dir.path / "reports"
    out.mkdir()
    (out / DB_NAME).write_bytes(b"\x13" * 4096)
    result = gate_dir.runpytest("-m", "g1", "--out", str(out))
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == 2, text
    no_traceback(text)
    assert f"cannot start the run in {out}: kvgate store" in text
    assert "it is not an SQLite database" in text
