"""The results store: SQLite in WAL mode, written as things happen, nothing ever overwritten."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import sqlite3

import pytest

from gates.core.verdicts import GateRecord, Limit, Measurement, Outcome
from gates.store import DB_NAME, Store, new_run_id, sha256_file, write_new

RUN = "20261129T170000Z-abc123"
SITE = "lab"


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "out") as s:
        yield s


@pytest.fixture
def run(store):
    store.begin_run(RUN, SITE, thresholds_revision="r1", tool_versions={"fio": "fio-3.33"})
    return RUN


def bw(value: float, name: str = "Sequential read") -> Measurement:
    return Measurement.measured(name, value, Limit.at_least(5.0, "GB/s", key="g1.x"))


def record(run_id: str, gate: str = "g1", site: str = SITE, *ms: Measurement) -> GateRecord:
    return GateRecord(gate=gate, run_id=run_id, site=site, started="2026-11-29T17:00:00+00:00",
                      measurements=list(ms) or [bw(6.0)])


def test_wal_mode(store):
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.db.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_begin_run_creates_folders_and_row(store, run):
    folder = store.run_dir(run)
    assert folder == store.out_dir / run
    assert (folder / "evidence").is_dir()
    info = store.run(run)
    assert info["site"] == SITE and info["thresholds_revision"] == "r1"
    assert store.run("nope") is None


def test_same_run_id_again_raises_and_overwrites_nothing(store, run):
    kept = write_new(store.run_dir(run) / "g1.json", "first")
    before = dict(store.run(run))
    with pytest.raises(FileExistsError):
        store.begin_run(run, "another site")
    assert kept.read_text() == "first"
    assert dict(store.run(run)) == before


def test_existing_folder_without_row_raises_and_leaves_no_row(store):
    (store.out_dir / RUN).mkdir()
    with pytest.raises(FileExistsError, match="already exists"):
        store.begin_run(RUN, SITE)
    assert store.run(RUN) is None
    assert not (store.out_dir / RUN / "evidence").exists()


def test_row_without_folder_raises_and_creates_no_folder(store, run):
    for child in (store.run_dir(run) / "evidence", store.run_dir(run)):
        child.rmdir()
    with pytest.raises(FileExistsError, match="already in the store"):
        store.begin_run(run, SITE)
    assert not store.run_dir(run).exists()


@pytest.mark.parametrize("bad", ["", ".", "..", "../escape", "/tmp/abs", "a/b", "a\\b", "x\ny"])
def test_run_ids_that_are_not_plain_names_are_refused(store, tmp_path, bad):
    with pytest.raises(ValueError, match="invalid run id"):
        store.begin_run(bad, SITE)
    assert not (tmp_path / "escape").exists()
    assert store.db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


def test_measurements_round_trip_in_order(store, run):
    made = [bw(6.0, "a"), bw(1.0, "b"), Measurement.error("c", "fio crashed"),
            Measurement.not_applicable("d", "no ceiling"),
            Measurement.measured("e", 5.1, Limit.at_least(5.0, "GB/s", marginal=0.05),
                                 interval=(4.9, 5.3), evidence=["evidence/fio-seqread.json"])]
    for m in made:
        store.add_measurement(run, "g1", m)
    store.add_measurement(run, "g2", bw(9.0, "other gate"))
    got = store.measurements(run, "g1")
    assert got == made
    assert [m.outcome for m in got] == [Outcome.PASS, Outcome.FAIL, Outcome.ERROR,
                                        Outcome.NOT_APPLICABLE, Outcome.MARGINAL]
    assert [m.name for m in store.measurements(run, "g2")] == ["other gate"]
    assert store.measurements(run, "g3") == []


def test_measurement_needs_a_registered_run(store):
    with pytest.raises(sqlite3.IntegrityError):
        store.add_measurement("never-begun", "g1", bw(6.0))


def test_samples_round_trip(store, run):
    points = [(0.0, 5.1e9), (1.0, 5.3e9), (2.0, 4.9e9)]
    store.add_samples(run, "g1", "seqread.bw", points)
    store.add_samples(run, "g1", "seqwrite.bw", [(0.0, 1.0)])
    assert store.samples(run, "seqread.bw") == points
    assert store.samples(run, "missing") == []


def test_samples_are_all_or_nothing(store, run):
    with pytest.raises(sqlite3.IntegrityError):
        store.add_samples(run, "g1", "s", [(0.0, 1.0), (1.0, None)])  # NOT NULL value
    assert store.samples(run, "s") == []
    assert not store.db.in_transaction


def test_evidence_hash_and_manifest(store, run):
    evidence = store.run_dir(run) / "evidence"
    body = b'{"fio version": "fio-3.33"}\n'
    first = evidence / "fio-seqread.json"
    first.write_bytes(body)
    second = evidence / "fio-seqread.log"
    second.write_bytes(b"$ fio ...\n")
    digest = store.add_evidence(run, first)
    assert digest == hashlib.sha256(body).hexdigest() == sha256_file(first)
    store.add_evidence(run, second)
    assert store.manifest(run) == {
        "evidence/fio-seqread.json": digest,
        "evidence/fio-seqread.log": hashlib.sha256(b"$ fio ...\n").hexdigest()}
    size = store.db.execute("SELECT bytes FROM evidence WHERE path = ?",
                            ("evidence/fio-seqread.json",)).fetchone()[0]
    assert size == len(body)
    with pytest.raises(sqlite3.IntegrityError):  # recorded once, never replaced
        store.add_evidence(run, first)


def test_evidence_outside_the_run_is_refused(store, run, tmp_path):
    stray = tmp_path / "stray.json"
    stray.write_text("{}")
    with pytest.raises(ValueError, match="not inside run folder"):
        store.add_evidence(run, stray)
    link = store.run_dir(run) / "evidence" / "link.json"
    link.symlink_to(stray)
    with pytest.raises(ValueError, match="not a regular file"):
        store.add_evidence(run, link)
    assert store.manifest(run) == {}


def test_evidence_by_relative_path(store, run, monkeypatch):
    file = store.run_dir(run) / "evidence" / "a.txt"
    file.write_text("a")
    monkeypatch.chdir(store.run_dir(run))
    store.add_evidence(run, file.relative_to(store.run_dir(run)))
    assert list(store.manifest(run)) == ["evidence/a.txt"]


def test_save_and_latest_record(store, run):
    older = record(run, "g1", SITE, bw(4.0))
    assert store.save_record(older) == older.sha256()
    later_run = "20261130T090000Z-def456"
    store.begin_run(later_run, SITE)
    newer = record(later_run, "g1", SITE, bw(6.0))
    store.save_record(newer)
    other_site = "20261130T100000Z-aaaaaa"
    store.begin_run(other_site, "elsewhere")
    store.save_record(record(other_site, "g1", "elsewhere", bw(1.0)))

    found, digest = store.latest_record("g1", SITE)
    assert found.run_id == later_run and found.verdict is Outcome.PASS
    assert found == newer
    assert digest == newer.sha256() == found.sha256()
    assert store.latest_record("g2", SITE) is None
    assert store.latest_record("g1", "unknown site") is None
    assert [r.gate for r in store.records(run)] == ["g1"]


def test_stored_body_is_the_hashed_text(store, run):
    rec = record(run)
    digest = store.save_record(rec)
    body, stored = store.db.execute("SELECT body, sha256 FROM gate_records").fetchone()
    assert stored == digest == hashlib.sha256(body.encode()).hexdigest()


def test_same_gate_record_twice_raises(store, run):
    store.save_record(record(run))
    with pytest.raises(sqlite3.IntegrityError):
        store.save_record(record(run, "g1", SITE, bw(1.0)))
    found, _ = store.latest_record("g1", SITE)
    assert found.verdict is Outcome.PASS  # the first record stands


def test_write_new_refuses_an_existing_file(tmp_path):
    path = write_new(tmp_path / "g1.html", "first")
    with pytest.raises(FileExistsError):
        write_new(path, "second")
    assert path.read_text() == "first"


def test_new_run_id_format_and_uniqueness():
    when = dt.datetime(2026, 11, 29, 17, 0, 5, tzinfo=dt.UTC)
    run_id = new_run_id(when)
    assert re.fullmatch(r"20261129T170005Z-[0-9a-f]{6}", run_id)
    assert re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{6}", new_run_id())
    assert len({new_run_id(when) for _ in range(200)}) == 200


def test_new_run_id_is_utc_for_any_time_zone():
    local = dt.datetime(2026, 11, 29, 19, 0, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert new_run_id(local).startswith("20261129T170000Z-")


def test_written_as_it_happens(store, tmp_path):
    # A second connection sees every write while the first is still open: a crash loses
    # nothing already recorded.
    reader = sqlite3.connect(store.out_dir / DB_NAME)
    try:
        store.begin_run(RUN, SITE)
        assert reader.execute("SELECT run_id FROM runs").fetchall() == [(RUN,)]
        store.add_measurement(RUN, "g1", bw(6.0))
        store.add_samples(RUN, "g1", "s", [(0.0, 1.0)])
        evidence = store.run_dir(RUN) / "evidence" / "e.txt"
        evidence.write_text("e")
        store.add_evidence(RUN, evidence)
        store.save_record(record(RUN))
        for table in ("measurements", "samples", "evidence", "gate_records"):
            assert reader.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 1, table
        assert not store.db.in_transaction
    finally:
        reader.close()


def test_reopening_keeps_everything(tmp_path):
    with Store(tmp_path / "out") as first:
        first.begin_run(RUN, SITE)
        first.add_measurement(RUN, "g1", bw(6.0))
    with Store(tmp_path / "out") as again:
        assert [m.value for m in again.measurements(RUN, "g1")] == [6.0]
        with pytest.raises(FileExistsError):
            again.begin_run(RUN, SITE)


def test_requests_are_stored_as_they_finish_and_read_back_by_phase(tmp_path):
    from gates.core.verdicts import RequestOutcome, RequestRecord

    with Store(tmp_path) as store:
        store.begin_run("r1", "site")
        store.add_request("r1", RequestRecord(request_id="a", phase="seed", t0=0.0))
        store.add_request("r1", RequestRecord(request_id="b", phase="probe", t0=1.0, ttft=0.5,
                                              outcome=RequestOutcome.TIMEOUT, error="stalled"))
        probe = store.requests("r1", "probe")
        assert [r.request_id for r in store.requests("r1")] == ["a", "b"]
        assert len(probe) == 1 and probe[0].outcome is RequestOutcome.TIMEOUT
        assert probe[0].error == "stalled" and probe[0].ttft == 0.5
