"""Gathering other GPUs' results for transfer (`annotune.transfer.prior.gather_prior`)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from annotune.annotate import problem_space, read_problem
from annotune.core.records import Candidates, Measurement
from annotune.results.database import Database, StudyKey
from annotune.transfer.features import lookup
from annotune.transfer.prior import gather_prior

TARGET = "NVIDIA RTX A4000"
A100 = "NVIDIA A100-PCIE-40GB"
MI250X = "AMD Instinct MI250X"


@pytest.fixture
def problem(tmp_path, data_dir):
    shutil.copy(data_dir / "synthetic" / "synthetic.c", tmp_path / "synthetic.c")
    return read_problem(tmp_path / "synthetic.c")


def candidates_of(problem):
    space = problem_space(problem)
    legal, _ = space.search_rows(np.random.default_rng(0))
    return Candidates(space.decode(legal), space.names)


def record(db, problem, device, configs, *, build="a", features=True, space=None):
    key = StudyKey.for_problem(problem, device=device, build={"from": build})
    if space is not None:
        key = StudyKey(key.source, key.content_hash, space, key.device, key.build)
    known = lookup(device)
    study = db.open_study(key, device_features=known.to_json() if features and known else None)
    for x, y in configs:
        db.record(study, Measurement({"X": x, "Y": y}, "ok", 1.0 + abs(x - 7) + 0.1 * y))
    return study


def gather(db, problem, target=TARGET, files=()):
    key = StudyKey.for_problem(problem, device=target, build={})
    return gather_prior(
        candidates_of(problem),
        key,
        lookup(target),
        db=db,
        files=files,
        rng=np.random.default_rng(0),
    )


def test_each_other_gpu_gives_its_largest_study_of_the_same_source_and_space(problem, tmp_path):
    with Database(tmp_path / "r.db") as db:
        record(db, problem, A100, [(1, 1), (2, 2)], build="small")
        record(db, problem, A100, [(x, 2) for x in range(1, 9)], build="large")
        record(db, problem, MI250X, [(3, 3), (7, 3)])
        record(db, problem, TARGET, [(x, 1) for x in range(1, 5)])  # the target's own
        other_space = {"params": [{"name": "X", "values": [1, 2]}], "constraints": []}
        record(db, problem, "NVIDIA H100 PCIe", [(1, 1)], space=other_space)
        prior = gather(db, problem)
    assert sorted(prior.sources) == sorted([A100, MI250X])
    sizes = {task.name: len(task.times) for task in prior.tasks}
    assert sizes == {A100: 8, MI250X: 2}
    assert len(prior.target_features) == len(prior.tasks[0].features)
    assert prior.selection is not None and prior.warnings == ()


def test_a_source_known_nowhere_is_learned_from_on_the_features_all_share(problem, tmp_path):
    with Database(tmp_path / "r.db") as db:
        record(db, problem, A100, [(7, 1), (2, 2)])
        record(db, problem, "Prototype GPU X", [(7, 1), (3, 2)], features=False)
        prior = gather(db, problem)
    assert prior.sources == (A100, "Prototype GPU X")
    assert prior.target_features == () and all(t.features == () for t in prior.tasks)
    (warning,) = prior.warnings
    assert "Prototype GPU X" in warning and "transfer uses only no device feature" in warning


def test_an_unknown_target_learns_through_the_nearest_known_gpu(problem, tmp_path):
    with Database(tmp_path / "r.db") as db:
        record(db, problem, A100, [(7, 1), (2, 2)])
        record(db, problem, MI250X, [(7, 1), (3, 2)])
        key = StudyKey.for_problem(problem, device="NVIDIA RTX A5500", build={})
        prior = gather_prior(candidates_of(problem), key, None, db=db, rng=np.random.default_rng(0))
    assert sorted(prior.sources) == sorted([A100, MI250X])
    assert len(prior.target_features) == len(prior.tasks[0].features)
    (warning,) = prior.warnings
    assert "'NVIDIA RTX A5500'" in warning and "NVIDIA Ampere" in warning


def test_a_results_file_of_the_target_itself_is_not_learned_from(problem, tmp_path):
    with Database(tmp_path / "r.db") as db:
        own = record(db, problem, TARGET, [(7, 1), (2, 2)])
        db.export_t4(own, tmp_path / "own.json")
    prior = gather(None, problem, files=[tmp_path / "own.json"])
    assert prior.tasks == ()
    assert "measured on" in prior.warnings[0] and "itself" in prior.warnings[0]
