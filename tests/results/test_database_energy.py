"""Energies stored beside times: round trip, the best by each objective, old files."""

from __future__ import annotations

import sqlite3

import pytest

from annotune.core.records import Measurement
from annotune.results.database import SCHEMA_VERSION, Database, StudyKey, existing

KEY = StudyKey("k.cu", "c0ffee", {"params": [{"name": "A", "values": [1, 2, 3]}]}, "gpu", {})


def metered(a: int, time: float, joules: float | None) -> Measurement:
    if joules is None:
        return Measurement({"A": a}, "ok", time, times=(time,))
    return Measurement({"A": a}, "ok", time, times=(time,), energy=joules, energies=(joules,) * 3)


def test_energy_round_trip_and_best_by_objective(tmp_path):
    with Database(tmp_path / "results.db") as db:
        study = db.open_study(KEY)
        db.record(study, metered(1, 1.0, 0.9))  # fastest; edp 0.9e-3
        db.record(study, metered(2, 2.0, 0.3))  # least energy; edp 0.6e-3
        db.record(study, metered(3, 0.5, None))  # fastest of all, energy not measured
        db.record(study, Measurement({"A": 4}, "timeout", error="slow"))
        stored = db.lookup(study, {"A": 2})
        assert stored.energy == 0.3 and stored.energies == (0.3, 0.3, 0.3)
        assert db.lookup(study, {"A": 3}).energy is None
        assert [m.energy for m in db.measurements(study)] == [0.9, 0.3, None, None]
        assert db.best(study).params == {"A": 3}
        assert db.best(study, "energy").params == {"A": 2}
        assert db.best(study, "edp").params == {"A": 2}
        with pytest.raises(ValueError, match="objective"):
            db.best(study, "power")
        bare = db.open_study(StudyKey("k.cu", "other", {}, "gpu", {}))
        db.record(bare, metered(1, 1.0, None))
        assert db.best(bare, "energy") is None and db.best(bare).params == {"A": 1}


def version_3(path) -> None:
    """Turn a new database into what annotune wrote before energies (schema version 3)."""
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE measurements DROP COLUMN energy")
        conn.execute("ALTER TABLE measurements DROP COLUMN energies_json")
        conn.execute("PRAGMA user_version = 3")


def test_a_version_3_database_gains_energy_columns_in_place(tmp_path):
    path = tmp_path / "results.db"
    with Database(path) as db:
        db.record(db.open_study(KEY), metered(1, 1.5, None))
    fresh_columns = _columns(path)
    version_3(path)
    assert "energy" not in {name for name, _ in _columns(path)}
    with Database(path) as db:
        study = db.open_study(KEY)
        (old,) = db.measurements(study)
        assert (old.time, old.energy, old.energies) == (1.5, None, ())
        db.record(study, metered(2, 1.0, 0.7))
        assert db.best(study, "energy").params == {"A": 2}
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert _columns(path) == fresh_columns  # converted, it is what a new file would be


def test_a_read_only_version_3_database_is_read_without_energies(tmp_path, monkeypatch):
    path = tmp_path / "results.db"
    with Database(path) as db:
        db.record(db.open_study(KEY), metered(1, 1.5, None))
    version_3(path)
    before = path.read_bytes()
    monkeypatch.setattr("annotune.results.dbfile.can_write", lambda path: False)
    with existing(path) as db:
        (study,) = db.studies()
        (old,) = db.measurements(study)
        assert old.time == 1.5 and old.energy is None
        assert db.best(study, "energy") is None
    assert path.read_bytes() == before


def test_the_table_refuses_an_energy_without_a_valid_time(tmp_path):
    path = tmp_path / "results.db"
    with Database(path) as db:
        db.open_study(KEY)
    with sqlite3.connect(path) as conn, pytest.raises(sqlite3.IntegrityError, match="CHECK"):
        conn.execute(
            "INSERT INTO measurements (study_id, config_key, params_json, time, times_json,"
            " status, error, compile_info_json, created, energy)"
            " VALUES (1, 'k', '{}', NULL, '[]', 'timeout', '', '{}', 'now', 0.5)"
        )


def _columns(path) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("PRAGMA table_info(measurements)").fetchall()
    return [(row[1], row[2]) for row in rows]
