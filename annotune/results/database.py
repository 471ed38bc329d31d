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

Several tunes of one study share the work through *claims* (`claims`): a tune claims a
configuration before measuring it, and the others wait for its measurement instead of taking
their own. A claim lapses when its owner's process is gone (on this host) or its lifetime has
passed.

Hostile files: a file that is not a whole annotune database (not SQLite, cut short, a newer
schema, another program's tables) is refused before SQLite writes a byte to it, with the path
and what to do (`dbfile`, `failures`); so are directories, FIFOs and devices, which SQLite
would hang on or write beside. An empty file is a new database (`touch results.db`), filled in
place by a tune. Every row read is checked (`conversions`): one that holds garbage (text where
a number belongs, a NULL, a configuration of another space) is an error naming the file, the
table and the row, and a tune reads them all (`opening.check_rows`) before it writes anything.
Commands that only read (`existing`) never create a file, take an empty one for none, and open
one they may not write read-only.

Times are in milliseconds, the unit of Kernel Tuner caches and T4 files; energies (measured
only when a tune's objective needs them) in joules per run, stored beside the time.

This module holds the queries (`Database`); the rest of the store is one module per concern:
the tables and their conversions (`schema`), the file before it is used (`dbfile`), opening it
for use (`opening`), what identifies what is stored (`keys`), rows <-> records
(`conversions`), claims (`claims`) and the errors said about the file (`failures`). What the
session relies on of it is `annotune.results.storage.Storage`.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from annotune.core.records import OBJECTIVES, Measurement
from annotune.results import final_checks
from annotune.results.claims import Owner, take
from annotune.results.conversions import (
    all_studies,
    checked_row,
    features,
    measurement_values,
    stored_measurement,
    study_values,
)
from annotune.results.dbfile import empty
from annotune.results.failures import reported
from annotune.results.keys import Study, StudyKey, config_key, dumps, plain, sources_hash
from annotune.results.opening import open_connection
from annotune.results.opening import transaction as in_transaction
from annotune.results.schema import SCHEMA_VERSION
from annotune.results.t4 import write_t4
from annotune.results.workspace import default_db_path

__all__ = [
    "SCHEMA_VERSION",
    "Database",
    "Measurement",
    "Owner",
    "Study",
    "StudyKey",
    "config_key",
    "default_db_path",
    "existing",
    "sources_hash",
]

_ORDER = {"time": "time", "energy": "energy", "edp": "energy * time"}
"""What `best` sorts valid measurements by, for each objective."""


class Database:
    """A SQLite file of studies and their measurements.

    Contract: one `Database` object belongs to one thread (sqlite3's rule); any number of
    processes may open the same file and write to it at once without losing rows. Records
    returned are copies: nothing the caller holds changes later. Recording a configuration
    that the study already holds keeps the first measurement and returns False, so two
    workers racing on one configuration cannot overwrite each other.

    `create` (a tune): a missing file is made, whole (`dbfile`), and the file must be
    writable. Without it (`existing`: export, explain, predict) nothing is created, and a file
    that may not be written is opened read-only. An older schema version is converted in place
    on opening (`schema.MIGRATIONS`); its data stays. AnnotuneError, before anything is
    written, when the path is no annotune database or cannot be used (see the module
    docstring).
    """

    def __init__(self, path: Path, *, create: bool = True) -> None:
        self.path = path
        self._conn, self._columns = open_connection(path, create=create)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """The one way to write (`opening.transaction`): BEGIN IMMEDIATE, then commit, or roll
        back on any exception, with Ctrl-C and SIGTERM held until it ends."""
        with in_transaction(self._conn) as conn:
            yield conn

    @reported
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
        stored = None if device_features is None else dumps(dict(device_features), sort=True)
        with self.transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO studies (key, source, content_hash, device, space_json,"
                " build_json, created, device_features) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                study_values(key, stored),
            )
            if stored is not None:
                conn.execute(
                    "UPDATE studies SET device_features = ?"
                    " WHERE key = ? AND (device_features IS NULL OR ?)",
                    (stored, key.digest, fresh),
                )
            study_id, created, kept = conn.execute(
                "SELECT id, created, device_features FROM studies WHERE key = ?", (key.digest,)
            ).fetchone()
            with checked_row(self.path, "studies", study_id):
                if not isinstance(created, str):
                    raise ValueError(f"'created' is {created!r}, not a time")
                kept = features(kept)
            if fresh:
                conn.execute("DELETE FROM measurements WHERE study_id = ?", (study_id,))
                final_checks.forget(conn, study_id)
        return Study(study_id, key, created, kept)

    @reported
    def studies(self) -> list[Study]:
        """Every study in the file, oldest first."""
        return all_studies(self._conn, self.path)

    @reported
    def record(self, study: Study, measurement: Measurement) -> bool:
        """Store and commit one measurement, and end any claim on its configuration in the same
        transaction; False if the study already held this configuration (the stored one is
        kept). A transient failure is refused: it says nothing about the configuration, which
        must be measured again."""
        if measurement.transient:
            raise ValueError("a transient failure is never stored")
        params = {name: plain(value) for name, value in measurement.params.items()}
        key = config_key(params)
        with self.transaction() as conn:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO measurements (study_id, config_key, params_json, time,"
                " times_json, status, error, compile_info_json, created, energy, energies_json)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                measurement_values(study.id, key, params, measurement),
            )
            conn.execute(
                "DELETE FROM claims WHERE study_id = ? AND config_key = ?", (study.id, key)
            )
            return cursor.rowcount == 1

    @reported
    def claim(
        self, study: Study, params: Mapping[str, Any], owner: Owner, *, lifetime: float
    ) -> bool:
        """Claim a configuration for `owner` to measure; False when it is measured already or
        another tune's claim on it stands (its process alive, its lifetime not passed). A claim
        lapses `lifetime` seconds from now: the longest its owner may take to measure it."""
        key = config_key(params)
        now = time.time()
        with self.transaction() as conn:
            return take(conn, self.path, study.id, key, owner, now + lifetime, now)

    @reported
    def release(self, study: Study, params: Mapping[str, Any], owner: Owner) -> None:
        """End `owner`'s claim on a configuration it will not record (a transient failure,
        Ctrl-C): another tune may measure it at once."""
        with self.transaction() as conn:
            conn.execute(
                "DELETE FROM claims WHERE study_id = ? AND config_key = ? AND token = ?",
                (study.id, config_key(params), owner.token),
            )

    @reported
    def forget_failures(self, study: Study) -> list[Measurement]:
        """Delete the study's failed measurements (`tune --retry-failed`); return them."""
        failed = [m for m in self.measurements(study) if m.status != "ok"]
        with self.transaction() as conn:
            conn.execute(
                "DELETE FROM measurements WHERE study_id = ? AND status != 'ok'", (study.id,)
            )
            final_checks.forget(conn, study.id)
        return failed

    @reported
    def final_check(self, study: Study, key: str) -> tuple[dict, str] | None:
        """The final check stored under `key` (`final_checks.check_key`) as JSON, and when it
        was stored; None when there is none (or none readable)."""
        return final_checks.stored(self._conn, study.id, key)

    @reported
    def record_final_check(self, study: Study, key: str, verdict: Mapping[str, Any]) -> None:
        """Keep a final check's verdict (JSON-able) under `key`, replacing one stored before."""
        with self.transaction() as conn:
            final_checks.store(conn, study.id, key, verdict)

    @reported
    def measurements(self, study: Study) -> list[Measurement]:
        """The study's measurements in the order they were recorded."""
        rows = self._conn.execute(
            f"SELECT {self._columns} FROM measurements WHERE study_id = ? ORDER BY id", (study.id,)
        ).fetchall()
        return [stored_measurement(self.path, row, study) for row in rows]

    @reported
    def lookup(self, study: Study, params: Mapping[str, Any]) -> Measurement | None:
        """The measurement of this configuration, if the study holds one."""
        row = self._conn.execute(
            f"SELECT {self._columns} FROM measurements WHERE study_id = ? AND config_key = ?",
            (study.id, config_key(params)),
        ).fetchone()
        return stored_measurement(self.path, row, study) if row is not None else None

    @reported
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
        return stored_measurement(self.path, row, study) if row is not None else None

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
    if not os.path.lexists(path) or empty(path):  # an empty file: no database yet
        yield None
        return
    with Database(path, create=False) as database:
        yield database
