"""The results database's file: made whole, refused when it is not understood (before anything
is written to it), read without writing, and moved to the user's cache beside a read-only
source."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import Measurement
from annotune.results.database import (
    SCHEMA_VERSION,
    Database,
    Owner,
    StudyKey,
    default_db_path,
    existing,
)
from annotune.results.workspace import workspace

KEY = StudyKey("k.c", "c0ffee", {"params": [{"name": "A", "values": [1, 2]}]}, "dev", {})


def filled(path: Path, count: int = 1) -> Path:
    with Database(path) as db:
        study = db.open_study(KEY)
        for a in range(count):
            db.record(study, Measurement({"A": a}, "ok", 1.0 + a, error="x" * 500))
    return path


def test_a_new_database_is_never_seen_half_made(tmp_path):
    path = tmp_path / "results.db"
    Database(path).close()
    assert path.read_bytes().startswith(b"SQLite format 3\x00")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.db"]  # no temporary left
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        written_by = conn.execute("SELECT value FROM meta WHERE name = 'written_by'").fetchone()
    assert written_by[0].startswith("annotune ")


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda good: os.urandom(len(good)), "not a SQLite file"),
        (lambda good: good[: len(good) // 2], "cut short"),
        (lambda good: good[:60], "not a SQLite file"),
    ],
    ids=["random", "half", "header-only"],
)
def test_a_damaged_file_is_refused_untouched(tmp_path, damage, message):
    path = tmp_path / "results.db"
    bad = damage(filled(tmp_path / "good.db", count=40).read_bytes())
    path.write_bytes(bad)
    for create in (True, False):
        with pytest.raises(AnnotuneError, match=message) as error:
            Database(path, create=create)
        assert str(path) in error.value.message
        assert "nothing in it was changed" in error.value.hint and f"mv {path}" in error.value.hint
    assert path.read_bytes() == bad
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.db", "results.db"]


def test_an_empty_file_is_a_new_database_to_a_tune_and_none_to_a_reader(tmp_path):
    """`touch results.db; annotune tune --db results.db`: the empty file becomes the database,
    in place; a command that only reads finds no database there and leaves it empty."""
    path = tmp_path / "results.db"
    path.touch()
    with existing(path) as nothing:
        assert nothing is None
    assert path.stat().st_size == 0
    inode = path.stat().st_ino
    with Database(path) as db:
        study = db.open_study(KEY)
        assert db.record(study, Measurement({"A": 1}, "ok", 1.0))
    assert path.stat().st_ino == inode  # filled in place, not replaced
    with existing(path) as db:
        assert [m.params for m in db.measurements(db.studies()[0])] == [{"A": 1}]
    # Empty beside a write-ahead log: a database whose pages are all in its log, not new.
    logged = tmp_path / "logged.db"
    logged.touch()
    Path(f"{logged}-wal").write_bytes(b"pages not yet checkpointed")
    with pytest.raises(AnnotuneError, match="an empty file"):
        Database(logged)
    assert logged.stat().st_size == 0


def test_a_sqlite_file_of_another_program_is_neither_initialized_nor_changed(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 0")
        conn.execute("PRAGMA page_size = 4096")
        conn.execute("VACUUM")  # a SQLite file with no tables at all
    before = path.read_bytes()
    with pytest.raises(AnnotuneError, match="no tables and no annotune version"):
        Database(path)
    assert path.read_bytes() == before
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("CREATE TABLE studies (x)")
    with pytest.raises(
        AnnotuneError, match=r"without its tables \(claims, final_checks, measurements, meta\)"
    ):
        Database(path)


def test_a_newer_database_names_the_annotune_that_wrote_it(tmp_path):
    path = filled(tmp_path / "results.db")
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        conn.execute("UPDATE meta SET value = 'annotune 9.0.0' WHERE name = 'written_by'")
    before = path.read_bytes()
    for create in (True, False):
        with pytest.raises(AnnotuneError, match="written by annotune 9.0.0") as error:
            Database(path, create=create)
        assert "upgrade annotune" in error.value.hint and "--db" in error.value.hint
    assert path.read_bytes() == before


def test_a_version_2_database_gains_claims_in_place(tmp_path):
    path = filled(tmp_path / "results.db")
    with sqlite3.connect(path) as conn:  # as the annotune before claims left it
        conn.execute("DROP TABLE claims")
        conn.execute("DROP TABLE meta")
        conn.execute("PRAGMA user_version = 2")
    with Database(path) as db:
        study = db.open_study(KEY)
        assert [m.params for m in db.measurements(study)] == [{"A": 0}]
        assert db.claim(study, {"A": 1}, Owner.here(), lifetime=60.0)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


@pytest.fixture
def read_only(monkeypatch):
    """Paths made read-only, as the OS says even to root (who may write anyway)."""
    paths: set[Path] = set()
    real = os.access

    def access(path, mode, **kwargs):
        if mode & os.W_OK and Path(path) in paths:
            return False
        return real(path, mode, **kwargs)

    monkeypatch.setattr(os, "access", access)
    yield paths
    for path in paths:
        path.chmod(0o755 if path.is_dir() else 0o644)


def test_a_read_only_database_is_read_but_not_tuned_into(tmp_path, read_only):
    path = filled(tmp_path / "results.db")
    path.chmod(0o444)
    read_only.add(path)
    before = path.read_bytes()
    with pytest.raises(AnnotuneError, match="cannot be written") as error:
        Database(path)
    assert f"chmod u+w {path}" in error.value.hint
    with existing(path) as db:
        (study,) = db.studies()
        assert len(db.measurements(study)) == 1
    assert path.read_bytes() == before


def test_an_older_read_only_database_is_read_when_its_tables_allow(tmp_path, read_only):
    path = filled(tmp_path / "results.db")
    with sqlite3.connect(path) as conn:  # version 2: no claims yet, readable as it is
        conn.execute("DROP TABLE claims")
        conn.execute("DROP TABLE meta")
        conn.execute("PRAGMA user_version = 2")
    read_only.add(path)
    with existing(path) as db:
        assert len(db.studies()) == 1
    with sqlite3.connect(path) as conn:  # version 1: no device features, not readable
        conn.execute("ALTER TABLE studies DROP COLUMN device_features")
        conn.execute("PRAGMA user_version = 1")
    before = path.read_bytes()
    with (
        pytest.raises(AnnotuneError, match="older annotune .schema version 1. and read-only"),
        existing(path),
    ):
        pass
    assert path.read_bytes() == before


def test_a_database_in_a_read_only_directory_is_read_without_its_shm_file(tmp_path, read_only):
    directory = tmp_path / "shipped"
    directory.mkdir()
    path = filled(directory / "results.db")
    directory.chmod(0o555)
    read_only.add(directory)
    with existing(path) as db:
        assert len(db.studies()) == 1
    assert sorted(p.name for p in directory.iterdir()) == ["results.db"]
    with pytest.raises(AnnotuneError, match=f"{directory} is read-only"):
        Database(path)


def test_reading_creates_nothing_and_odd_paths_are_errors(tmp_path):
    with existing(tmp_path / "missing.db") as db:
        assert db is None
    assert not (tmp_path / "missing.db").exists()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(AnnotuneError, match="not a regular file"), existing(fifo):
        pass
    with pytest.raises(AnnotuneError, match="is a directory"), existing(tmp_path):
        pass


def test_the_database_goes_to_the_users_cache_beside_a_read_only_source(
    tmp_path, read_only, monkeypatch
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    source = tmp_path / "checkout" / "k.c"
    source.parent.mkdir()
    source.write_text("int main(void) { return 0; }\n")
    assert workspace(source).directory == source.parent / ".annotune"
    assert default_db_path(source) == source.parent / ".annotune" / "results.db"
    source.parent.chmod(0o555)
    read_only.add(source.parent)
    place = workspace(source)
    assert place.read_only == source.parent
    assert place.directory.parent == tmp_path / "cache" / "annotune" / "sources"
    assert place.directory.name.startswith("checkout-")
    assert workspace(source) == place  # stable: the next run finds its results
    assert default_db_path(source) == place.db_path
    assert str(source.parent) in place.warning and str(place.directory) in place.warning


def test_a_database_shipped_beside_a_read_only_source_is_read_until_the_cache_has_one(
    tmp_path, read_only, monkeypatch
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    source = tmp_path / "checkout" / "k.c"
    shipped = filled(source.parent / ".annotune" / "results.db")
    read_only.add(source.parent / ".annotune")
    assert default_db_path(source) == shipped
    filled(workspace(source).db_path)
    assert default_db_path(source) == workspace(source).db_path
