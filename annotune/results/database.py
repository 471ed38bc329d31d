"""The results database: every measurement of every study, in one SQLite file.

Default location: `.annotune/results.db` in the source file's directory, or, when that
directory is read-only, a directory of the user's cache named after it (`workspace`,
`default_db_path`); `annotune tune --db PATH` picks another. One file may hold many studies.

A *study* is one tuning problem measured one way. Its key is a hash over everything that can
change a measurement: the content of the source and of its local headers, the parameter space
(names, values, constraints), the device, and the build (compiler command, flags, problem size,
run arguments). Change any of these and a new study starts; nothing stale is ever reused.
Within a study a configuration is measured at most once: re-running `tune` resumes.

Each study also keeps the features of the device it was measured on (`device_features`, the
JSON of `annotune.transfer.features.DeviceFeatures`), so that its measurements can later teach a
model about other GPUs. They describe the device, not the measurement: they are not part of
the key.

Durability: each measurement is committed as soon as it is recorded (WAL journal, synchronous
FULL), so a run killed with SIGKILL loses at most the measurement it was taking. Several
processes may write the same file at once; writers wait for each other (busy timeout) instead
of failing. Like every WAL database, the file must be on a local file system (not NFS).

Several tunes of one study share the work through *claims*: a tune claims a configuration
before measuring it, and the others wait for its measurement instead of taking their own. A
claim lapses when its owner's process is gone (on this host) or its lifetime has passed.

Hostile files: a file that is not a whole annotune database (not SQLite, cut short, a newer
schema, another program's tables) is refused before SQLite writes a byte to it, with the path
and what to do; so are directories, FIFOs and devices, which SQLite would hang on or write
beside. An empty file is a new database (`touch results.db`), filled in place by a tune. Every
row read is checked (`_row`): one that holds garbage (text where a number belongs, a NULL, a
configuration of another space) is an error naming the file, the table and the row, and a
tune reads them all (`_check_rows`) before it writes anything. Commands that only read
(`existing`) never create a file, take an empty one for none, and open one they may not write
read-only.

Times are in milliseconds, the unit of Kernel Tuner caches and T4 files; energies (measured
only when a tune's objective needs them) in joules per run, stored beside the time.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import secrets
import socket
import sqlite3
import stat
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from annotune import __version__
from annotune.annotate.problem import Problem
from annotune.core.diagnostics import AnnotuneError, printable
from annotune.core.digests import bytes_digest
from annotune.core.files import NAME_MAX, bounded_name
from annotune.core.inputs import SOURCE, read_input
from annotune.core.interrupts import held
from annotune.core.records import OBJECTIVES, Measurement, Number
from annotune.results.t4 import write_t4
from annotune.results.workspace import DB_NAME, WORKSPACE_NAME, can_write, workspace

SCHEMA_VERSION = 4
"""Stored in `PRAGMA user_version`; bump it with every change to the tables below and add the
step that converts the previous version to `_MIGRATIONS`."""

BUSY_TIMEOUT_S = 60.0
"""How long a writer waits for another process's transaction before giving up."""


_SQLITE_MAGIC = b"SQLite format 3\x00"

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

_SCHEMA = (
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
)

_TABLES = frozenset({"studies", "measurements", "claims", "meta"})
"""The tables of a version-`SCHEMA_VERSION` database."""

_ENERGY_COLUMNS = (
    ("energy", "REAL CHECK (energy IS NULL OR (status = 'ok' AND energy > 0))"),
    ("energies_json", "TEXT NOT NULL DEFAULT '[]'"),
)
"""Version 4's columns of `measurements`, as `_SCHEMA` declares them."""

_MIGRATIONS = {
    1: ("ALTER TABLE studies ADD COLUMN device_features TEXT",),
    2: tuple(_CLAIM_TABLES.split(";")),
    3: tuple(
        f"ALTER TABLE measurements ADD COLUMN {name} {definition}"
        for name, definition in _ENERGY_COLUMNS
    ),
}
"""Version N -> the statements that turn a version-N database into version N + 1, in place.
A column a file has already (one a development build wrote) is not added again."""

_OLDEST_READABLE = 2
"""A read-only database older than this cannot be converted, and its tables cannot be read.
One older than version 4 is read without energies (it has none)."""

_ORDER = {"time": "time", "energy": "energy", "edp": "energy * time"}
"""What `best` sorts valid measurements by, for each objective."""


def default_db_path(source: Path) -> Path:
    """The results database of `source`: its `workspace`'s. When that is in the user's cache
    and has no database yet, one beside the read-only source (shipped with it) is read."""
    place = workspace(source)
    beside = source.parent / WORKSPACE_NAME / DB_NAME
    if place.read_only is not None and not place.db_path.exists() and beside.is_file():
        return beside
    return place.db_path


def config_key(params: Mapping[str, Any]) -> str:
    """The canonical text of a configuration: sorted, compact JSON of normalized values.

    Never a comma-joined string: values may contain commas and names may share prefixes.
    """
    return _dumps({name: _plain(value) for name, value in params.items()}, sort=True)


def sources_hash(files: Sequence[str | Path]) -> str:
    """SHA-256 over each file's path (relative to the first file's directory) and content.

    The first file is the source; the others are its local headers (`Problem.files`).
    """
    base = Path(files[0]).parent
    digest = hashlib.sha256()
    for file in files:
        name = os.path.relpath(file, base).replace(os.sep, "/")
        content = bytes_digest(read_input(Path(file), SOURCE))
        digest.update(os.fsencode(f"{name}\0{content}\n"))  # a name's bytes, UTF-8 or not
    return digest.hexdigest()


@dataclass(frozen=True)
class StudyKey:
    """Everything that must match for an old measurement to be reused.

    `source` is for display only (the same content measured from another path is the same
    study). `space` and `build` are JSON-able dicts compared by their canonical JSON; `build`
    holds whatever the build and run stages let change a time: compiler command and flags,
    problem size, program arguments.
    """

    source: str
    content_hash: str
    space: Mapping[str, Any]
    device: str
    build: Mapping[str, Any]

    @classmethod
    def for_problem(cls, problem: Problem, *, device: str, build: Mapping[str, Any]) -> StudyKey:
        """The key of `problem` (its files are read and hashed now) measured on `device`."""
        space = {
            "params": [{"name": p.name, "values": list(p.values)} for p in problem.params],
            "constraints": [c.text for c in problem.constraints],
        }
        return cls(
            source=printable(str(problem.source)),  # for display: a name's odd bytes escaped
            content_hash=sources_hash(problem.files),
            space=space,
            device=device,
            build=build,
        )

    @property
    def digest(self) -> str:
        """The stored key: SHA-256 of the canonical JSON of everything but `source`."""
        return hashlib.sha256(
            _dumps(
                {
                    "content_hash": self.content_hash,
                    "space": self.space,
                    "device": self.device,
                    "build": self.build,
                },
                sort=True,
            ).encode()
        ).hexdigest()


@dataclass(frozen=True)
class Study:
    """A study as stored: its row id, its key, when it was first opened (ISO 8601, UTC) and the
    features of its device (`DeviceFeatures.to_json()`; None when nobody stored them)."""

    id: int
    key: StudyKey
    created: str
    device_features: dict | None = None


@dataclass(frozen=True)
class Owner:
    """Who holds a claim: one tune (`token`), in a process on a host. `started` is the
    process's start time as the OS gives it ("" where it does not), so that a reused pid is
    not mistaken for the tune that died."""

    token: str
    host: str
    pid: int
    started: str

    @classmethod
    def here(cls) -> Owner:
        """A new owner: a tune in this process."""
        pid = os.getpid()
        return cls(secrets.token_hex(8), socket.gethostname(), pid, _process_started(pid))


_P = ParamSpec("_P")
_T = TypeVar("_T")


def _reported(method: Callable[_P, _T]) -> Callable[_P, _T]:
    """SQLite's failures of the file (locked, read-only, corrupt, disk full) as AnnotuneError
    with the path and what to do; misuse of SQL (a bug in annotune) stays an exception."""

    @functools.wraps(method)
    def reporting(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return method(*args, **kwargs)
        except (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError):
            raise
        except sqlite3.DatabaseError as error:
            raise _failure(args[0].path, error) from None  # type: ignore[attr-defined]

    return reporting


class Database:
    """A SQLite file of studies and their measurements.

    Contract: one `Database` object belongs to one thread (sqlite3's rule); any number of
    processes may open the same file and write to it at once without losing rows. Records
    returned are copies: nothing the caller holds changes later. Recording a configuration
    that the study already holds keeps the first measurement and returns False, so two
    workers racing on one configuration cannot overwrite each other.

    `create` (a tune): a missing file is made, whole (`_create`), and the file must be
    writable. Without it (`existing`: export, explain, predict) nothing is created, and a file
    that may not be written is opened read-only. An older schema version is converted in place
    on opening (`_MIGRATIONS`); its data stays. AnnotuneError, before anything is written, when
    the path is no annotune database or cannot be used (see the module docstring).
    """

    def __init__(self, path: Path, *, create: bool = True) -> None:
        self.path = path
        if create and not os.path.lexists(path):
            _create(path)
        new = create and _empty(path)  # an empty file given as --db: a new database
        if not new:
            _check_file(path)
        writable = can_write(path) and can_write(path.parent)
        if create and not writable:
            raise _read_only(path)
        if new:
            _fill(path)
        try:
            self._conn = _connect(path, writable)
        except sqlite3.DatabaseError as error:
            raise _failure(path, error) from None
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            self._ensure_schema(writable)
            self._columns = _columns(self._conn)
            if create:
                self._check_rows()  # before a tune writes a byte beside a damaged row
            if writable:
                self._conn.execute("PRAGMA journal_mode = WAL")
                self._conn.execute("PRAGMA synchronous = FULL")
            self._conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.DatabaseError as error:
            self._conn.close()
            raise _failure(path, error) from None
        except BaseException:
            self._conn.close()
            raise

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """The one way to write: BEGIN IMMEDIATE (take the write lock now), then commit, or roll
        back on any exception. Ctrl-C and SIGTERM are held until it ends (`core.interrupts`):
        a measurement being recorded is kept, and the connection is never left in a
        transaction that the best-so-far write after a stop could not start."""
        with held():
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    def _ensure_schema(self, writable: bool) -> None:
        """Accept this version, convert an older one (when writable), refuse anything else.
        Read first, without a lock: a file that is not understood is never written."""
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise _newer(self.path, version, _written_by(self._conn))
        if version == 0:
            tables = self._conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            what = "tables of another program" if tables else "no tables"
            raise _foreign(self.path, f"a SQLite database with {what} and no annotune version")
        if version < SCHEMA_VERSION:
            if writable:
                self._migrate()
            elif version < _OLDEST_READABLE:
                raise AnnotuneError(
                    f"{self.path}: written by an older annotune (schema version {version}) and "
                    "read-only here, so it cannot be converted to be read",
                    hint="make it writable for one run (it is converted in place, its "
                    "measurements kept), or copy it and use --db",
                )
            return
        tables = {row[0] for row in self._conn.execute("SELECT name FROM sqlite_master")}
        missing = ", ".join(sorted(_TABLES - tables))
        if missing:
            raise _foreign(self.path, f"schema version {version} without its tables ({missing})")

    def _check_rows(self) -> None:
        """Read every row as it would be read later, so that a damaged or foreign one (text
        where a number belongs, a NULL, a configuration of another space) is an error naming
        it now, before anything is written to the file, rather than half way through a tune."""
        studies = {study.id: study for study in self.studies()}
        names = {study.id: _space_names(study.key.space) for study in studies.values()}
        # Fetched whole: a statement left open by the error would keep the file's WAL behind.
        rows = self._conn.execute(f"SELECT study_id, {self._columns} FROM measurements").fetchall()
        for study_id, *row in rows:
            study = studies.get(study_id)
            if study is None:
                with _row(self.path, "measurements", row[0]):
                    raise ValueError(f"its study {_shown(study_id)} is not in table 'studies'")
            _measurement(self.path, tuple(row), study, names[study_id])
        for key, *holder in self._conn.execute(
            "SELECT config_key, token, host, pid, pid_started, expires FROM claims"
        ).fetchall():
            with _row(self.path, "claims", f"of configuration {_shown(key)}"):
                _check_claim(tuple(holder))

    def _migrate(self) -> None:
        """Convert an older version in place, under the write lock; another process may have
        converted it meanwhile."""
        with self.transaction() as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            for step in range(version, SCHEMA_VERSION):
                for statement in _MIGRATIONS[step]:
                    if statement.strip() and not _adds_existing_column(conn, statement):
                        conn.execute(statement)
            if version < SCHEMA_VERSION:
                _stamp(conn)

    @_reported
    def open_study(
        self,
        key: StudyKey,
        *,
        fresh: bool = False,
        device_features: Mapping[str, Any] | None = None,
    ) -> Study:
        """The study with this key, created if new; `fresh` deletes its measurements first.

        `device_features` (JSON-able, e.g. `DeviceFeatures.to_json()`) are stored with a new
        study, and with an existing one that has none yet. Features already stored are kept,
        since they describe the device its measurements were taken on, unless `fresh` starts
        those measurements over.
        """
        features = None if device_features is None else _dumps(dict(device_features), sort=True)
        with self.transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO studies (key, source, content_hash, device, space_json,"
                " build_json, created, device_features) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key.digest,
                    key.source,
                    key.content_hash,
                    key.device,
                    _dumps(key.space, sort=True),
                    _dumps(key.build, sort=True),
                    _now(),
                    features,
                ),
            )
            if features is not None:
                conn.execute(
                    "UPDATE studies SET device_features = ?"
                    " WHERE key = ? AND (device_features IS NULL OR ?)",
                    (features, key.digest, fresh),
                )
            study_id, created, stored = conn.execute(
                "SELECT id, created, device_features FROM studies WHERE key = ?", (key.digest,)
            ).fetchone()
            with _row(self.path, "studies", study_id):
                if not isinstance(created, str):
                    raise ValueError(f"'created' is {created!r}, not a time")
                features = _features(stored)
            if fresh:
                conn.execute("DELETE FROM measurements WHERE study_id = ?", (study_id,))
        return Study(study_id, key, created, features)

    @_reported
    def studies(self) -> list[Study]:
        """Every study in the file, oldest first."""
        rows = self._conn.execute(
            "SELECT id, source, content_hash, device, space_json, build_json, created,"
            " device_features FROM studies ORDER BY id"
        ).fetchall()
        return [_study(self.path, row) for row in rows]

    @_reported
    def record(self, study: Study, measurement: Measurement) -> bool:
        """Store and commit one measurement, and end any claim on its configuration in the same
        transaction; False if the study already held this configuration (the stored one is
        kept). A transient failure is refused: it says nothing about the configuration, which
        must be measured again."""
        if measurement.transient:
            raise ValueError("a transient failure is never stored")
        params = {name: _plain(value) for name, value in measurement.params.items()}
        key = config_key(params)
        with self.transaction() as conn:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO measurements (study_id, config_key, params_json, time,"
                " times_json, status, error, compile_info_json, created, energy, energies_json)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    study.id,
                    key,
                    _dumps(params),
                    measurement.time,
                    _dumps(list(measurement.times)),
                    measurement.status,
                    measurement.error,
                    _dumps(measurement.compile_info, sort=True),
                    _now(),
                    measurement.energy,
                    _dumps(list(measurement.energies)),
                ),
            )
            conn.execute(
                "DELETE FROM claims WHERE study_id = ? AND config_key = ?", (study.id, key)
            )
            return cursor.rowcount == 1

    @_reported
    def claim(
        self, study: Study, params: Mapping[str, Any], owner: Owner, *, lifetime: float
    ) -> bool:
        """Claim a configuration for `owner` to measure; False when it is measured already or
        another tune's claim on it stands (its process alive, its lifetime not passed). A claim
        lapses `lifetime` seconds from now: the longest its owner may take to measure it."""
        key = config_key(params)
        now = time.time()
        with self.transaction() as conn:
            measured = conn.execute(
                "SELECT 1 FROM measurements WHERE study_id = ? AND config_key = ?", (study.id, key)
            ).fetchone()
            if measured is not None:
                return False
            holder = conn.execute(
                "SELECT token, host, pid, pid_started, expires FROM claims"
                " WHERE study_id = ? AND config_key = ?",
                (study.id, key),
            ).fetchone()
            if holder is not None:
                with _row(self.path, "claims", f"of configuration {key}"):
                    _check_claim(holder)
            if holder is not None and _stands(holder, owner, now):
                return False
            conn.execute(
                "INSERT OR REPLACE INTO claims (study_id, config_key, token, host, pid,"
                " pid_started, claimed, expires) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    study.id,
                    key,
                    owner.token,
                    owner.host,
                    owner.pid,
                    owner.started,
                    _now(),
                    now + lifetime,
                ),
            )
        return True

    @_reported
    def release(self, study: Study, params: Mapping[str, Any], owner: Owner) -> None:
        """End `owner`'s claim on a configuration it will not record (a transient failure,
        Ctrl-C): another tune may measure it at once."""
        with self.transaction() as conn:
            conn.execute(
                "DELETE FROM claims WHERE study_id = ? AND config_key = ? AND token = ?",
                (study.id, config_key(params), owner.token),
            )

    @_reported
    def forget_failures(self, study: Study) -> list[Measurement]:
        """Delete the study's failed measurements (`tune --retry-failed`); return them."""
        failed = [m for m in self.measurements(study) if m.status != "ok"]
        with self.transaction() as conn:
            conn.execute(
                "DELETE FROM measurements WHERE study_id = ? AND status != 'ok'", (study.id,)
            )
        return failed

    @_reported
    def measurements(self, study: Study) -> list[Measurement]:
        """The study's measurements in the order they were recorded."""
        rows = self._conn.execute(
            f"SELECT {self._columns} FROM measurements WHERE study_id = ? ORDER BY id", (study.id,)
        ).fetchall()
        return [_measurement(self.path, row, study) for row in rows]

    @_reported
    def lookup(self, study: Study, params: Mapping[str, Any]) -> Measurement | None:
        """The measurement of this configuration, if the study holds one."""
        row = self._conn.execute(
            f"SELECT {self._columns} FROM measurements WHERE study_id = ? AND config_key = ?",
            (study.id, config_key(params)),
        ).fetchone()
        return _measurement(self.path, row, study) if row is not None else None

    @_reported
    def best(self, study: Study, objective: str = "time") -> Measurement | None:
        """The valid measurement with the least value of `objective` (`OBJECTIVES`: the
        fastest, the least energy, the least energy x time; the earliest among equals), if
        any. Measurements without an energy have no value for "energy" or "edp"."""
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, not {objective!r}")
        order = _ORDER[objective]
        row = self._conn.execute(
            f"SELECT {self._columns} FROM measurements WHERE study_id = ? AND status = 'ok'"
            f" AND {order} IS NOT NULL ORDER BY {order}, id LIMIT 1",
            (study.id,),
        ).fetchone()
        return _measurement(self.path, row, study) if row is not None else None

    def export_t4(self, study: Study, path: Path) -> None:
        """Write the study, with its device and features, as a T4 file (`annotune.results.t4`)."""
        write_t4(
            path,
            self.measurements(study),
            device=study.key.device,
            device_features=study.device_features,
        )


@contextmanager
def existing(path: Path) -> Iterator[Database | None]:
    """The database at `path` for reading, None when nothing is there: reading creates no
    file. A directory, FIFO or device there is an AnnotuneError, never "no database"."""
    if not os.path.lexists(path) or _empty(path):  # an empty file: no database yet
        yield None
        return
    with Database(path, create=False) as database:
        yield database


def _connect(path: Path, writable: bool) -> sqlite3.Connection:
    """Read-write; else read-only, and in a directory that may not be written, `immutable`: a
    WAL database's reader must otherwise make its `-shm` file beside it."""
    if writable:
        return sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    options = "mode=ro" if can_write(path.parent) else "mode=ro&immutable=1"
    uri = f"{path.absolute().as_uri()}?{options}"
    return sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)


def _create(path: Path) -> None:
    """Make a new database at `path` whole: built under a name of its own, then linked into
    place (which fails if another process made one first: theirs is used). No process ever
    sees a half-made file, so an empty or tableless file is never one of annotune's."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        unique = f".{os.getpid()}.{secrets.token_hex(4)}.new"
        room = NAME_MAX - 1 - len(unique) - len("-journal")  # SQLite's files beside it
        temp = path.with_name(f".{bounded_name(path.name, room)}{unique}")
        try:
            conn = sqlite3.connect(temp, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("BEGIN IMMEDIATE")
                _create_tables(conn)
                conn.execute("COMMIT")
            finally:
                conn.close()
            with suppress(FileExistsError):  # another process made it first: theirs is used
                os.link(temp, path)
        finally:
            for leftover in ("", "-wal", "-shm"):
                Path(f"{temp}{leftover}").unlink(missing_ok=True)
    except (OSError, sqlite3.Error) as error:
        raise AnnotuneError(
            f"{path}: cannot create the results database ({_reason(error)})",
            hint="pick a writable place with --db",
        ) from None


def _create_tables(conn: sqlite3.Connection) -> None:
    """annotune's tables and version, in the transaction `conn` holds."""
    for statement in _SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)
    _stamp(conn)


def _empty(path: Path) -> bool:
    """Whether `path` is an empty regular file with no write-ahead log beside it: a new
    database to be (`touch results.db; annotune tune --db results.db`), never a WAL
    database whose pages are all still in its log."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size == 0 and not os.path.lexists(f"{path}-wal")


def _fill(path: Path) -> None:
    """Make the empty file at `path` a new database, in place, under SQLite's write lock: a
    process that filled it first is seen, and then nothing is done."""
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if version == 0 and tables == 0:
                _create_tables(conn)
            conn.execute("COMMIT")
        finally:
            conn.close()
    except sqlite3.Error as error:
        raise _failure(path, error) from None


def _stamp(conn: sqlite3.Connection) -> None:
    """Set the schema version and who wrote it (a newer file is then refused by name)."""
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    conn.execute(
        "INSERT OR REPLACE INTO meta (name, value) VALUES ('written_by', ?)",
        (f"annotune {__version__}",),
    )


def _written_by(conn: sqlite3.Connection) -> str:
    """The annotune that last set the schema version, when the file says ("" otherwise)."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE name = 'written_by'").fetchone()
    except sqlite3.DatabaseError:
        return ""
    return str(row[0]) if row else ""


def _check_file(path: Path) -> None:
    """Refuse, before SQLite opens it, what cannot be a whole SQLite database: a directory,
    a FIFO or device (SQLite would block on one, or write a journal beside /dev/null), a file
    that is empty, not SQLite, or shorter than its header says (cut short)."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise AnnotuneError(f"no results database at {path}") from None
    except OSError as error:
        raise AnnotuneError(
            f"{path}: cannot reach the results database ({_reason(error)})"
        ) from None
    if stat.S_ISDIR(info.st_mode):
        raise AnnotuneError(
            f"{path} is a directory, not a results database",
            hint="the results database is a file: move the directory aside, or give --db a "
            "file path",
        )
    if not stat.S_ISREG(info.st_mode):
        raise AnnotuneError(
            f"{path} is not a regular file (a FIFO, device or socket), so not a results database",
            hint="--db names a database file, e.g. --db results.db",
        )
    try:
        with path.open("rb") as file:
            head = file.read(100)
    except OSError as error:
        raise AnnotuneError(
            f"{path}: cannot read the results database ({_reason(error)})",
            hint=f"check its permissions (ls -l {path}), or use --db for another database",
        ) from None
    if not head:
        raise _foreign(path, "an empty file")
    if len(head) < 100 or not head.startswith(_SQLITE_MAGIC):
        raise _foreign(path, "not a SQLite file")
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    size_valid = head[24:28] == head[92:96]  # the header's page count is current
    if page_size < 512 or (size_valid and info.st_size < page_size * pages):
        raise _foreign(
            path, f"cut short: {info.st_size} bytes of the {page_size * pages} its header declares"
        )


def _foreign(path: Path, why: str) -> AnnotuneError:
    return AnnotuneError(f"{path}: not an annotune results database ({why})", hint=_aside(path))


def _aside(path: Path) -> str:
    return (
        f"nothing in it was changed; move it aside and run again (mv {path} {path}.broken), "
        "or use --db for another database"
    )


def _newer(path: Path, version: int, written_by: str) -> AnnotuneError:
    by = written_by or "a newer annotune"
    return AnnotuneError(
        f"{path}: written by {by} (schema version {version}); this annotune {__version__} "
        f"reads schema version {SCHEMA_VERSION}",
        hint="upgrade annotune to read it, or use --db for another database; nothing in it "
        "was changed",
    )


def _read_only(path: Path) -> AnnotuneError:
    where = path if not can_write(path) else path.parent
    return AnnotuneError(
        f"{path}: the results database cannot be written ({where} is read-only)",
        hint=f"make it writable (chmod u+w {where}), or use --db for a database elsewhere",
    )


def _failure(path: Path, error: sqlite3.Error) -> AnnotuneError:
    """SQLite's error about the file at `path`, said as what happened and what to do."""
    name = getattr(error, "sqlite_errorname", "")
    text = str(error)
    if name in ("SQLITE_BUSY", "SQLITE_LOCKED") or "locked" in text:
        return AnnotuneError(
            f"{path}: the results database is locked: another annotune (or another program) "
            f"holds it ({text})",
            hint="wait for it to finish and run again, or use --db for another database",
        )
    if name.startswith("SQLITE_READONLY") or "readonly" in text:
        return _read_only(path)
    if name == "SQLITE_FULL" or "full" in text:
        return AnnotuneError(
            f"{path}: the disk is full ({text}); every measurement committed so far is kept",
            hint="free some space and run again: the tune resumes",
        )
    if isinstance(error, sqlite3.OperationalError) and name not in (
        "SQLITE_CORRUPT",
        "SQLITE_NOTADB",
    ):
        return AnnotuneError(
            f"{path}: cannot use the results database ({text})",
            hint="check the file and the disk it is on, or use --db for another database",
        )
    return _foreign(path, text)


def _reason(error: BaseException) -> str:
    return getattr(error, "strerror", None) or str(error)


def _stands(holder: tuple, owner: Owner, now: float) -> bool:
    """Whether another tune's claim (token, host, pid, pid_started, expires) still holds:
    not `owner`'s own, not past its lifetime, and its process alive. A claim of another tune
    of this very process was left by one that ended (annotune runs one tune at a time)."""
    token, host, pid, started, expires = holder
    if token == owner.token or expires <= now:
        return False
    if host != owner.host:
        return True  # its process cannot be asked from here: the lifetime decides
    return pid != owner.pid and _running(pid, started)


def _running(pid: int, started: str) -> bool:
    """Whether process `pid` (POSIX), started at `started` when that is known, still runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: alive
    now_started = _process_started(pid)
    return not (started and now_started) or now_started == started


def _process_started(pid: int) -> str:
    """When process `pid` started, in clock ticks since boot (Linux's /proc), "" elsewhere:
    with the pid it names one process, even after the pid is reused."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return ""
    return fields[19] if len(fields) > 19 else ""


_COLUMNS = "params_json, status, time, times_json, error, compile_info_json, created"


def _adds_existing_column(conn: sqlite3.Connection, statement: str) -> bool:
    """Whether `statement` is an `ALTER TABLE T ADD COLUMN C ...` of a column T has."""
    words = statement.split()
    if words[:2] != ["ALTER", "TABLE"] or words[3:5] != ["ADD", "COLUMN"]:
        return False
    return words[5] in {row[1] for row in conn.execute(f"PRAGMA table_info({words[2]})")}


def _columns(conn: sqlite3.Connection) -> str:
    """What a measurement is read from: with the energy columns where the table has them (a
    read-only database of version 3 or older, which cannot be converted, has none)."""
    names = {row[1] for row in conn.execute("PRAGMA table_info(measurements)")}
    energy = "energy, energies_json" if "energy" in names else "NULL, '[]'"
    return f"id, {_COLUMNS}, {energy}"


@contextmanager
def _row(path: Path, table: str, row: object) -> Iterator[None]:
    """Turn what a damaged or foreign row raises while it is checked (text where a number
    belongs, a NULL, JSON that is not, a configuration of another space) into an error that
    names the database, the table and the row. Nothing is written: reading changes nothing."""
    try:
        yield
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as error:
        which = f"row {row}" if isinstance(row, int) else f"the row {row}"
        raise AnnotuneError(
            f"{path}: {which} of table '{table}' is damaged or not annotune's ({error})",
            hint=_aside(path),
        ) from None


def _json(text: object, kind: type, what: str) -> Any:
    """A column's JSON text, decoded, which must be a `kind` (dict or list)."""
    if not isinstance(text, str):
        raise ValueError(f"'{what}' is {_shown(text)}, not JSON text")
    data = json.loads(text)
    if not isinstance(data, kind):
        raise ValueError(f"'{what}' holds {_shown(data)}, not a JSON {kind.__name__}")
    return data


def _shown(value: object) -> str:
    text = "NULL" if value is None else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _finite(value: object, what: str) -> float:
    """A number column or JSON number: an int or float, finite, never a bool or text."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"'{what}' is {_shown(value)}, not a finite number")
    return value


def _space_names(space: object) -> set[str] | None:
    """The names of a study's parameters, as its key's space stores them (None or none: it
    lists none, as no study of a source does, so there is nothing to check a row against).
    Their values are checked to be numbers; a measurement's value outside them is not
    refused (a domain narrowed by hand)."""
    if not isinstance(space, dict):
        raise ValueError(f"'space_json' holds {_shown(space)}, not a space")
    if "params" not in space:
        return None
    if not isinstance(space["params"], list):
        raise ValueError(f"'space_json' holds parameters {_shown(space['params'])}")
    names: set[str] = set()
    for param in space["params"]:
        if not isinstance(param, dict) or not isinstance(param.get("name"), str):
            raise ValueError(f"'space_json' holds a parameter {_shown(param)}")
        values = param.get("values")
        if not isinstance(values, list):
            raise ValueError(f"'space_json' holds values {_shown(values)} of {param['name']}")
        names.add(param["name"])
        for v in values:
            _finite(v, "space_json")
    if not isinstance(space.get("constraints", []), list):
        raise ValueError(f"'space_json' holds constraints {_shown(space['constraints'])}")
    return names


def _features(text: object) -> dict | None:
    return None if text is None else _json(text, dict, "device_features")


def _study(path: Path, row: tuple) -> Study:
    """A study as stored, every column checked."""
    with _row(path, "studies", row[0]):
        study_id, source, content_hash, device, space, build, created, features = row
        for name, value in (
            ("source", source),
            ("content_hash", content_hash),
            ("device", device),
            ("created", created),
        ):
            if not isinstance(value, str):
                raise ValueError(f"'{name}' is {_shown(value)}, not text")
        if isinstance(study_id, bool) or not isinstance(study_id, int):
            raise ValueError(f"'id' is {_shown(study_id)}")
        space = _json(space, dict, "space_json")
        _space_names(space)
        key = StudyKey(source, content_hash, space, device, _json(build, dict, "build_json"))
        return Study(study_id, key, created, _features(features))


def _check_claim(holder: tuple) -> None:
    token, host, pid, started, expires = holder
    for name, value in (("token", token), ("host", host), ("pid_started", started)):
        if not isinstance(value, str):
            raise ValueError(f"'{name}' is {_shown(value)}, not text")
    if isinstance(pid, bool) or not isinstance(pid, int) or pid < 0:
        raise ValueError(f"'pid' is {_shown(pid)}, not a process id")
    _finite(expires, "expires")


def _measurement(
    path: Path, row: tuple, study: Study, names: set[str] | None = None
) -> Measurement:
    """A measurement as stored, every column checked, its configuration one of `study`'s
    space: a foreign or damaged row is an error naming the database, never a traceback."""
    row_id, *columns = row
    with _row(path, "measurements", row_id):
        params, status, time, times, error, compile_info, created, energy, energies = columns
        params = _json(params, dict, "params_json")
        space = names if names is not None else _space_names(study.key.space)
        if space and set(params) != space:
            raise ValueError(
                f"its configuration {_shown(params)} names other parameters than its study's "
                f"({', '.join(sorted(space)) or 'none'})"
            )
        for name, value in params.items():
            _finite(value, f"params_json {name}")
        if not isinstance(status, str):
            raise ValueError(f"'status' is {_shown(status)}, not text")
        if time is not None:
            _finite(time, "time")
        if not isinstance(error, str | None) or not isinstance(created, str | None):
            raise ValueError(f"'error' or 'created' is {_shown(error)}, not text")
        if energy is not None:
            _finite(energy, "energy")
        return Measurement(
            params=params,
            status=status,
            time=time,
            times=tuple(_finite(t, "times_json") for t in _json(times, list, "times_json")),
            error=error or "",
            compile_info=_json(compile_info, dict, "compile_info_json"),
            created=created,
            energy=energy,
            energies=tuple(
                _finite(e, "energies_json") for e in _json(energies, list, "energies_json")
            ),
        )


def _plain(value: Any) -> Number:
    """A parameter value as a JSON number: numpy scalars unwrapped, 32.0 the same as 32."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, int | float):
        return value
    raise TypeError(f"parameter values are numbers, not {value!r}")


def _dumps(data: Any, *, sort: bool = False) -> str:
    return json.dumps(data, sort_keys=sort, separators=(",", ":"), allow_nan=False)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
