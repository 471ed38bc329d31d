"""Which study is a source file's (one rule for every command), what `explain` and `export` read
of it, and the other GPUs' studies `tune` learns from."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from annotune.annotate.problem import Problem
from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import Measurement
from annotune.results.database import Database, StudyKey, default_db_path, sources_hash
from annotune.results.studies import export_study, find_study, read_study, studies_elsewhere

SPACE = {"params": [{"name": "B", "values": [1, 2, 4]}, {"name": "A", "values": [8]}]}


def record(
    db: Database,
    source: str | Path,
    *,
    device: str = "gpu-a",
    content: str = "v1",
    times: tuple[float | None, ...] = (1.0,),
    build: dict | None = None,
    space: dict = SPACE,
) -> int:
    """A study of `source` with one measurement per time (None: a failed run); its id."""
    key = StudyKey(str(source), content, space, device, build or {})
    study = db.open_study(key)
    for b, time in zip((1, 2, 4), times, strict=False):
        measurement = (
            Measurement({"B": b, "A": 8}, "ok", time)
            if time is not None
            else Measurement({"B": b, "A": 8}, "runtime_error", error="crashed")
        )
        db.record(study, measurement)
    return study.id


@pytest.fixture
def db(tmp_path):
    with Database(tmp_path / "results.db") as database:
        yield database


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text("// a kernel\n")
    return path


def found_id(db: Database, source: Path, **where) -> int | None:
    found = find_study(db, source, **where)
    return None if found is None else found.study.id


def test_a_study_is_the_files_when_recorded_from_its_path(db, source, tmp_path, monkeypatch):
    absolute = record(db, source)
    assert found_id(db, source) == absolute
    record(db, tmp_path / "other.cu", device="gpu-b")  # another file: never its study
    assert found_id(db, source, device="gpu-b") is None
    monkeypatch.chdir(tmp_path)
    typed = record(db, "k.cu", device="gpu-c")  # relative, as typed in the source's folder
    assert found_id(db, source, device="gpu-c") == typed
    assert found_id(db, Path("k.cu"), device="gpu-c") == typed
    monkeypatch.chdir(tmp_path.parent)  # relative to a folder elsewhere: the same name
    assert found_id(db, source, device="gpu-c") == typed
    assert found_id(db, tmp_path / "other.cu", device="gpu-c") is None


def test_the_same_content_from_another_path_counts_only_when_the_content_is_known(db, source):
    copy = record(db, "/elsewhere/copy.cu", content="v2")
    assert found_id(db, source) is None
    assert found_id(db, source, content_hash="v2") == copy


def test_the_newest_study_of_the_current_content_comes_first(db, source):
    current = record(db, source, content="v2", times=(1.0,))
    newest = record(db, source, content="v2", times=(1.0,), build={"repeats": 1})
    earlier_version = record(db, source, content="v1", times=(1.0, 2.0, 3.0), device="gpu-b")
    assert found_id(db, source, content_hash="v2") == newest
    assert found_id(db, source, content_hash="v2", device="gpu-a") == newest
    assert found_id(db, source) == earlier_version  # content unknown: the newest of all
    assert found_id(db, source, content_hash="v3") == earlier_version
    assert found_id(db, source, device="gpu-b", content_hash="v2") == earlier_version
    assert current < newest < earlier_version


def test_studies_without_measurements_are_never_the_files(db, source):
    measured = record(db, source)
    record(db, source, build={"repeats": 1}, times=())
    assert found_id(db, source) == measured
    record(db, source, device="gpu-b", times=())
    assert found_id(db, source, device="gpu-b") is None


def test_the_record_holds_values_and_times_in_the_spaces_order(db, source):
    record(db, source, times=(2.0, None, 1.0))
    found = find_study(db, source)
    assert found.names == ("B", "A")
    assert found.valid == 2
    assert found.values().tolist() == [[1.0, 8.0], [2.0, 8.0], [4.0, 8.0]]
    assert found.values(["A", "B"])[:, 1].tolist() == [1.0, 2.0, 4.0]
    assert np.array_equal(found.times(), [2.0, np.nan, 1.0], equal_nan=True)


def test_read_study_says_what_is_missing_and_creates_no_database(source, tmp_path):
    db_path = default_db_path(source)
    with pytest.raises(AnnotuneError, match="no such file"):
        read_study(tmp_path / "missing.cu")
    with pytest.raises(AnnotuneError, match="no results database") as error:
        read_study(source)
    assert error.value.hint == f"run 'annotune tune {source}' first"
    assert not db_path.parent.exists()
    with Database(db_path) as db:
        record(db, source, device="gpu-a")
    with pytest.raises(AnnotuneError, match="no measurements of .* on device 'gpu-b'"):
        read_study(source, device="gpu-b")
    assert read_study(source).study.key.device == "gpu-a"


def problem_of(source: Path) -> Problem:
    return Problem(source, "cuda", (), (), (str(source),))


def test_export_writes_only_the_current_source(source, tmp_path):
    problem = problem_of(source)
    out = tmp_path / "out" / "k.t4.json"
    with pytest.raises(AnnotuneError, match="no results database here yet"):
        export_study(problem, out)
    assert not default_db_path(source).exists()
    with Database(default_db_path(source)) as db:
        record(db, source, content="an earlier version", times=(1.0, 2.0, 3.0))
    with pytest.raises(AnnotuneError, match="no measurements of this version of the source"):
        export_study(problem, out)
    assert not out.exists()
    with Database(default_db_path(source)) as db:
        record(db, source, content=sources_hash(problem.files), times=(5.0, None))
    found = export_study(problem, out)
    assert (found.study.key.device, len(found.measurements)) == ("gpu-a", 2)
    results = json.loads(out.read_text())["results"]
    assert [r["invalidity"] for r in results] == ["correct", "runtime"]
    with pytest.raises(AnnotuneError, match="this version of the source on device 'gpu-b'"):
        export_study(problem, out, device="gpu-b")


def test_studies_elsewhere_are_the_same_problem_on_other_devices(db, source):
    key = StudyKey(str(source), "v1", SPACE, "gpu-a", {})
    record(db, source)  # this device: not elsewhere
    first = record(db, "/elsewhere/copy.cu", device="gpu-b", times=(1.0, None, None))
    record(db, source, device="gpu-b", times=(1.0, None), build={"repeats": 1})  # as many valid
    most = record(db, source, device="gpu-c", times=(1.0, 2.0), build={"repeats": 1})
    record(db, source, device="gpu-c", times=(1.0,))
    record(db, source, device="gpu-d", times=(None,))  # nothing valid to learn from
    record(db, source, device="gpu-e", content="v2")  # another version
    record(db, source, device="gpu-f", space={"params": [{"name": "B", "values": [1, 2]}]})
    found = studies_elsewhere(db, key)
    assert [(r.study.key.device, r.study.id) for r in found] == [("gpu-b", first), ("gpu-c", most)]
