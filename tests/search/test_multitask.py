"""The multi-task surrogate: sources matched to a space by value, and one model of all of them."""

from __future__ import annotations

import numpy as np
import pytest

from annotune.core.records import Candidates, TaskData
from annotune.search import multitask as mt

X, Y = np.meshgrid(np.arange(16), np.arange(8), indexing="ij")
VALUES = np.stack([X.ravel(), Y.ravel()], axis=1).astype(float)
CANDIDATES = Candidates(VALUES, ("x", "y"))


def times(best_x: int) -> np.ndarray:
    return 1.0 + 0.3 * np.abs(VALUES[:, 0] - best_x) + 0.1 * np.abs(VALUES[:, 1] - 3)


def test_rows_are_matched_by_value_not_by_order():
    order = np.random.default_rng(0).permutation(len(VALUES))
    source = mt.align(TaskData("g", VALUES[order], times(12)[order], ()), CANDIDATES)
    expected = times(12).min() / times(12)
    assert np.allclose(source.performance[np.argsort(source.rows)], expected)
    assert (
        source.performance.max() == 1.0 and source.rows[np.argmax(source.performance)] == 12 * 8 + 3
    )


def test_invalid_and_foreign_rows():
    values = np.vstack([VALUES[:3], [[99.0, 0.0]]])  # the last is not in the space
    source = mt.align(TaskData("g", values, np.array([2.0, np.nan, 1.0, 0.5]), ()), CANDIDATES)
    assert source.rows.tolist() == [0, 1, 2]
    assert source.performance.tolist() == [0.5, mt.INVALID_PERFORMANCE, 1.0]
    invalid = TaskData("invalid", VALUES[:2], np.array([np.nan, np.nan]), ())
    foreign = TaskData("foreign", values[3:], np.ones(1), ())
    assert mt.align(invalid, CANDIDATES).rows.size == 0
    assert mt.sources_for([invalid, foreign], CANDIDATES) == []


def test_each_source_is_its_own_slice_of_one_model():
    tasks = [TaskData("low", VALUES, times(2), (1.0,)), TaskData("high", VALUES, times(13), (9.0,))]
    sources = mt.sources_for(tasks, CANDIDATES)
    space = mt.encode_space(CANDIDATES)
    for features, best_x in (((1.0,), 2), ((9.0,), 13)):
        scores = mt.score_space(space, sources, [0], features, np.random.default_rng(0))
        assert VALUES[np.argmax(scores), 0] == best_x
    # Without the device feature the sources are pooled: one ranking for every GPU.
    pooled = [
        mt.score_space(space, sources, [], f, np.random.default_rng(0)) for f in ((1.0,), (9.0,))
    ]
    assert np.array_equal(*pooled)


def test_a_model_needs_sources_and_a_known_target():
    space = mt.encode_space(CANDIDATES)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="at least one source"):
        mt.TransferModel(space, []).fit([], rng)
    sources = mt.sources_for([TaskData("g", VALUES, times(2), ())], CANDIDATES)
    with pytest.raises(ValueError, match="target must be one of"):
        mt.TransferModel(space, [], target="square").fit(sources, rng)
