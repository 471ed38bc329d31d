"""Hostile results databases: every command that opens one (tune, export, explain, predict)
meets each kind of damage, and each odd --db, with a clear error naming the path and exit
code 2, never a traceback, and never a changed byte in the file it could not understand."""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.core.records import Measurement
from annotune.results import dbfile
from annotune.results.database import SCHEMA_VERSION, Database, StudyKey
from annotune.transfer.features import lookup

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")

SYNTHETIC = Path(__file__).parents[1] / "data" / "synthetic" / "synthetic.c"
OTHER_GPU = "NVIDIA A100-PCIE-40GB"
TARGET_GPU = "NVIDIA RTX A4000"

COMMANDS: dict[str, Callable[[Path], list[str]]] = {
    "tune": lambda src: [
        "tune", src, "--device", "test-device", "--budget", "1", "--recheck", "0",
        "--warmup", "0", "--repeats", "1", "--max-repeats", "1", "--timeout", "1",
    ],
    "export": lambda src: ["export", src, "-o", src.parent / "out.json"],
    "explain": lambda src: ["explain", src],
    "predict": lambda src: ["predict", src, "--device", TARGET_GPU],
}  # fmt: skip


@pytest.fixture(scope="module")
def good_db(tmp_path_factory) -> bytes:
    """A real database of synthetic.c: another GPU's measurements (what predict learns from),
    the kind `tune` leaves."""
    where = tmp_path_factory.mktemp("good")
    shutil.copy(SYNTHETIC, where / "synthetic.c")
    key = StudyKey.for_problem(read_problem(where / "synthetic.c"), device=OTHER_GPU, build={})
    key = replace(key, source="synthetic.c")  # as tuned in its directory: any synthetic.c's
    path = where / "results.db"
    with Database(path) as db:
        study = db.open_study(key, device_features=lookup(OTHER_GPU).to_json())
        for x in range(1, 10):
            for y in (1, 2, 3):
                if x + y != 12:
                    db.record(study, Measurement({"X": x, "Y": y}, "ok", 1.0 + abs(x - 4) + y))
    return path.read_bytes()


@pytest.fixture
def source(tmp_path) -> Path:
    shutil.copy(SYNTHETIC, tmp_path / "synthetic.c")
    return tmp_path / "synthetic.c"


def _sqlite(good: bytes, path: Path, *statements: str) -> bytes:
    path.write_bytes(good)
    with sqlite3.connect(path) as conn:
        for statement in statements:
            conn.execute(statement)
    conn.close()
    return path.read_bytes()


DAMAGE: dict[str, Callable[[bytes, Path], bytes]] = {
    "random bytes": lambda good, path: random.Random(1).randbytes(len(good)),
    "cut in half": lambda good, path: good[: len(good) // 2],
    "text": lambda good, path: b"results: none yet\n",
    "newer schema": lambda good, path: _sqlite(
        good,
        path,
        f"PRAGMA user_version = {SCHEMA_VERSION + 1}",
        "UPDATE meta SET value = 'annotune 9.0.0' WHERE name = 'written_by'",
    ),
    "another program's tables": lambda good, path: _sqlite(
        good, path, "PRAGMA user_version = 0", "CREATE TABLE notes (text)"
    ),
}
"""Each damage: the bytes of a file at the database's path, made from a good database's."""

MESSAGES = {
    "random bytes": "not a SQLite file",
    "cut in half": "cut short",
    "text": "not a SQLite file",
    "newer schema": "written by annotune 9.0.0",
    "another program's tables": "tables of another program",
}


def check_error(result, path: Path, message: str) -> None:
    """Exit 2, the path and the message on stderr, nothing that looks like a crash."""
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert str(path) in result.stderr
    assert message in result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_database_is_refused_and_left_as_it_was(cli, source, good_db, damage, command):
    path = source.parent / ".annotune" / "results.db"
    path.parent.mkdir()
    bad = DAMAGE[damage](good_db, path)
    path.write_bytes(bad)
    result = cli(*COMMANDS[command](source))
    check_error(result, path, MESSAGES[damage])
    assert "nothing in it was changed" in result.stderr
    assert path.read_bytes() == bad
    assert sorted(p.name for p in path.parent.iterdir()) == ["results.db"]  # no journal left


# Rows of annotune's own schema that hold garbage: each read is checked, and a damaged row is
# an error naming the database, the table and the row. (statements, what stderr says, the
# commands that read the row: every command reads studies and measurements, only tune claims.)
FOREIGN_ROWS: dict[str, tuple[tuple[str, ...], str, tuple[str, ...]]] = {
    "text time": (
        ("UPDATE measurements SET time = 'fast' WHERE id = 3",),
        "row 3 of table 'measurements'",
        tuple(COMMANDS),
    ),
    "NULL time of an ok row": (
        (
            "PRAGMA ignore_check_constraints = ON",
            "UPDATE measurements SET time = NULL WHERE id = 2",
        ),
        "row 2 of table 'measurements'",
        tuple(COMMANDS),
    ),
    "configuration of another space": (
        ("""UPDATE measurements SET params_json = '{"Q":1}' WHERE id = 1""",),
        "names other parameters than its study's (X, Y)",
        tuple(COMMANDS),
    ),
    "parameter value is text": (
        ("""UPDATE measurements SET params_json = '{"X":"big","Y":1}' WHERE id = 4""",),
        "row 4 of table 'measurements'",
        tuple(COMMANDS),
    ),
    "times not a list": (
        ("UPDATE measurements SET times_json = 'null' WHERE id = 5",),
        "'times_json' holds NULL, not a JSON list",
        tuple(COMMANDS),
    ),
    "times not JSON": (
        ("UPDATE measurements SET times_json = '[1.0, oops' WHERE id = 5",),
        "row 5 of table 'measurements'",
        tuple(COMMANDS),
    ),
    "space not JSON": (
        ("UPDATE studies SET space_json = 'X in 1..9' WHERE id = 1",),
        "row 1 of table 'studies'",
        tuple(COMMANDS),
    ),
    "features a list": (
        ("UPDATE studies SET device_features = '[1, 2]' WHERE id = 1",),
        "'device_features' holds [1, 2], not a JSON dict",
        tuple(COMMANDS),
    ),
    "device a blob": (
        ("UPDATE studies SET device = x'ff' WHERE id = 1",),
        "'device' is b'\\xff', not text",
        tuple(COMMANDS),
    ),
    "claim pid text": (
        (
            "INSERT INTO claims (study_id, config_key, token, host, pid, pid_started, claimed,"
            " expires) VALUES (1, 'k', 't', 'h', 'me', '', '', 1e300)",
        ),
        "of table 'claims'",
        ("tune",),
    ),
}


def _foreign_cases():
    for name, (_, _, commands) in FOREIGN_ROWS.items():
        for command in commands:
            yield pytest.param(name, command, id=f"{name}-{command}")


@pytest.mark.parametrize(("damage", "command"), list(_foreign_cases()))
def test_a_foreign_row_is_refused_by_name_and_left_as_it_was(cli, source, good_db, damage, command):
    path = source.parent / ".annotune" / "results.db"
    path.parent.mkdir()
    statements, message, _ = FOREIGN_ROWS[damage]
    bad = _sqlite(good_db, path, *statements)
    result = cli(*COMMANDS[command](source), *(["--device", OTHER_GPU] * (command != "predict")))
    check_error(result, path, message)
    assert "is damaged or not annotune's" in result.stderr
    assert "nothing in it was changed" in result.stderr
    assert path.read_bytes() == bad
    assert sorted(p.name for p in path.parent.iterdir()) == ["results.db"]


def test_an_empty_file_given_as_db_is_a_new_database(cli, source):
    path = source.parent / "results.db"
    path.touch()
    for command in ("export", "explain"):  # they only read: no database there yet
        result = cli(*COMMANDS[command](source), "--db", path)
        assert result.exit_code == 2 and "no results database" in result.stderr, result.stderr
        assert path.stat().st_size == 0
    result = cli(*COMMANDS["tune"](source), "--db", path)
    assert result.exit_code == 0, result.stderr
    with Database(path, create=False) as db:
        assert len(db.measurements(db.studies()[0])) == 1


@contextmanager
def held_exclusively(path: Path) -> Iterator[None]:
    """Another program holding the database for longer than the busy timeout: readers too
    must wait for it (exclusive locking mode)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA locking_mode = EXCLUSIVE")
    conn.execute("BEGIN EXCLUSIVE")
    conn.execute("CREATE TABLE held (x)")
    try:
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()


@pytest.mark.parametrize("command", COMMANDS)
def test_a_locked_database_says_who_to_wait_for(cli, source, good_db, command, monkeypatch):
    monkeypatch.setattr(dbfile, "BUSY_TIMEOUT_S", 0.2)
    path = source.parent / ".annotune" / "results.db"
    path.parent.mkdir()
    path.write_bytes(good_db)
    with held_exclusively(path):
        result = cli(*COMMANDS[command](source))
    check_error(result, path, "locked: another annotune (or another program) holds it")
    assert "wait for it to finish" in result.stderr
    assert path.read_bytes() == good_db


@pytest.mark.parametrize(
    "command",
    [
        *(c for c in COMMANDS if c != "predict"),
        "predict",
    ],
)
def test_a_directory_where_the_database_goes_is_refused(cli, source, command):
    path = source.parent / ".annotune" / "results.db"
    (path / "inside").mkdir(parents=True)
    result = cli(*COMMANDS[command](source))
    check_error(result, path, "is a directory, not a results database")
    assert [p.name for p in path.iterdir()] == ["inside"]


@dataclass(frozen=True)
class OddPath:
    """A --db that is no database file, and what must be true of it afterwards."""

    message: str
    make: Callable[[Path], Path]
    unchanged: Callable[[Path], bool]


def _fifo(tmp: Path) -> Path:
    os.mkfifo(tmp / "fifo")
    return tmp / "fifo"


def _directory(tmp: Path) -> Path:
    (tmp / "dbdir").mkdir()
    return tmp / "dbdir"


def _no_journal_beside(path: Path) -> bool:
    return not any(Path(f"{path}{suffix}").exists() for suffix in ("-journal", "-wal", "-shm"))


ODD_PATHS = {
    "directory": OddPath(
        "is a directory", _directory, lambda p: p.is_dir() and not any(p.iterdir())
    ),
    "fifo": OddPath(
        "not a regular file",
        _fifo,
        lambda p: stat.S_ISFIFO(p.stat().st_mode) and _no_journal_beside(p),
    ),
    "/dev/null": OddPath("not a regular file", lambda tmp: Path(os.devnull), _no_journal_beside),
    "missing directory": OddPath(
        "no", lambda tmp: tmp / "nowhere" / "results.db", lambda p: not p.parent.exists()
    ),
}


def _odd_cases():
    for name in ODD_PATHS:
        for command in COMMANDS:
            yield pytest.param(name, command, id=f"{name}-{command}")


@pytest.mark.parametrize(("odd", "command"), list(_odd_cases()))
def test_an_odd_db_option_is_refused_without_touching_it(cli, source, odd, command):
    if odd == "/dev/null" and not _no_journal_beside(Path(os.devnull)):
        pytest.skip("a journal beside /dev/null is there already (left by something else)")
    case = ODD_PATHS[odd]
    path = case.make(source.parent)
    try:
        result = cli(*COMMANDS[command](source), "--db", path)
        check_error(result, path, case.message)
        assert case.unchanged(path)
    finally:  # a journal a failing annotune made beside /dev/null must not stay there
        if odd == "/dev/null":
            Path(f"{os.devnull}-journal").unlink(missing_ok=True)


@pytest.fixture
def read_only_file(source, good_db, monkeypatch) -> Iterator[Path]:
    """A database file of mode 0444; for root, whom the bits do not stop, the OS's answer
    to "may I write it?" is made no as well."""
    path = source.parent / "shipped.db"
    path.write_bytes(good_db)
    path.chmod(0o444)
    real = os.access
    monkeypatch.setattr(
        os,
        "access",
        lambda p, mode, **kw: not (mode & os.W_OK and Path(p) == path) and real(p, mode, **kw),
    )
    yield path
    path.chmod(0o644)


def test_a_read_only_db_is_not_tuned_into(cli, source, read_only_file):
    result = cli(*COMMANDS["tune"](source), "--db", read_only_file)
    check_error(result, read_only_file, "cannot be written")
    assert f"chmod u+w {read_only_file}" in result.stderr


@pytest.mark.parametrize("command", ["export", "explain", "predict"])
def test_a_read_only_db_is_still_read(cli, source, good_db, read_only_file, command):
    device = ["--device", OTHER_GPU] if command != "predict" else []
    result = cli(*COMMANDS[command](source), "--db", read_only_file, *device)
    assert result.exit_code == 0, result.stderr
    assert read_only_file.read_bytes() == good_db
