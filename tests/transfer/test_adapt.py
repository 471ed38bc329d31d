"""CV-DFS and the zero-shot ranking on a space where the right transfer is known.

Five GPUs share a 16 x 8 space. Where the optimum lies along x depends on device feature "b"
only: low (x = 1, 2) on GPUs with small b, high (x = 12, 13) on GPUs with large b. Feature "a"
is scrambled so that it sends every held-out GPU to the wrong region, and "c" is the same on
every GPU. The target (b = 8, a closest to a low-b GPU) has its optimum at x = 12.
"""

from __future__ import annotations

import numpy as np
import pytest

from annotune.core.records import Candidates, TaskData
from annotune.search.multitask import encode_space, sources_for
from annotune.transfer import adapt
from annotune.transfer.adapt import select_features, zero_shot

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


def times(best_x: int) -> np.ndarray:
    return 1.0 + 0.3 * np.abs(VALUES[:, 0] - best_x) + 0.1 * np.abs(VALUES[:, 1] - 3)


def task(name: str, columns=(0, 1, 2)) -> TaskData:
    features, best_x = GPUS[name]
    return TaskData(name, VALUES, times(best_x), tuple(np.asarray(features)[list(columns)]))


def test_cv_dfs_picks_the_feature_that_moves_the_optimum():
    sources = sources_for([task(name) for name in GPUS], CANDIDATES)
    selection = select_features(
        encode_space(CANDIDATES), sources, NAMES, rng=np.random.default_rng(1)
    )
    assert selection.method == "cv" and selection.ranking == "forest"  # 32 fits at most
    assert selection.names == ("b",) and selection.columns == (1,)
    assert selection.score == 1.0  # every held-out GPU finds its optimum among the top 10


def test_the_zero_shot_ranking_puts_an_unseen_gpu_in_the_right_region():
    found = zero_shot(
        CANDIDATES, [task(name) for name in GPUS], TARGET[0], NAMES, rng=np.random.default_rng(2)
    )
    assert found is not None and found.selection.names == ("b",)
    assert found.sources == tuple(GPUS)
    best = VALUES[found.ranking[:5]]
    assert np.all(np.abs(best[:, 0] - TARGET[1]) <= 1)
    # The scrambled feature alone sends the target to the low region: selection matters.
    only_a = zero_shot(
        CANDIDATES,
        [task(name, columns=[0]) for name in GPUS],
        TARGET[0][:1],
        NAMES[:1],
        rng=np.random.default_rng(2),
        select=False,
    )
    assert only_a is not None and only_a.selection.method == "all"
    assert VALUES[only_a.ranking[0], 0] <= 4


def test_no_zero_shot_without_a_source_sharing_the_space():
    foreign = TaskData("g", VALUES[:1] + 100.0, np.ones(1), (1.0,))
    assert zero_shot(CANDIDATES, [foreign], (1.0,), ["a"], rng=np.random.default_rng(0)) is None


def test_cv_is_impossible_with_fewer_than_three_sources():
    space = encode_space(CANDIDATES)
    rng = np.random.default_rng(0)
    one = sources_for([task("S1")], CANDIDATES)
    two = sources_for([task("S1"), task("S4")], CANDIDATES)
    assert select_features(space, one, NAMES, rng=rng).method == "none"
    assert select_features(space, one, NAMES, rng=rng).columns == ()
    assert select_features(space, two, NAMES, rng=rng).columns == (0, 1, 2)
    with pytest.raises(ValueError, match="needs 4 device features"):
        select_features(space, two, NAMES + ("d",), rng=rng)


def test_the_blend_picks_the_feature_the_forest_picks():
    sources = sources_for([task(name) for name in GPUS], CANDIDATES)
    selection = select_features(
        encode_space(CANDIDATES), sources, NAMES, rng=np.random.default_rng(1), ranking="blend"
    )
    assert selection.method == "cv" and selection.ranking == "blend"
    assert selection.names == ("b",)


def test_auto_ranking_blends_when_the_forest_would_need_too_many_fits(monkeypatch):
    sources = sources_for([task(name) for name in GPUS], CANDIDATES)
    space = encode_space(CANDIDATES)
    monkeypatch.setattr(adapt, "EXHAUSTIVE_FITS", 3)
    first = select_features(space, sources, NAMES, rng=np.random.default_rng(1))
    again = select_features(space, sources, NAMES, rng=np.random.default_rng(1))
    assert first.ranking == "blend" and first.names == ("b",)
    assert first == again  # deterministic for a seed
    with pytest.raises(ValueError, match="ranking must be one of"):
        select_features(space, sources, NAMES, rng=np.random.default_rng(1), ranking="knn")


def test_the_blend_routes_the_held_out_gpu_like_a_tree_split_at_midpoints():
    values = np.array([[1.0, 5.0], [4.0, 5.0], [10.0, 5.0]])
    # Column 0: 3 lies on 4's side of the midpoint 2.5; column 1 is constant: ignored.
    assert adapt._nearest(values, np.array([3.0, 0.0]), (0,)).tolist() == [1]
    assert adapt._nearest(values, np.array([3.0, 0.0]), (1,)).tolist() == [0, 1, 2]
    assert adapt._nearest(values, np.array([3.0, 0.0]), ()).tolist() == [0, 1, 2]


def test_the_ranking_fit_samples_each_source_beyond_its_row_cap(monkeypatch):
    from annotune.search import multitask

    seen = []
    fit = multitask.TransferModel.fit

    def spy(self, sources, rng, rows_per_source=None):
        seen.append(rows_per_source)
        return fit(self, sources, rng, rows_per_source)

    monkeypatch.setattr(multitask.TransferModel, "fit", spy)
    sources = sources_for([task(name) for name in GPUS], CANDIDATES)  # 4 x 128 rows
    space = encode_space(CANDIDATES)
    multitask.score_space(space, sources, [1], TARGET[0], np.random.default_rng(0))
    monkeypatch.setattr(multitask, "PREDICTION_ROWS", 200)
    multitask.score_space(space, sources, [1], TARGET[0], np.random.default_rng(0))
    assert seen == [None, 50]
