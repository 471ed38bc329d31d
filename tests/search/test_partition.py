"""Starchart's partition tree: least-squares splits, the stopping rule, prediction, importance."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from annotune.core.records import normalized_performance
from annotune.search.partition import StopRule, build_tree

NAMES = ("a", "b", "c")


def grid() -> np.ndarray:
    """Every combination of a in 0..9, b in 0..4, c in {1, 2, 4} (150 rows)."""
    return np.array(list(itertools.product(range(10), range(5), (1, 2, 4))), dtype=float)


def step(values: np.ndarray) -> np.ndarray:
    """Performance that depends on `a` alone: a step from 1 to 3 between a = 6 and a = 7."""
    return np.where(values[:, 0] <= 6, 1.0, 3.0)


def brute_force_split(values: np.ndarray, target: np.ndarray) -> tuple[int, float, float]:
    """Algorithm 1, lines 9-24, as written: every parameter, every value, two means."""
    best = (-1, np.nan, np.inf)
    for column in range(values.shape[1]):
        for v in np.unique(values[:, column])[:-1]:
            low = values[:, column] <= v
            sse = sum(((t - t.mean()) ** 2).sum() for t in (target[low], target[~low]))
            if sse < best[2] - 1e-12:
                best = (column, float(v), sse)
    return best


def test_root_splits_the_step_parameter_at_its_threshold():
    values = grid()
    tree = build_tree(values, step(values), NAMES)
    root = tree.root
    assert (root.parameter, root.column, root.threshold) == ("a", 0, 6.0)
    assert root.condition() == "a <= 6" and root.condition(high=True) == "a > 6"
    assert (root.low.count, root.low.mean) == (105, 1.0)
    assert (root.high.count, root.high.mean) == (45, 3.0)


def test_paper_rule_stops_when_no_split_reduces_the_error():
    # Threshold 0 (§4.3): both sides of the step are constant, so they stay leaves.
    values = grid()
    tree = build_tree(values, step(values), NAMES)
    assert [leaf.count for leaf in tree.leaves()] == [105, 45]
    assert all(leaf.sse == 0.0 for leaf in tree.leaves())


def test_constant_target_gives_a_single_leaf():
    values = grid()
    tree = build_tree(values, np.full(len(values), 0.7), NAMES)
    assert tree.root.is_leaf and tree.root.count == 150 and tree.root.gain == 0.0
    assert [share for _, share in tree.importance()] == [0.0, 0.0, 0.0]


def test_split_matches_brute_force_algorithm_1():
    rng = np.random.default_rng(3)
    values = rng.integers(0, 6, size=(80, 4)).astype(float)
    target = rng.normal(size=80) + values[:, 2] * 0.3
    root = build_tree(values, target, ("p", "q", "r", "s"), StopRule(max_depth=1)).root
    column, threshold, sse = brute_force_split(values, target)
    assert (root.column, root.threshold) == (column, threshold)
    assert root.low.sse + root.high.sse == pytest.approx(sse)
    assert root.gain == pytest.approx(root.sse - sse)


def test_stopping_limits():
    rng = np.random.default_rng(0)
    values = grid()
    target = step(values) + values[:, 1] * 0.2 + rng.normal(scale=0.05, size=len(values))
    full = build_tree(values, target, NAMES)
    assert len(full.leaves()) > 20  # threshold 0 keeps splitting the noise
    root_sse = full.root.sse

    def depth(node, level=0):
        if node.is_leaf:
            return level
        return max(depth(node.low, level + 1), depth(node.high, level + 1))

    assert depth(build_tree(values, target, NAMES, StopRule(max_depth=2)).root) == 2
    sturdy = build_tree(values, target, NAMES, StopRule(min_leaf=10))
    assert min(leaf.count for leaf in sturdy.leaves()) >= 10
    coarse = build_tree(values, target, NAMES, StopRule(min_gain=0.01))
    assert all(n.gain > 0.01 * root_sse for n in coarse.nodes() if not n.is_leaf)
    assert 2 <= len(coarse.leaves()) < len(full.leaves())
    assert build_tree(values, target, NAMES, StopRule(threshold=root_sse)).root.is_leaf


def test_predict_gives_leaf_means_and_importance_ranks_the_step_first():
    rng = np.random.default_rng(1)
    values = grid()
    target = step(values) + 0.1 * values[:, 1] + rng.normal(scale=0.01, size=len(values))
    tree = build_tree(values, target, NAMES, StopRule(min_gain=0.001))
    predicted = tree.predict(values)
    # On its own samples the tree's residual error is exactly the sum of its leaves' SSE.
    assert ((target - predicted) ** 2).sum() == pytest.approx(sum(n.sse for n in tree.leaves()))
    assert tree.predict(np.array([[0.0, 0.0, 1.0]]))[0] < 1.2
    assert tree.predict(np.array([[9.0, 4.0, 4.0]]))[0] > 3.2
    ranking = tree.importance()
    assert [name for name, _ in ranking][:2] == ["a", "b"]
    assert sum(share for _, share in ranking) == pytest.approx(1.0)
    assert ranking[0][1] > 0.8


def test_json_nests_the_splits():
    values = grid()
    data = build_tree(values, step(values), NAMES).root.to_json()
    assert data["parameter"] == "a" and data["threshold"] == 6.0 and data["samples"] == 150
    assert data["low"] == {"samples": 105, "mean": 1.0, "sse": 0.0}
    assert data["low"]["samples"] + data["high"]["samples"] == data["samples"]


def test_normalized_performance():
    got = normalized_performance(np.array([2.0, np.nan, 1.0, 4.0]))
    assert got.tolist() == [0.5, 0.0, 1.0, 0.25]
    assert normalized_performance(np.array([np.nan, np.nan])).tolist() == [0.0, 0.0]


def test_bad_input():
    with pytest.raises(ValueError):
        build_tree(np.zeros((3, 2)), np.zeros(3), NAMES)
    with pytest.raises(ValueError):
        build_tree(np.zeros((2, 3)), np.array([1.0, np.nan]), NAMES)
    with pytest.raises(ValueError):
        StopRule(min_leaf=0)
