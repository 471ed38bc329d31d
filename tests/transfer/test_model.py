"""The feature-concatenation model and CV-DFS on a space where the right transfer is known.

Five GPUs share a 16 x 8 space. Where the optimum lies along x depends on device feature "b"
only: low (x = 1, 2) on GPUs with small b, high (x = 12, 13) on GPUs with large b. Feature "a"
is scrambled so that it sends every held-out GPU to the wrong region, and "c" is the same on
every GPU. The target (b = 8, a closest to a low-b GPU) has its optimum at x = 12.
"""

from __future__ import annotations

import numpy as np
import pytest

from annotune.core.records import Candidates, TaskData
from annotune.results.replay import ReplayDataset
from annotune.transfer import model as tr

NAMES = ("a", "b", "c")
X, Y = np.meshgrid(np.arange(16), np.arange(8), indexing="ij")
VALUES = np.stack([X.ravel(), Y.ravel()], axis=1).astype(float)
CANDIDATES = Candidates(VALUES, ("x", "y"))

# name: (a, b, c), the optimum's x
GPUS = {
    "S1": ((5.0, 1.0, 3.0), 1),
    "S2": ((1.0, 2.0, 3.0), 2),
    "S3": ((2.0, 9.0, 3.0), 12),
    "S4": ((6.0, 10.0, 3.0), 13),
}
TARGET = ((1.2, 8.0, 3.0), 12)


def times(best_x: int, values: np.ndarray = VALUES) -> np.ndarray:
    return 1.0 + 0.3 * np.abs(values[:, 0] - best_x) + 0.1 * np.abs(values[:, 1] - 3)


def task(name: str, columns=(0, 1, 2), order: np.ndarray | None = None) -> TaskData:
    features, best_x = GPUS[name]
    rows = np.arange(len(VALUES)) if order is None else order
    return TaskData(
        name, VALUES[rows], times(best_x)[rows], tuple(np.asarray(features)[list(columns)])
    )


def test_rows_are_matched_by_value_not_by_order():
    order = np.random.default_rng(0).permutation(len(VALUES))
    source = tr.align(task("S3", order=order), CANDIDATES)
    expected = times(12).min() / times(12)
    assert np.allclose(source.performance[np.argsort(source.rows)], expected)
    assert (
        source.performance.max() == 1.0 and source.rows[np.argmax(source.performance)] == 12 * 8 + 3
    )


def test_invalid_and_foreign_rows():
    values = np.vstack([VALUES[:3], [[99.0, 0.0]]])  # the last is not in the space
    source = tr.align(TaskData("g", values, np.array([2.0, np.nan, 1.0, 0.5]), ()), CANDIDATES)
    assert source.rows.tolist() == [0, 1, 2]
    assert source.performance.tolist() == [0.5, tr.INVALID_PERFORMANCE, 1.0]
    empty = tr.align(TaskData("g", VALUES[:2], np.array([np.nan, np.nan]), ()), CANDIDATES)
    assert empty.rows.size == 0
    assert (
        tr.transfer(
            CANDIDATES,
            [TaskData("g", values[3:], np.ones(1), (1.0,))],
            (1.0,),
            ["a"],
            rng=np.random.default_rng(0),
        )
        is None
    )


def test_cv_dfs_picks_the_feature_that_moves_the_optimum():
    sources = tr.sources_for([task(name) for name in GPUS], CANDIDATES)
    selection = tr.select_features(
        tr.encode_space(CANDIDATES), sources, NAMES, rng=np.random.default_rng(1)
    )
    assert selection.method == "cv"
    assert selection.names == ("b",) and selection.columns == (1,)
    assert selection.score == 1.0  # every held-out GPU finds its optimum among the top 10


def test_the_model_puts_an_unseen_gpu_in_the_right_region():
    found = tr.transfer(
        CANDIDATES, [task(name) for name in GPUS], TARGET[0], NAMES, rng=np.random.default_rng(2)
    )
    assert found is not None and found.selection.names == ("b",)
    assert found.sources == tuple(GPUS)
    best = VALUES[found.ranking[:5]]
    assert np.all(np.abs(best[:, 0] - TARGET[1]) <= 1)
    # The scrambled feature alone sends the target to the low region: selection matters.
    only_a = tr.transfer(
        CANDIDATES,
        [task(name, columns=[0]) for name in GPUS],
        TARGET[0][:1],
        NAMES[:1],
        rng=np.random.default_rng(2),
        select=False,
    )
    assert VALUES[only_a.ranking[0], 0] <= 4


def test_cv_is_impossible_with_fewer_than_three_sources():
    space = tr.encode_space(CANDIDATES)
    rng = np.random.default_rng(0)
    one = tr.sources_for([task("S1")], CANDIDATES)
    two = tr.sources_for([task("S1"), task("S4")], CANDIDATES)
    assert tr.select_features(space, one, NAMES, rng=rng).method == "none"
    assert tr.select_features(space, one, NAMES, rng=rng).columns == ()
    assert tr.select_features(space, two, NAMES, rng=rng).columns == (0, 1, 2)
    with pytest.raises(ValueError, match="needs 4 device features"):
        tr.select_features(space, two, NAMES + ("d",), rng=rng)


def test_a_dataset_names_its_device_by_file_name_when_the_file_does_not():
    dataset = ReplayDataset("convolution_MI250X", CANDIDATES, times(3), ("",) * len(VALUES))
    assert tr.dataset_device(dataset) == "MI250X"
    features = tr.dataset_features(dataset)
    assert features is not None and features.values["vendor_nvidia"] == 0.0
    unknown = ReplayDataset("kernel_nowhere", CANDIDATES, times(3), ("",) * len(VALUES))
    assert tr.dataset_features(unknown) is None
