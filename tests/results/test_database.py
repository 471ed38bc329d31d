"""The results database: round trips, study keys that never reuse stale results, schema
versions and migration, device features, T4 export (read back by the replay runner), surviving
SIGKILL, and several processes writing one file."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from annotune.annotate import read_problem
from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import Measurement
from annotune.results.database import (
    SCHEMA_VERSION,
    Database,
    StudyKey,
    config_key,
    default_db_path,
)
from annotune.results.replay import load_replay
from annotune.transfer.features import DeviceFeatures, lookup

ROOT = Path(__file__).resolve().parents[2]

KEY = StudyKey(
    source="k.cu",
    content_hash="c0ffee",
    space={"params": [{"name": "A", "values": [1, 2]}], "constraints": []},
    device="NVIDIA A100-PCIE-40GB",
    build={"command": ["nvcc", "-O3"], "size": 1024},
)


def ok(time: float, **params: int) -> Measurement:
    return Measurement(params=params, status="ok", time=time, times=(time, time * 1.1))


@pytest.fixture
def db(tmp_path):
    with Database(tmp_path / "results.db") as database:
        yield database


def test_round_trip_keeps_order_values_and_failures(db):
    space = {"params": [{"name": "B", "values": [1, 2, 4]}, {"name": "A", "values": [1, 8, 64]}]}
    study = db.open_study(dataclasses.replace(KEY, space=space))
    failed = Measurement(
        params={"B": 2, "A": 1}, status="compile_error", error="nvcc: too many resources"
    )
    assert db.record(study, ok(2.5, B=1, A=64))
    assert db.record(study, failed)
    assert db.record(study, ok(1.5, B=4, A=8))

    got = db.measurements(study)
    assert [m.params for m in got] == [{"B": 1, "A": 64}, {"B": 2, "A": 1}, {"B": 4, "A": 8}]
    assert [list(m.params) for m in got][0] == ["B", "A"]  # the caller's order, not sorted
    assert got[0].times == (2.5, 2.75)
    assert got[1].status == "compile_error" and got[1].time is None
    assert got[1].error == "nvcc: too many resources"
    assert all(m.created for m in got)
    assert db.best(study).params == {"B": 4, "A": 8}
    assert db.lookup(study, {"A": 1, "B": 2}).status == "compile_error"  # any key order
    assert db.lookup(study, {"A": 2, "B": 2}) is None


def test_a_configuration_is_stored_once_and_the_first_measurement_kept(db):
    study = db.open_study(KEY)
    assert db.record(study, ok(1.0, A=1))
    assert not db.record(study, ok(9.0, A=1))
    assert [m.time for m in db.measurements(study)] == [1.0]


def test_a_transient_failure_is_never_stored(db):
    study = db.open_study(KEY)
    killed = Measurement({"A": 1}, "runtime_error", error="killed from outside", transient=True)
    with pytest.raises(ValueError, match="never stored"):
        db.record(study, killed)
    assert db.measurements(study) == []


def test_retrying_failures_forgets_only_them(db):
    study = db.open_study(KEY)
    db.record(study, ok(1.0, A=1))
    db.record(study, Measurement({"A": 2}, "timeout", error="timed out after 1 s"))
    forgotten = db.forget_failures(study)
    assert [m.params for m in forgotten] == [{"A": 2}]
    assert [m.params for m in db.measurements(study)] == [{"A": 1}]


def test_config_keys_are_canonical_json_never_joined_strings():
    assert config_key({"A": 1, "B": 23}) != config_key({"A": 12, "B": 3})
    assert config_key({"A": 1, "B": 2}) == config_key({"B": 2, "A": 1})
    assert config_key({"A": 32.0}) == config_key({"A": 32}) == config_key({"A": np.int64(32)})
    assert json.loads(config_key({"B": 0.5, "A": True})) == {"A": 1, "B": 0.5}


def test_measurements_are_checked_when_made():
    with pytest.raises(ValueError, match="status"):
        Measurement(params={"A": 1}, status="crashed")
    with pytest.raises(ValueError, match="time"):
        Measurement(params={"A": 1}, status="ok")
    with pytest.raises(ValueError, match="time"):
        Measurement(params={"A": 1}, status="timeout", time=1.0)
    with pytest.raises(ValueError, match="finite"):
        Measurement(params={"A": 1}, status="ok", time=float("nan"))


def test_results_persist_and_fresh_starts_over(tmp_path):
    path = tmp_path / "results.db"
    with Database(path) as db:
        db.record(db.open_study(KEY), ok(1.0, A=1))
    with Database(path) as db:
        study = db.open_study(KEY)
        assert len(db.measurements(study)) == 1
        assert db.open_study(KEY).id == study.id
        assert db.measurements(db.open_study(KEY, fresh=True)) == []
        assert [s.key for s in db.studies()] == [KEY]


@pytest.mark.parametrize(
    "change",
    [
        {"content_hash": "bad"},
        {"device": "NVIDIA H100 80GB HBM3"},
        {"space": {"params": [{"name": "A", "values": [1, 2, 4]}], "constraints": []}},
        {"space": {"params": [{"name": "A", "values": [1, 2]}], "constraints": ["A < 2"]}},
        {"build": {"command": ["nvcc", "-O2"], "size": 1024}},
        {"build": {"command": ["nvcc", "-O3"], "size": 2048}},
    ],
)
def test_any_change_that_affects_a_measurement_starts_a_new_study(db, change):
    old = db.open_study(KEY)
    db.record(old, ok(1.0, A=1))
    new = db.open_study(dataclasses.replace(KEY, **change))
    assert new.id != old.id
    assert db.lookup(new, {"A": 1}) is None


def test_the_key_hashes_the_source_and_its_headers_but_not_their_location(tmp_path, data_dir):
    work = tmp_path / "a"
    shutil.copytree(data_dir / "stencil", work)
    moved = tmp_path / "b"
    shutil.copytree(data_dir / "stencil", moved)

    def key(directory: Path) -> str:
        problem = read_problem(directory / "stencil.cu")
        return StudyKey.for_problem(problem, device="d", build={}).digest

    original = key(work)
    assert key(moved) == original  # same files elsewhere: same study
    header = work / "stencil.cuh"
    header.write_text(header.read_text() + "// a comment changes the content\n")
    assert key(work) != original


def test_default_path_is_beside_the_source():
    assert default_db_path(Path("src/gemm.cu")) == Path("src/.annotune/results.db")


def test_another_schema_version_is_refused_with_the_fix(tmp_path):
    path = tmp_path / "results.db"
    Database(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(AnnotuneError, match="schema version") as newer:
        Database(path)
    assert "upgrade annotune" in newer.value.hint
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 0")
        conn.execute("CREATE TABLE other (x)")
    with pytest.raises(AnnotuneError, match="not an annotune results database") as foreign:
        Database(path)
    assert f"mv {path}" in foreign.value.hint


def test_a_file_that_is_not_sqlite_is_a_user_error(tmp_path):
    path = tmp_path / "results.db"
    path.write_bytes(b"this is not a database, just text" * 100)
    with pytest.raises(AnnotuneError, match="not an annotune results database"):
        Database(path)


def test_a_failed_transaction_leaves_nothing(db):
    study = db.open_study(KEY)
    with pytest.raises(RuntimeError), db.transaction() as conn:
        conn.execute(
            "INSERT INTO measurements (study_id, config_key, params_json, time, times_json,"
            " status, error, compile_info_json, created) VALUES (?, 'k', '{}', 1, '[]', 'ok',"
            " '', '{}', '')",
            (study.id,),
        )
        raise RuntimeError("the measurement went wrong half way")
    assert db.measurements(study) == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_recording_keeps_the_measurement_then_stops(db, signum):
    """Ctrl-C (or SIGTERM, which the CLI turns into an interrupt) inside a transaction used to
    roll back the measurement being recorded; now it is committed, and then the stop comes."""
    study = db.open_study(KEY)

    def interrupt(_signum, _frame):
        raise KeyboardInterrupt

    previous = signal.signal(signum, interrupt)
    try:
        with pytest.raises(KeyboardInterrupt), db.transaction() as conn:
            signal.raise_signal(signum)  # lands half way through the write
            conn.execute(
                "INSERT INTO measurements (study_id, config_key, params_json, time, times_json,"
                " status, error, compile_info_json, created) VALUES (?, 'k', '{\"A\":1}', 1,"
                " '[]', 'ok', '', '{}', '')",
                (study.id,),
            )
        assert signal.getsignal(signum) is interrupt
    finally:
        signal.signal(signum, previous)
    assert len(db.measurements(study)) == 1
    assert db.record(study, ok(2.0, A=2))  # the next write starts its own transaction


class _SignalledAfterBegin:
    """The database's connection, raising `signum` on this process the moment BEGIN returns,
    before the transaction's `with` block is entered: most likely where CI's SIGTERM landed
    when a stopped tune failed with "cannot start a transaction within a transaction"."""

    def __init__(self, conn: sqlite3.Connection, signum: int) -> None:
        self.conn, self.signum = conn, signum

    def execute(self, sql: str, *args):
        cursor = self.conn.execute(sql, *args)
        if sql.startswith("BEGIN"):
            signal.raise_signal(self.signum)
        return cursor

    def __getattr__(self, name: str):
        return getattr(self.conn, name)


def test_a_signal_just_after_begin_leaves_no_transaction_open(db):
    study = db.open_study(KEY)
    real = db._conn

    def interrupt(_signum, _frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, interrupt)
    try:
        db._conn = _SignalledAfterBegin(real, signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            db.record(study, ok(1.0, A=1))
    finally:
        db._conn = real
        signal.signal(signal.SIGINT, previous)
    assert not real.in_transaction
    assert [m.params for m in db.measurements(study)] == [{"A": 1}]  # recorded, then stopped
    assert db.record(study, ok(2.0, A=2))


def test_t4_export_has_the_schema_fields(db, tmp_path):
    study = db.open_study(KEY)
    compile_info = {"seconds": 1.25, "registers": 40, "spills": 0, "log": "ptxas info"}
    db.record(study, dataclasses.replace(ok(2.0, A=1), compile_info=compile_info))
    db.record(study, Measurement(params={"A": 2}, status="wrong_output", error="diff 0.5"))
    db.record(study, Measurement(params={"A": 4}, status="timeout", error="after 10 s"))
    path = tmp_path / "out" / "study.json"
    db.export_t4(study, path)

    data = json.loads(path.read_text())
    assert data["schema_version"] == "1.0.0"
    good, wrong, slow = data["results"]
    for record in data["results"]:
        assert {"configuration", "times", "invalidity", "correctness"} <= set(record)
        assert record["objectives"] == ["time"]
        assert record["timestamp"]
    assert good["configuration"] == {"A": 1}
    assert good["invalidity"] == "correct" and good["correctness"] == 1
    assert good["times"] == {"runtimes": [2.0, 2.2], "compilation": 1.25}
    assert good["measurements"] == [
        {"name": "time", "value": 2.0, "unit": "ms"},
        {"name": "registers", "value": 40, "unit": ""},
        {"name": "spills", "value": 0, "unit": ""},
    ]
    assert (wrong["invalidity"], wrong["correctness"], wrong["measurements"]) == (
        "correctness",
        0,
        [],
    )
    assert slow["invalidity"] == "timeout"


A100 = lookup("NVIDIA A100-PCIE-40GB").to_json()
H100 = lookup("H100").to_json()


def test_device_features_are_stored_with_the_study_and_kept(db):
    study = db.open_study(KEY, device_features=A100)
    assert study.device_features == A100
    assert db.open_study(KEY).device_features == A100  # reopened without: still there
    # Other features later keep the first: they describe the device of the measurements.
    assert db.open_study(KEY, device_features=H100).device_features == A100
    (stored,) = db.studies()
    assert stored.device_features == A100 and stored == study
    stored.device_features["name"] = "changed by the caller"
    assert db.studies()[0].device_features == A100  # a copy, never the stored record
    assert db.open_study(KEY, fresh=True, device_features=H100).device_features == H100


def test_device_features_missing_at_first_are_filled_in_on_reopen(db):
    study = db.open_study(KEY)
    db.record(study, ok(1.0, A=1))
    assert study.device_features is None
    assert db.open_study(KEY, device_features=A100).device_features == A100
    assert db.studies()[0].device_features == A100
    assert len(db.measurements(study)) == 1


V1_SCHEMA = """
CREATE TABLE studies (
    id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, source TEXT NOT NULL,
    content_hash TEXT NOT NULL, device TEXT NOT NULL, space_json TEXT NOT NULL,
    build_json TEXT NOT NULL, created TEXT NOT NULL
);
CREATE TABLE measurements (
    id INTEGER PRIMARY KEY,
    study_id INTEGER NOT NULL REFERENCES studies(id) ON DELETE CASCADE,
    config_key TEXT NOT NULL, params_json TEXT NOT NULL, time REAL, times_json TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'compile_error', 'runtime_error', 'timeout',
                                           'wrong_output')),
    error TEXT NOT NULL, compile_info_json TEXT NOT NULL, created TEXT NOT NULL,
    UNIQUE (study_id, config_key), CHECK ((status = 'ok') = (time IS NOT NULL))
);
"""


def test_a_version_1_database_is_migrated_in_place(tmp_path):
    path = tmp_path / "results.db"
    with sqlite3.connect(path) as conn:  # written by the annotune before device features
        conn.executescript(V1_SCHEMA)
        conn.execute(
            "INSERT INTO studies VALUES (1, ?, 'k.cu', 'c0ffee', ?, ?, ?, '2025-01-01')",
            (KEY.digest, KEY.device, json.dumps(KEY.space), json.dumps(KEY.build)),
        )
        conn.execute(
            "INSERT INTO measurements VALUES (1, 1, ?, '{\"A\":1}', 2.5, '[2.5]', 'ok', '',"
            " '{}', '2025-01-01')",
            (config_key({"A": 1}),),
        )
        conn.execute("PRAGMA user_version = 1")
    assert SCHEMA_VERSION == 5
    with Database(path) as db:
        (study,) = db.studies()
        assert (study.key, study.created, study.device_features) == (KEY, "2025-01-01", None)
        assert db.final_check(study, "any") is None  # version 5's table, made empty
        assert [(m.params, m.time) for m in db.measurements(study)] == [({"A": 1}, 2.5)]
        assert db.open_study(KEY, device_features=A100).id == study.id
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    with Database(path) as db:  # opening the converted file again changes nothing
        (study,) = db.studies()
        assert study.device_features == A100
        assert db.lookup(study, {"A": 1}).time == 2.5


def test_t4_export_carries_the_device_features_back_into_replay(db, tmp_path):
    study = db.open_study(KEY, device_features=A100)
    db.record(study, ok(2.0, A=1))
    db.record(study, Measurement(params={"A": 2}, status="runtime_error", error="launch"))
    path = tmp_path / "study.json"
    db.export_t4(study, path)
    assert json.loads(path.read_text())["metadata"] == {
        "device": "NVIDIA A100-PCIE-40GB",
        "device_features": A100,
    }

    dataset = load_replay(path)
    assert dataset.device == "NVIDIA A100-PCIE-40GB"
    assert dataset.device_features == A100
    assert DeviceFeatures.from_json(dataset.device_features) == lookup("A100")
    assert dataset.times[0] == 2.0 and np.isnan(dataset.times[1])

    bare = db.open_study(dataclasses.replace(KEY, device="unknown GPU"))
    db.record(bare, ok(1.0, A=1))
    db.export_t4(bare, path)
    assert json.loads(path.read_text())["metadata"] == {"device": "unknown GPU"}
    assert load_replay(path).device_features is None


_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from annotune.results.database import Database, Measurement, StudyKey

    path, worker, count, shared = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    key = StudyKey("k.cu", "h", {"params": []}, "dev", {})
    db = Database(Path(path))
    study = db.open_study(key)
    for n in range(count):
        params = {"W": worker, "N": n} if shared == "no" else {"W": -1, "N": n}
        db.record(study, Measurement(params=params, status="ok", time=float(n + 1)))
        print(n, flush=True)
    """
)


def _writer(path: Path, worker: int, count: int, shared: bool = False) -> subprocess.Popen:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    args = [sys.executable, "-c", _WRITER, str(path), str(worker), str(count)]
    args.append("yes" if shared else "no")
    return subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env)


def test_sigkill_mid_run_loses_no_committed_row(tmp_path):
    path = tmp_path / "results.db"
    child = _writer(path, worker=0, count=100_000)
    committed = []
    for line in child.stdout:
        committed.append(int(line))
        if len(committed) == 200:
            child.send_signal(signal.SIGKILL)
            break
    child.wait()
    child.stdout.close()
    assert child.returncode == -signal.SIGKILL

    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    with Database(path) as db:
        (study,) = db.studies()
        stored = [m.params["N"] for m in db.measurements(study)]
    assert stored[: len(committed)] == committed
    assert len(stored) <= len(committed) + 1  # at most the one being printed when killed


def test_concurrent_processes_lose_no_rows(tmp_path):
    path = tmp_path / "results.db"  # created by whichever worker gets there first
    workers = [_writer(path, worker=w, count=60) for w in range(4)]
    workers += [_writer(path, worker=9, count=60, shared=True) for _ in range(2)]
    for worker in workers:
        worker.communicate()
        assert worker.returncode == 0
    with Database(path) as db:
        (study,) = db.studies()
        rows = [(m.params["W"], m.params["N"]) for m in db.measurements(study)]
    expected = {(w, n) for w in [*range(4), -1] for n in range(60)}
    assert len(rows) == len(expected) and set(rows) == expected
