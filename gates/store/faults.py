"""The store's one door to SQLite: every failure becomes a StoreError naming file, cause, remedy.

sqlite3 says "database or disk is full" or "file is not a database" and nothing more: not which
file, nor what to do, and as a traceback. Every statement on the store's connection (the
store's own, and those of the soak's and the checklist's tables, which share it) goes through
Guarded, so a full disk, a lock held by another process, a damaged file or a read-only mount
reaches the command line and the pytest plugin as one StoreError they report in a sentence.

IntegrityError passes unchanged: a run id or a record stored twice is a constraint the callers
rely on (and report) themselves. So does ProgrammingError: that is a bug in kvgate, and its
traceback is what a bug report needs.
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .holders import holders_said

# How long a write waits for another process's transaction before it is "locked".
BUSY_TIMEOUT = 30.0

_LOCKED = ("another process holds it locked (a kvgate run, soak or checklist still writing?)",
           "wait for that process to finish or stop it (`kvgate soak status` names a soak's "
           "runner), then run again")
_UNWRITABLE = ("it cannot be written (a read-only file, folder or mount)",
               "make the folder writable, or give a writable folder with --out")
_CAUSES = {
    sqlite3.SQLITE_FULL: ("the filesystem holding it is full",
                          "free space there, or give another folder with --out, then run again"),
    sqlite3.SQLITE_BUSY: _LOCKED,
    sqlite3.SQLITE_LOCKED: _LOCKED,
    sqlite3.SQLITE_NOTADB: ("it is not an SQLite database (garbage bytes, or another kind of "
                            "file under its name)",
                            "move it aside (keep it if it was a store: it holds earlier runs) "
                            "and run again to start a new store, or give another --out"),
    sqlite3.SQLITE_CORRUPT: ("it is damaged (truncated or corrupted)",
                             "keep a copy, try `sqlite3 {path} .recover` for what it still "
                             "holds, and move it aside to start a new store (or give another "
                             "--out)"),
    sqlite3.SQLITE_READONLY: _UNWRITABLE,
    sqlite3.SQLITE_PERM: _UNWRITABLE,
    sqlite3.SQLITE_CANTOPEN: ("it cannot be opened (its folder is missing, not writable, or on "
                              "a read-only mount)",
                              "check the folder, or give a writable one with --out"),
    sqlite3.SQLITE_IOERR: ("the disk failed to read or write it (an I/O error)",
                           "check the device (dmesg), then run again"),
}
_OS_CAUSES = {errno.ENOSPC: _CAUSES[sqlite3.SQLITE_FULL],
              errno.EDQUOT: _CAUSES[sqlite3.SQLITE_FULL], errno.EROFS: _UNWRITABLE,
              errno.EACCES: _UNWRITABLE, errno.EPERM: _UNWRITABLE,
              errno.EIO: _CAUSES[sqlite3.SQLITE_IOERR]}
_PASSED_ON = (sqlite3.IntegrityError, sqlite3.ProgrammingError)


class StoreError(Exception):
    """The store cannot be opened, read or written: which file, why, and what to do."""

    def __init__(self, path: Path, cause: str, remedy: str, said: str = "", code: int = 0,
                 what: str = "kvgate store"):
        self.path, self.cause, self.remedy, self.code = Path(path), cause, remedy, code
        told = f" ({said})" if said else ""
        super().__init__(f"{what} {self.path}: {cause}{told}: {remedy}")


def explain(path: Path, exc: sqlite3.Error | OSError, what: str = "kvgate store") -> StoreError:
    """The StoreError for one failure of SQLite (or of the filesystem under the store)."""
    if isinstance(exc, OSError):
        cause, remedy = _OS_CAUSES.get(exc.errno or 0, ("the filesystem refused it",
                                                        "check the folder, then run again"))
        return StoreError(path, cause, remedy, exc.strerror or str(exc), what=what)
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else 0  # extended codes share the low byte
    cause, remedy = _CAUSES.get(primary, ("SQLite refused it", "check the file and its folder, "
                                          "then run again"))
    if primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) and (who := holders_said(path)):
        cause = cause.replace("another process holds it locked", f"another process holds it "
                              f"locked, {who}", 1)
    return StoreError(path, cause, remedy.format(path=path), f"SQLite: {exc}", primary, what)


@contextmanager
def guarded(path: Path) -> Iterator[None]:
    """Inside: sqlite3 and OS failures leave as StoreError (constraints and bugs unchanged)."""
    try:
        yield
    except _PASSED_ON:
        raise
    except (sqlite3.Error, OSError) as exc:
        raise explain(path, exc) from exc
    except UnicodeDecodeError as exc:
        # sqlite3 decodes TEXT as UTF-8 when a row is read: bytes that are not is a damaged
        # store (found by the any-bytes property), not a bug of the caller.
        raise StoreError(path, "a text value in it is not UTF-8: the file is damaged",
                         "restore it from a bundle or move it aside; kvgate starts a new one",
                         f"{exc.reason} at byte {exc.start}") from exc


class Rows:
    """A cursor whose reads are guarded too: a damaged page may only show when it is read."""

    def __init__(self, cursor: sqlite3.Cursor, path: Path):
        self.cursor, self.path = cursor, path

    def fetchone(self):
        """The next row, or None."""
        with guarded(self.path):
            return self.cursor.fetchone()

    def fetchall(self) -> list:
        """Every row left."""
        with guarded(self.path):
            return self.cursor.fetchall()

    def __iter__(self):
        with guarded(self.path):
            yield from self.cursor


class Guarded:
    """An sqlite3 connection whose every statement raises StoreError instead of sqlite3.Error."""

    def __init__(self, connection: sqlite3.Connection, path: Path):
        self.connection, self.path = connection, path

    def execute(self, sql: str, parameters=()) -> Rows:
        """One statement; its rows are read through Rows."""
        with guarded(self.path):
            return Rows(self.connection.execute(sql, parameters), self.path)

    def executemany(self, sql: str, rows) -> Rows:
        """One statement for each parameter row."""
        with guarded(self.path):
            return Rows(self.connection.executemany(sql, rows), self.path)

    def executescript(self, script: str) -> None:
        """Several statements (the schema)."""
        with guarded(self.path):
            self.connection.executescript(script)

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open (a failed one may have been rolled back by SQLite)."""
        return self.connection.in_transaction

    def close(self) -> None:
        """Close the connection."""
        self.connection.close()


def connect(path: Path, uri: str | None = None) -> Guarded:
    """A guarded autocommit connection (the store groups statements itself), rows by name."""
    with guarded(path):
        connection = sqlite3.connect(uri or path, isolation_level=None, timeout=BUSY_TIMEOUT,
                                     uri=uri is not None)
    connection.row_factory = sqlite3.Row
    return Guarded(connection, path)


def has_table(db: Guarded, name: str) -> bool:
    """Whether the store holds a table of that name (a read-only one cannot create it)."""
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                      (name,)).fetchone() is not None


def _opened(path: Path, uri: str) -> Guarded:
    db = connect(path, uri)
    try:
        # The first read: a file that is not a store fails here, not in the caller's query.
        if not has_table(db, "runs"):
            raise StoreError(path, "it is an SQLite database, but not a kvgate store (it has "
                             "no runs table)", "give the folder of your reports with --out")
    except StoreError:
        db.close()
        raise
    return db


def open_read_only(path: Path) -> Guarded:
    """An existing store, opened to read: never created, never written.

    For the commands that only look (`kvgate soak status`, `kvgate bundle`): they must work on
    a read-only mount, and must not leave a new store behind in a folder that had none.
    """
    if not path.is_file():
        raise StoreError(path, "there is none (no kvgate run has written to this folder)",
                         "give the folder of your reports with --out")
    try:
        return _opened(path, f"{path.as_uri()}?mode=ro")
    except StoreError as exc:
        if exc.code != sqlite3.SQLITE_CANTOPEN or path.with_name(path.name + "-wal").exists():
            raise
        # A WAL store is read through its -shm file, which a read-only folder cannot hold. With
        # no -wal file beside it, everything committed is in the main file: read that alone.
        return _opened(path, f"{path.as_uri()}?mode=ro&immutable=1")
