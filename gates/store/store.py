"""The results store: SQLite in WAL mode, written as things happen; nothing is overwritten."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..core.verdicts import GateRecord, Measurement, RequestRecord, SignedWaiver
from .faults import StoreError, connect, explain, has_table, open_read_only
from .names import check_run_id, sha256_file, utc_now

DB_NAME = "kvgate.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, started TEXT NOT NULL, site TEXT NOT NULL, site_sha256 TEXT,
    thresholds_revision TEXT, thresholds_sha256 TEXT, limits_profile TEXT,
    tool_versions TEXT, argv TEXT);
CREATE TABLE IF NOT EXISTS measurements (
    id INTEGER PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs, gate TEXT NOT NULL,
    name TEXT NOT NULL, value REAL, unit TEXT, limit_text TEXT, outcome TEXT NOT NULL,
    body TEXT NOT NULL, created TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS samples (
    id INTEGER PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs, gate TEXT NOT NULL,
    series TEXT NOT NULL, t REAL NOT NULL, value REAL NOT NULL);
CREATE TABLE IF NOT EXISTS gate_records (
    id INTEGER PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs, gate TEXT NOT NULL,
    site TEXT NOT NULL, verdict TEXT NOT NULL, forced INTEGER NOT NULL, body TEXT NOT NULL,
    sha256 TEXT NOT NULL, created TEXT NOT NULL, UNIQUE (run_id, gate));
CREATE TABLE IF NOT EXISTS evidence (
    run_id TEXT NOT NULL REFERENCES runs, path TEXT NOT NULL, sha256 TEXT NOT NULL,
    bytes INTEGER NOT NULL, PRIMARY KEY (run_id, path));
CREATE TABLE IF NOT EXISTS waivers (
    id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, gate TEXT NOT NULL, deviation TEXT NOT NULL,
    body TEXT NOT NULL, created TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs, phase TEXT NOT NULL,
    outcome TEXT NOT NULL, body TEXT NOT NULL);
"""


class RunInfo(dict):
    """A run's row in the store (a plain mapping of column to value)."""


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


class Store:
    """One SQLite file under the output directory, plus one folder per run.

    Every failure of the file (full, locked, damaged, read-only) raises StoreError
    (gates.store.faults), which names it and says what to do.
    """

    def __init__(self, out_dir: Path, *, read_only: bool = False):
        self.out_dir = Path(out_dir).resolve()
        self.path, self.read_only = self.out_dir / DB_NAME, read_only
        if read_only:
            self.db = open_read_only(self.path)
            return
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise explain(self.out_dir, exc, "the reports folder") from exc
        self.db = connect(self.path)
        self.identity = _identity(self.path)
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            # WAL + NORMAL: a commit survives a crash of kvgate without an fsync that would
            # stall the load generator's event loop; only a power cut can lose the newest ones.
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("PRAGMA foreign_keys=ON")
            self.db.executescript(SCHEMA)
        except StoreError:
            self.db.close()
            raise

    @classmethod
    def reading(cls, out_dir: Path) -> Store:
        """The existing store under out_dir, to read only; StoreError when there is none."""
        return cls(out_dir, read_only=True)

    def gone(self, run_id: str = "", gates: Iterable[str] = ()) -> str:
        """How the store file this connection writes left its place ("" while it is there):
        SQLite keeps writing a deleted (or replaced) file, and nobody would read it again.
        run_id and gates: the run whose records were written beside it, said with it."""
        now = _identity(self.path)
        if now == self.identity or self.read_only:
            return ""
        how = "deleted" if now is None else "replaced by another file"
        written = (f". This run's records were written to {self.run_dir(run_id)} ("
                   + (", ".join(f"{g}.json" for g in gates) or "none") + ", their reports and "
                   "summary) and verify as written there; no store holds them: restore the "
                   "store, or run again into a folder that keeps it") if run_id else ""
        return (f"kvgate store {self.path} was {how} while the run was writing it: what the run "
                "stored since went into the removed file and is lost with it (and every earlier "
                f"run's rows, unless a copy or a bundle of them is kept){written}")

    def has_table(self, name: str) -> bool:
        """Whether the store holds that table (one opened to read cannot create it)."""
        return has_table(self.db, name)

    def close(self) -> None:
        """Close the database connection."""
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """The statements inside are stored together or not at all."""
        # The connection autocommits (isolation_level=None); group statements explicitly.
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
            self.db.execute("COMMIT")
        except BaseException:
            # A full disk may have rolled the transaction back already, and a failed ROLLBACK
            # must not hide the error that ended the transaction.
            if self.db.in_transaction:
                with contextlib.suppress(StoreError):
                    self.db.execute("ROLLBACK")
            raise

    def run_dir(self, run_id: str) -> Path:
        """The folder holding a run's reports; evidence lives in its evidence/ subfolder."""
        return self.out_dir / check_run_id(run_id)

    def begin_run(self, run_id: str, site: str, **facts) -> Path:
        """Register a new run and create its folders; an existing run id is an error.

        Raises FileExistsError, and changes nothing, when the run id is already in the store
        or its folder already exists.
        """
        folder = self.run_dir(run_id)
        with self.transaction():
            try:
                self.db.execute(
                    "INSERT INTO runs (run_id, started, site, site_sha256, thresholds_revision, "
                    "thresholds_sha256, limits_profile, tool_versions, argv) "
                    "VALUES (?,?,?,?,?,?,?,?,?)",
                    (run_id, utc_now(), site, facts.get("site_sha256", ""),
                     facts.get("thresholds_revision", ""), facts.get("thresholds_sha256", ""),
                     facts.get("limits_profile", ""), json.dumps(facts.get("tool_versions", {})),
                     json.dumps(facts.get("argv", []))))
            except sqlite3.IntegrityError:
                raise FileExistsError(f"run {run_id} is already in the store "
                                      f"{self.out_dir / DB_NAME}; use a new run id") from None
            # Inside the transaction: a folder that cannot be made rolls the row back.
            try:
                folder.mkdir()
                (folder / "evidence").mkdir()
            except FileExistsError:
                raise FileExistsError(f"run folder {folder} already exists; kvgate never "
                                      "writes into an earlier run's folder") from None
            except OSError as exc:
                raise explain(folder, exc, "run folder") from exc
        return folder

    def run(self, run_id: str) -> RunInfo | None:
        """A run's row, or None."""
        row = self.db.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return RunInfo(row) if row else None

    def add_measurement(self, run_id: str, gate: str, m: Measurement) -> None:
        """Store one measurement the moment it is made."""
        self.db.execute(
            "INSERT INTO measurements (run_id, gate, name, value, unit, limit_text, outcome, "
            "body, created) VALUES (?,?,?,?,?,?,?,?,?)",
            (run_id, gate, m.name, m.value, m.unit, str(m.limit) if m.limit else "",
             m.outcome.value, m.model_dump_json(), utc_now()))

    def measurements(self, run_id: str, gate: str) -> list[Measurement]:
        """A gate's measurements in the order they were made."""
        rows = self.db.execute("SELECT body FROM measurements WHERE run_id = ? AND gate = ? "
                               "ORDER BY id", (run_id, gate))
        return [Measurement.model_validate_json(r["body"]) for r in rows]

    def add_request(self, run_id: str, record: RequestRecord) -> None:
        """Store one finished request the moment it ends, so a crash loses none of them."""
        self.db.execute("INSERT INTO requests (run_id, phase, outcome, body) VALUES (?,?,?,?)",
                        (run_id, record.phase, record.outcome.value, record.model_dump_json()))

    def requests(self, run_id: str, phase: str | None = None) -> list[RequestRecord]:
        """A run's request records (of one phase, if given) in the order they finished."""
        query = "SELECT body FROM requests WHERE run_id = ?" + (" AND phase = ?" if phase
                                                                 else "") + " ORDER BY id"
        rows = self.db.execute(query, (run_id, phase) if phase else (run_id,))
        return [RequestRecord.model_validate_json(r["body"]) for r in rows]

    def add_samples(self, run_id: str, gate: str, series: str,
                    points: Iterable[tuple[float, float]]) -> None:
        """Store a time series (t, value) behind a measurement."""
        with self.transaction():
            self.db.executemany(
                "INSERT INTO samples (run_id, gate, series, t, value) VALUES (?,?,?,?,?)",
                [(run_id, gate, series, t, v) for t, v in points])

    def samples(self, run_id: str, series: str) -> list[tuple[float, float]]:
        """A stored time series."""
        rows = self.db.execute("SELECT t, value FROM samples WHERE run_id = ? AND series = ? "
                               "ORDER BY id", (run_id, series))
        return [(r["t"], r["value"]) for r in rows]

    def add_evidence(self, run_id: str, path: Path) -> str:
        """Record an evidence file's SHA-256 in the manifest and return it."""
        path = Path(path)
        # The store's folder is resolved; resolve the file's folder too (not the file: a
        # symbolic link to something outside the run is not evidence of the run).
        located = path.parent.resolve() / path.name
        try:
            relative = located.relative_to(self.run_dir(run_id)).as_posix()
        except ValueError:
            raise ValueError(f"evidence {path} is not inside run folder "
                             f"{self.run_dir(run_id)}") from None
        if not located.is_file() or located.is_symlink():
            raise ValueError(f"evidence {path} is not a regular file")
        digest = sha256_file(located)
        self.db.execute("INSERT INTO evidence (run_id, path, sha256, bytes) VALUES (?,?,?,?)",
                        (run_id, relative, digest, located.stat().st_size))
        return digest

    def manifest(self, run_id: str) -> dict[str, str]:
        """Every evidence file of a run, relative path to SHA-256."""
        rows = self.db.execute("SELECT path, sha256 FROM evidence WHERE run_id = ? "
                               "ORDER BY path", (run_id,))
        return {r["path"]: r["sha256"] for r in rows}

    def save_record(self, record: GateRecord) -> str:
        """Store a finished gate record once; returns its SHA-256."""
        digest = record.sha256()
        self.db.execute(
            "INSERT INTO gate_records (run_id, gate, site, verdict, forced, body, sha256, "
            "created) VALUES (?,?,?,?,?,?,?,?)",
            (record.run_id, record.gate, record.site, record.verdict.value, int(record.forced),
             record.canonical_json(), digest, utc_now()))
        return digest

    def records(self, run_id: str) -> list[GateRecord]:
        """The gate records of one run, in gate order."""
        rows = self.db.execute("SELECT body FROM gate_records WHERE run_id = ? ORDER BY gate",
                               (run_id,))
        return [GateRecord.model_validate_json(r["body"]) for r in rows]

    def record(self, run_id: str, gate: str) -> tuple[GateRecord, str] | None:
        """One gate record of a run with the SHA-256 it was stored (and cited) under."""
        row = self.db.execute("SELECT body, sha256 FROM gate_records WHERE run_id = ? AND "
                              "gate = ?", (run_id, gate)).fetchone()
        return (GateRecord.model_validate_json(row["body"]), row["sha256"]) if row else None

    def earlier_records(self, gate: str, site: str, run_id: str) -> list[tuple[GateRecord, str]]:
        """Records of a gate and site stored before run_id's own (its retests), oldest first."""
        rows = self.db.execute(
            "SELECT body, sha256 FROM gate_records WHERE gate = ? AND site = ? AND run_id != ? "
            "AND id < COALESCE((SELECT MIN(id) FROM gate_records WHERE gate = ? AND "
            "run_id = ?), 1 << 62) ORDER BY id", (gate, site, run_id, gate, run_id))
        return [(GateRecord.model_validate_json(r["body"]), r["sha256"]) for r in rows]

    def latest_record(self, gate: str, site: str) -> tuple[GateRecord, str] | None:
        """The newest record of a gate for a site, with its stored SHA-256."""
        row = self.db.execute("SELECT body, sha256 FROM gate_records WHERE gate = ? AND "
                              "site = ? ORDER BY id DESC LIMIT 1", (gate, site)).fetchone()
        return (GateRecord.model_validate_json(row["body"]), row["sha256"]) if row else None

    def add_waiver(self, signed: SignedWaiver) -> None:
        """Store a signed waiver of one record's deviation; waivers are added, never changed."""
        w = signed.waiver
        self.db.execute("INSERT INTO waivers (run_id, gate, deviation, body, created) VALUES "
                        "(?,?,?,?,?)", (w.run_id, w.gate, w.deviation, signed.model_dump_json(),
                                        utc_now()))

    def waivers(self) -> list[SignedWaiver]:
        """Every stored waiver, oldest first."""
        rows = self.db.execute("SELECT body FROM waivers ORDER BY id")
        return [SignedWaiver.model_validate_json(r["body"]) for r in rows]
