"""The results database: every measurement of every study, in one SQLite file.

Default location: `.annotune/results.db` in the source file's directory (`default_db_path`);
`annotune tune --db PATH` picks another. One file may hold many studies.

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

Times are in milliseconds, the unit of Kernel Tuner caches and T4 files.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from annotune.annotate.problem import Problem
from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import Measurement, Number
from annotune.results.t4 import write_t4

SCHEMA_VERSION = 2
"""Stored in `PRAGMA user_version`; bump it with every change to the tables below and add the
step that converts the previous version to `_MIGRATIONS`."""

BUSY_TIMEOUT_S = 60.0
"""How long a writer waits for another process's transaction before giving up."""

_SCHEMA = """
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
    UNIQUE (study_id, config_key),
    CHECK ((status = 'ok') = (time IS NOT NULL))
);
"""

_MIGRATIONS = {
    1: ("ALTER TABLE studies ADD COLUMN device_features TEXT",),
}
"""Version N -> the statements that turn a version-N database into version N + 1, in place."""


def default_db_path(source: Path) -> Path:
    """`.annotune/results.db` beside the source: results stay with the code they measure."""
    return source.parent / ".annotune" / "results.db"


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
        content = hashlib.sha256(Path(file).read_bytes()).hexdigest()
        digest.update(f"{name}\0{content}\n".encode())
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
            source=str(problem.source),
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


class Database:
    """A SQLite file of studies and their measurements.

    Contract: one `Database` object belongs to one thread (sqlite3's rule); any number of
    processes may open the same file and write to it at once without losing rows. Records
    returned are copies: nothing the caller holds changes later. Recording a configuration
    that the study already holds keeps the first measurement and returns False, so two
    workers racing on one configuration cannot overwrite each other.

    An older schema version is converted in place on opening (`_MIGRATIONS`); its data stays.
    Raises AnnotuneError when the file is not a database or has a newer schema version.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as error:
            raise AnnotuneError(f"{path}: cannot open the results database ({error})") from None
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = FULL")
            self._conn.execute("PRAGMA foreign_keys = ON")
            self._ensure_schema()
        except sqlite3.OperationalError as error:  # locked past the timeout, disk full, ...
            self._conn.close()
            raise AnnotuneError(f"{path}: cannot use the results database ({error})") from None
        except sqlite3.DatabaseError as error:
            self._conn.close()
            raise AnnotuneError(
                f"{path}: not an annotune results database ({error})",
                hint=f"pick another file with --db, or move it aside: mv {path} {path}.old",
            ) from None
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
        back on any exception."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def _ensure_schema(self) -> None:
        with self.transaction() as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
                if tables:
                    raise sqlite3.DatabaseError("it holds tables but no annotune schema version")
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                return
            if 0 < version < SCHEMA_VERSION:
                for step in range(version, SCHEMA_VERSION):
                    for statement in _MIGRATIONS[step]:
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                return
        if version != SCHEMA_VERSION:
            newer = version > SCHEMA_VERSION
            raise AnnotuneError(
                f"{self.path}: results database has schema version {version}, "
                f"this annotune reads version {SCHEMA_VERSION}",
                hint=(
                    "upgrade annotune to read it"
                    if newer
                    else f"annotune cannot convert it; start afresh with: "
                    f"mv {self.path} {self.path}.v{version}"
                ),
            )

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
            if fresh:
                conn.execute("DELETE FROM measurements WHERE study_id = ?", (study_id,))
        return Study(study_id, key, created, _loads_or_none(stored))

    def studies(self) -> list[Study]:
        """Every study in the file, oldest first."""
        rows = self._conn.execute(
            "SELECT id, source, content_hash, device, space_json, build_json, created,"
            " device_features FROM studies ORDER BY id"
        ).fetchall()
        return [
            Study(
                id=row[0],
                key=StudyKey(row[1], row[2], json.loads(row[4]), row[3], json.loads(row[5])),
                created=row[6],
                device_features=_loads_or_none(row[7]),
            )
            for row in rows
        ]

    def record(self, study: Study, measurement: Measurement) -> bool:
        """Store and commit one measurement; False if the study already held this configuration
        (the stored one is kept). A transient failure is refused: it says nothing about the
        configuration, which must be measured again."""
        if measurement.transient:
            raise ValueError("a transient failure is never stored")
        params = {name: _plain(value) for name, value in measurement.params.items()}
        with self.transaction() as conn:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO measurements (study_id, config_key, params_json, time,"
                " times_json, status, error, compile_info_json, created)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    study.id,
                    config_key(params),
                    _dumps(params),
                    measurement.time,
                    _dumps(list(measurement.times)),
                    measurement.status,
                    measurement.error,
                    _dumps(measurement.compile_info, sort=True),
                    _now(),
                ),
            )
            return cursor.rowcount == 1

    def forget_failures(self, study: Study) -> list[Measurement]:
        """Delete the study's failed measurements (`tune --retry-failed`); return them."""
        failed = [m for m in self.measurements(study) if m.status != "ok"]
        with self.transaction() as conn:
            conn.execute(
                "DELETE FROM measurements WHERE study_id = ? AND status != 'ok'", (study.id,)
            )
        return failed

    def measurements(self, study: Study) -> list[Measurement]:
        """The study's measurements in the order they were recorded."""
        rows = self._conn.execute(
            f"SELECT {_COLUMNS} FROM measurements WHERE study_id = ? ORDER BY id", (study.id,)
        ).fetchall()
        return [_measurement(row) for row in rows]

    def lookup(self, study: Study, params: Mapping[str, Any]) -> Measurement | None:
        """The measurement of this configuration, if the study holds one."""
        row = self._conn.execute(
            f"SELECT {_COLUMNS} FROM measurements WHERE study_id = ? AND config_key = ?",
            (study.id, config_key(params)),
        ).fetchone()
        return _measurement(row) if row is not None else None

    def best(self, study: Study) -> Measurement | None:
        """The fastest valid measurement (the earliest among equals), if any."""
        row = self._conn.execute(
            f"SELECT {_COLUMNS} FROM measurements WHERE study_id = ? AND status = 'ok'"
            " ORDER BY time, id LIMIT 1",
            (study.id,),
        ).fetchone()
        return _measurement(row) if row is not None else None

    def export_t4(self, study: Study, path: Path) -> None:
        """Write the study, with its device and features, as a T4 file (`annotune.results.t4`)."""
        write_t4(
            path,
            self.measurements(study),
            device=study.key.device,
            device_features=study.device_features,
        )


_COLUMNS = "params_json, status, time, times_json, error, compile_info_json, created"


def _measurement(row: tuple) -> Measurement:
    params, status, time, times, error, compile_info, created = row
    return Measurement(
        params=json.loads(params),
        status=status,
        time=time,
        times=tuple(json.loads(times)),
        error=error,
        compile_info=json.loads(compile_info),
        created=created,
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


def _loads_or_none(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _dumps(data: Any, *, sort: bool = False) -> str:
    return json.dumps(data, sort_keys=sort, separators=(",", ":"), allow_nan=False)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
