"""Predictive tuning: boosted trees on log speedup, hill-climbed on the model."""

from __future__ import annotations

import math

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from annotune.core.records import Candidates, Result, TaskData
from annotune.search import Budget, create, run_search
from annotune.search.neighbours import Neighbours, hill_climb
from annotune.search.predictive import PredictiveStrategy
from annotune.search.speedup import EXACT_ROWS, boosted_trees, log_speedup, reference_time


def grid(*sizes: int, keep=None) -> Candidates:
    """All integer points of a box, optionally filtered by a constraint on the rows."""
    values = np.stack(np.meshgrid(*[np.arange(s) for s in sizes], indexing="ij"), -1)
    values = values.reshape(-1, len(sizes)).astype(np.float64)
    if keep is not None:
        values = values[[keep(row) for row in values]]
    return Candidates(values, tuple(f"p{i}" for i in range(len(sizes))))


def measure_with(times: np.ndarray):
    def measure(indices):
        return [
            Result(int(i), None if math.isnan(times[i]) else float(times[i]), "") for i in indices
        ]

    return measure


# -- the neighbour structure and the climb --------------------------------------------------------


def test_neighbours_are_the_rows_differing_in_exactly_one_column():
    space = grid(4, 3, 3, keep=lambda r: r[0] + r[1] <= 4)  # a constrained space
    near = Neighbours.of(space.values)
    for row in range(len(space)):
        expected = {
            other
            for other in range(len(space))
            if np.count_nonzero(space.values[other] != space.values[row]) == 1
        }
        got = near(row)
        assert set(got.tolist()) == expected
        assert len(got) == len(expected)


def plateau_score(space: Candidates, optimum: tuple[int, int]):
    """-ceil(max(|x - a|, |y - b|) / 3): a unique optimum, rings of equal value around it."""
    x, y = space.values[:, 0], space.values[:, 1]
    value = -np.ceil(np.maximum(np.abs(x - optimum[0]), np.abs(y - optimum[1])) / 3)
    return lambda rows: value[rows]


def test_hill_climb_finds_the_unique_optimum_across_plateaus():
    space = grid(16, 16)
    score = plateau_score(space, (11, 4))
    near = Neighbours.of(space.values)
    optimum = int(np.flatnonzero((space.values == (11, 4)).all(axis=1))[0])
    for seed in range(20):
        rng = np.random.default_rng(seed)
        start = int(rng.integers(len(space)))
        assert hill_climb(score, near, start, rng) == optimum


def test_hill_climb_needs_sideways_moves_on_a_plateau():
    # From (5, 10) every one-parameter move keeps max(|dx|, |dy|) = 6: no move improves.
    space = grid(16, 16)
    score = plateau_score(space, (11, 4))
    near = Neighbours.of(space.values)
    start = int(np.flatnonzero((space.values == (5, 10)).all(axis=1))[0])
    rng = np.random.default_rng(0)
    assert hill_climb(score, near, start, rng, max_sideways=0) == start
    optimum = int(np.flatnonzero((space.values == (11, 4)).all(axis=1))[0])
    assert hill_climb(score, near, start, rng) == optimum


# -- the training target ---------------------------------------------------------------------------


def test_log_speedup_over_the_reference_with_the_invalid_penalty():
    y = log_speedup(np.array([1.0, 2.0, np.nan, 0.5]), reference=2.0, invalid=math.log(0.5))
    np.testing.assert_allclose(y, [math.log(2), 0.0, math.log(0.5), math.log(4)])


def test_both_boosted_tree_implementations_learn_the_same_model():
    """A small training set is fitted exactly, a large one by histograms: the same trees
    either way on a parameter space (few values per column), so switching at `EXACT_ROWS`
    changes the fit's cost, not what the search learns. Fitted on one OpenMP thread, as the
    strategy fits by default (`n_jobs`): more spin on a busy machine (2.3 s CPU, not 0.1 s)."""
    rng = np.random.default_rng(3)
    values = rng.integers(0, 6, size=(2 * EXACT_ROWS, 5)).astype(np.float64)
    target = np.log1p(values[:, 0] * values[:, 1]) - 0.3 * (values[:, 2] == 3) + 0.1 * values[:, 4]
    settings = {"trees": 100, "depth": 6, "min_leaf": 2, "learning_rate": 0.1, "seed": 5}
    small = values[:EXACT_ROWS], target[:EXACT_ROWS]
    with threadpool_limits(1, user_api="openmp"):
        exact = boosted_trees(EXACT_ROWS, **settings).fit(*small)
        binned = boosted_trees(EXACT_ROWS + 1, **settings).fit(*small)
    assert type(exact).__name__ == "GradientBoostingRegressor"
    assert type(binned).__name__ == "HistGradientBoostingRegressor"
    a, b = exact.predict(values), binned.predict(values)
    assert np.corrcoef(a, b)[0, 1] > 0.9999
    assert np.abs(a - b).max() < 0.02 * np.ptp(target)  # other trees: 0.05 and more


def test_reference_time_is_the_same_configuration_else_the_median():
    values = np.array([[1.0, 1.0], [2.0, 1.0], [4.0, 1.0], [8.0, 1.0]])
    times = np.array([3.0, np.nan, 1.0, 5.0])
    assert reference_time(values, times, np.array([8.0, 1.0])) == 5.0
    assert reference_time(values, times, np.array([2.0, 1.0])) == 3.0  # invalid there: median
    assert reference_time(values, times, np.array([16.0, 1.0])) == 3.0  # absent: median
    assert reference_time(values, times, None) == 3.0
    assert math.isnan(reference_time(values, np.full(4, np.nan), None))


# -- the strategy's contract -----------------------------------------------------------------------


def bowl(space: Candidates, centre: tuple[float, ...]) -> np.ndarray:
    """Times with a unique minimum at `centre`."""
    return 1.0 + ((space.values - np.asarray(centre)) ** 2).sum(axis=1)


def test_registered_by_name():
    assert isinstance(create("predictive", batch=4), PredictiveStrategy)


def test_exhausts_a_small_space_without_repeats_and_invalid_is_never_best():
    space = grid(5, 4, 3)
    times = bowl(space, (3, 1, 2))
    times[space.values[:, 0] == 0] = np.nan  # a fifth of the space fails
    times[1] = np.nan  # and one more
    outcome = run_search(
        PredictiveStrategy(batch=4, initial=6),
        space,
        measure_with(times),
        budget=Budget(),
        rng=np.random.default_rng(1),
    )
    indices = [r.index for r in outcome.results]
    assert sorted(indices) == list(range(len(space)))
    assert outcome.stopped_by == "exhausted"
    assert outcome.best is not None and outcome.best.valid
    assert outcome.best.time == np.nanmin(times)


def test_same_seed_same_search():
    space = grid(8, 8, 4)
    times = bowl(space, (5, 2, 1))

    def run(seed: int) -> list[int]:
        outcome = run_search(
            PredictiveStrategy(batch=5, initial=10),
            space,
            measure_with(times),
            budget=Budget(evaluations=40),
            rng=np.random.default_rng(seed),
        )
        return [r.index for r in outcome.results]

    assert run(3) == run(3)
    assert run(3) != run(4)


def test_model_guided_picks_avoid_the_invalid_region():
    # Half the space fails; the valid half is a shallow bowl, every time within 1.4x of any
    # other. Learned as speedup 0.5, the invalid half looks worse than anything valid, so the
    # climbs end in the valid half.
    space = grid(2, 16, 16)
    times = 1.0 + bowl(space, (0, 9, 4)) / 600.0
    times[space.values[:, 0] == 1] = np.nan
    measure = measure_with(times)
    for seed in range(5):
        strategy = PredictiveStrategy(batch=10, initial=20, explore=0.0)
        strategy.start(space, np.random.default_rng(seed))
        strategy.tell(measure(strategy.ask(20)))
        guided = []
        for _ in range(3):
            asked = strategy.ask(10)
            guided.extend(asked)
            strategy.tell(measure(asked))
        assert not np.isnan(times[guided]).any()


def test_the_reference_row_is_measured_first():
    space = grid(6, 6)
    strategy = PredictiveStrategy(reference=17, initial=5)
    strategy.start(space, np.random.default_rng(0))
    asked = strategy.ask(5)
    assert asked[0] == 17 and len(set(asked)) == 5


@pytest.mark.parametrize(
    "options",
    [{"batch": 0}, {"explore": 1.5}, {"from_best": -0.1}, {"invalid_speedup": 1.0}, {"depth": 0}],
)
def test_rejects_bad_options(options):
    with pytest.raises(ValueError):
        PredictiveStrategy(**options)


def test_prior_features_must_match_the_target():
    prior = [TaskData("small", np.zeros((2, 2)), np.ones(2), features=(1.0, 2.0))]
    with pytest.raises(ValueError, match="features"):
        PredictiveStrategy(prior=prior, task_features=(3.0,))


# -- task features: learning from other problem sizes ---------------------------------------------


def shifted_times(space: Candidates, size: float) -> np.ndarray:
    """A kernel whose best x follows the problem size and best y runs against it."""
    x, y = space.values[:, 0], space.values[:, 1]
    return 1.0 + (x - size) ** 2 + 0.5 * (y - (15 - size)) ** 2


def test_prior_problem_sizes_guide_the_first_picks_on_a_new_size():
    space = grid(16, 16)
    prior = [
        TaskData(f"size {s}", space.values, shifted_times(space, s), features=(float(s),))
        for s in (1, 2, 3, 4, 5, 7, 8, 9, 10, 11)
    ]
    target = shifted_times(space, 6.0)
    normalized = target.min() / target
    for seed in range(4):
        strategy = PredictiveStrategy(batch=10, prior=prior, task_features=(6.0,))
        strategy.start(space, np.random.default_rng(seed))
        first = strategy.ask(10)  # nothing measured on the target yet
        assert len(first) == 10
        # Random picks average 0.07 of the optimum; the model's picks sit near x = 5..7.
        assert normalized[first].mean() > 3 * normalized.mean()
        assert normalized[first].max() >= 0.5


def test_excluded_rows_are_never_proposed():
    """Rows another strategy sharing the search chose (IterML's own batches) stay out."""
    candidates = grid(6, 6)
    times = 1.0 + np.arange(len(candidates), dtype=float)
    strategy = PredictiveStrategy(initial=4, batch=5)
    strategy.start(candidates, np.random.default_rng(0))
    excluded = np.arange(0, len(candidates), 2)
    strategy.exclude(excluded)
    proposed: list[int] = []
    while batch := strategy.ask(5):
        proposed += batch
        strategy.tell([Result(i, float(times[i])) for i in batch])
    assert sorted(proposed) == list(range(1, len(candidates), 2))
