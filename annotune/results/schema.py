"""The results database's tables, the schema version a file carries and the steps that convert
an older version in place (the energy columns among them)."""

from __future__ import annotations

import sqlite3

from annotune import __version__
from annotune.results.final_checks import TABLE as FINAL_CHECKS

SCHEMA_VERSION = 5
"""Stored in `PRAGMA user_version`; bump it with every change to the tables below and add the
step that converts the previous version to `MIGRATIONS`."""

_CLAIM_TABLES = """
CREATE TABLE claims (
    study_id INTEGER NOT NULL REFERENCES studies(id) ON DELETE CASCADE,
    config_key TEXT NOT NULL,
    token TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    pid_started TEXT NOT NULL,
    claimed TEXT NOT NULL,
    expires REAL NOT NULL,
    PRIMARY KEY (study_id, config_key)
);
CREATE TABLE meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""

SCHEMA = (
    """
CREATE TABLE studies (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    source TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    device TEXT NOT NULL,
    space_json TEXT NOT NULL,
    build_json TEXT NOT NULL,
    created TEXT NOT NULL,
    device_features TEXT
);
CREATE TABLE measurements (
    id INTEGER PRIMARY KEY,
    study_id INTEGER NOT NULL REFERENCES studies(id) ON DELETE CASCADE,
    config_key TEXT NOT NULL,
    params_json TEXT NOT NULL,
    time REAL,
    times_json TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'compile_error', 'runtime_error', 'timeout',
                                           'wrong_output')),
    error TEXT NOT NULL,
    compile_info_json TEXT NOT NULL,
    created TEXT NOT NULL,
    energy REAL CHECK (energy IS NULL OR (status = 'ok' AND energy > 0)),
    energies_json TEXT NOT NULL DEFAULT '[]',
    UNIQUE (study_id, config_key),
    CHECK ((status = 'ok') = (time IS NOT NULL))
);
"""
    + _CLAIM_TABLES
    + ";"
    + FINAL_CHECKS
)

TABLES = frozenset({"studies", "measurements", "claims", "meta", "final_checks"})
"""The tables of a version-`SCHEMA_VERSION` database."""

_ENERGY_COLUMNS = (
    ("energy", "REAL CHECK (energy IS NULL OR (status = 'ok' AND energy > 0))"),
    ("energies_json", "TEXT NOT NULL DEFAULT '[]'"),
)
"""Version 4's columns of `measurements`, as `SCHEMA` declares them."""

MIGRATIONS = {
    1: ("ALTER TABLE studies ADD COLUMN device_features TEXT",),
    2: tuple(_CLAIM_TABLES.split(";")),
    3: tuple(
        f"ALTER TABLE measurements ADD COLUMN {name} {definition}"
        for name, definition in _ENERGY_COLUMNS
    ),
    4: (FINAL_CHECKS.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1),),
}
"""Version N -> the statements that turn a version-N database into version N + 1, in place.
A column a file has already (one a development build wrote) is not added again."""

OLDEST_READABLE = 2
"""A read-only database older than this cannot be converted, and its tables cannot be read.
One older than version 4 is read without energies (it has none); one older than version 5 has
no final checks stored (a rerun checks again)."""

_COLUMNS = "params_json, status, time, times_json, error, compile_info_json, created"


def create_tables(conn: sqlite3.Connection) -> None:
    """annotune's tables and version, in the transaction `conn` holds."""
    for statement in SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)
    stamp(conn)


def migrate_steps(conn: sqlite3.Connection) -> None:
    """Convert the version `conn`'s file has to this one, in the transaction `conn` holds
    (under the write lock: another process may have converted it meanwhile)."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    for step in range(version, SCHEMA_VERSION):
        for statement in MIGRATIONS[step]:
            if statement.strip() and not _adds_existing_column(conn, statement):
                conn.execute(statement)
    if version < SCHEMA_VERSION:
        stamp(conn)


def stamp(conn: sqlite3.Connection) -> None:
    """Set the schema version and who wrote it (a newer file is then refused by name)."""
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    conn.execute(
        "INSERT OR REPLACE INTO meta (name, value) VALUES ('written_by', ?)",
        (f"annotune {__version__}",),
    )


def written_by(conn: sqlite3.Connection) -> str:
    """The annotune that last set the schema version, when the file says ("" otherwise)."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE name = 'written_by'").fetchone()
    except sqlite3.DatabaseError:
        return ""
    return str(row[0]) if row else ""


def _adds_existing_column(conn: sqlite3.Connection, statement: str) -> bool:
    """Whether `statement` is an `ALTER TABLE T ADD COLUMN C ...` of a column T has."""
    words = statement.split()
    if words[:2] != ["ALTER", "TABLE"] or words[3:5] != ["ADD", "COLUMN"]:
        return False
    return words[5] in {row[1] for row in conn.execute(f"PRAGMA table_info({words[2]})")}


def columns(conn: sqlite3.Connection) -> str:
    """What a measurement is read from: with the energy columns where the table has them (a
    read-only database of version 3 or older, which cannot be converted, has none)."""
    names = {row[1] for row in conn.execute("PRAGMA table_info(measurements)")}
    energy = "energy, energies_json" if "energy" in names else "NULL, '[]'"
    return f"id, {_COLUMNS}, {energy}"
