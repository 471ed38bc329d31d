"""A results database opened for use (`open_connection`): its schema version accepted,
converted in place or refused (`ensure_schema`), every row read once before a tune writes
(`check_rows`), and the one way to write (`transaction`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from annotune.core.diagnostics import AnnotuneError
from annotune.core.interrupts import held
from annotune.results.claims import check_claim
from annotune.results.conversions import (
    all_studies,
    checked_row,
    shown,
    space_names,
    stored_measurement,
)
from annotune.results.dbfile import connect, prepare
from annotune.results.failures import failure, foreign, newer
from annotune.results.schema import (
    OLDEST_READABLE,
    SCHEMA_VERSION,
    TABLES,
    columns,
    migrate_steps,
    written_by,
)


def open_connection(path: Path, *, create: bool) -> tuple[sqlite3.Connection, str]:
    """A connection to the database at `path` (see `Database`) and the columns a measurement
    is read from (`schema.columns`). AnnotuneError, before anything is written, when the path
    is no annotune database or cannot be used."""
    writable = prepare(path, create=create)
    try:
        conn = connect(path, writable)
    except sqlite3.DatabaseError as error:
        raise failure(path, error) from None
    try:
        ensure_schema(conn, path, writable)
        measured = columns(conn)
        if create:
            check_rows(conn, path, measured)  # before a tune writes a byte beside a damaged row
        if writable:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
    except sqlite3.DatabaseError as error:
        conn.close()
        raise failure(path, error) from None
    except BaseException:
        conn.close()
        raise
    return conn, measured


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """The one way to write: BEGIN IMMEDIATE (take the write lock now), then commit, or roll
    back on any exception. Ctrl-C and SIGTERM are held until it ends (`core.interrupts`):
    a measurement being recorded is kept, and the connection is never left in a
    transaction that the best-so-far write after a stop could not start."""
    with held():
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


def ensure_schema(conn: sqlite3.Connection, path: Path, writable: bool) -> None:
    """Accept this version, convert an older one (when writable), refuse anything else.
    Read first, without a lock: a file that is not understood is never written."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise newer(path, version, written_by(conn))
    if version == 0:
        tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        what = "tables of another program" if tables else "no tables"
        raise foreign(path, f"a SQLite database with {what} and no annotune version")
    if version < SCHEMA_VERSION:
        if writable:
            with transaction(conn):  # another process may have converted it meanwhile
                migrate_steps(conn)
        elif version < OLDEST_READABLE:
            raise AnnotuneError(
                f"{path}: written by an older annotune (schema version {version}) and "
                "read-only here, so it cannot be converted to be read",
                hint="make it writable for one run (it is converted in place, its "
                "measurements kept), or copy it and use --db",
            )
        return
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    missing = ", ".join(sorted(TABLES - tables))
    if missing:
        raise foreign(path, f"schema version {version} without its tables ({missing})")


def check_rows(conn: sqlite3.Connection, path: Path, measured: str) -> None:
    """Read every row as it would be read later, so that a damaged or foreign one (text
    where a number belongs, a NULL, a configuration of another space) is an error naming
    it now, before anything is written to the file, rather than half way through a tune."""
    studies = {study.id: study for study in all_studies(conn, path)}
    names = {study.id: space_names(study.key.space) for study in studies.values()}
    # Fetched whole: a statement left open by the error would keep the file's WAL behind.
    rows = conn.execute(f"SELECT study_id, {measured} FROM measurements").fetchall()
    for study_id, *row in rows:
        study = studies.get(study_id)
        if study is None:
            with checked_row(path, "measurements", row[0]):
                raise ValueError(f"its study {shown(study_id)} is not in table 'studies'")
        stored_measurement(path, tuple(row), study, names[study_id])
    for key, *holder in conn.execute(
        "SELECT config_key, token, host, pid, pid_started, expires FROM claims"
    ).fetchall():
        with checked_row(path, "claims", f"of configuration {shown(key)}"):
            check_claim(tuple(holder))
