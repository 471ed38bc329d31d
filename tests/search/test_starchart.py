"""The `starchart` strategy: the ask/tell contract, invalid results, and beating random."""

from __future__ import annotations

import numpy as np
import pytest

from annotune.core.records import Candidates, Result
from annotune.search import Budget, create, run_search
from annotune.search.starchart import StarchartStrategy


def space(invalid_corner: bool = False) -> tuple[Candidates, np.ndarray]:
    """16 x 12 x 4 configurations (768) with one optimum at (11, 3, 0) and a smooth slope.

    With `invalid_corner`, every configuration with x < 5 fails (240 of them, none near the
    optimum); their times are NaN.
    """
    x, y, z = np.meshgrid(np.arange(16), np.arange(12), np.arange(4), indexing="ij")
    values = np.stack([x.ravel(), y.ravel(), z.ravel()], axis=1).astype(float)
    times = 1.0 + 0.05 * ((values[:, 0] - 11) ** 2 + (values[:, 1] - 3) ** 2) + values[:, 2]
    if invalid_corner:
        times[values[:, 0] < 5] = np.nan
    return Candidates(values, ("x", "y", "z")), times


def measurer(times: np.ndarray):
    def measure(indices):
        return [
            Result(int(i), None if np.isnan(times[i]) else float(times[i]), "") for i in indices
        ]

    return measure


def search(seed: int, *, invalid_corner: bool = False, evaluations: int | None = None, batch=64):
    candidates, times = space(invalid_corner)
    return run_search(
        create("starchart"),
        candidates,
        measurer(times),
        budget=Budget(evaluations=evaluations),
        rng=np.random.default_rng(seed),
        batch_size=batch,
    )


@pytest.mark.parametrize("batch", [1, 7, 64])
def test_asks_every_configuration_exactly_once(batch):
    outcome = search(0, invalid_corner=True, batch=batch)
    asked = [r.index for r in outcome.results]
    assert sorted(asked) == list(range(768))  # no repeats, and the space is exhausted
    assert outcome.stopped_by == "exhausted"


def test_same_seed_same_search_and_another_seed_another():
    first = [r.index for r in search(5, evaluations=120).results]
    assert first == [r.index for r in search(5, evaluations=120).results]
    assert first != [r.index for r in search(6, evaluations=120).results]


def test_invalid_results_are_never_best_and_steered_away_from():
    fractions = []
    for seed in range(3):
        outcome = search(seed, invalid_corner=True, evaluations=150)
        assert outcome.best is not None and outcome.best.valid
        invalid = sum(not r.valid for r in outcome.results[30:])  # after the uniform start
        fractions.append(invalid / 120)
    # Uniform sampling would hit the invalid corner 240 / 768 = 31% of the time.
    assert np.mean(fractions) < 0.15


def test_all_invalid_start_still_searches():
    candidates, times = space()
    times = times.copy()
    times[:700] = np.nan  # the first batch is almost surely all invalid
    strategy = StarchartStrategy(initial=5)
    strategy.start(candidates, np.random.default_rng(0))
    seen: set[int] = set()
    while batch := strategy.ask(5):
        assert seen.isdisjoint(batch)
        seen.update(batch)
        strategy.tell(measurer(times)(batch))
    assert len(seen) == 768


def test_finds_the_optimum_faster_than_random():
    candidates, times = space()
    optimum = int(np.nanargmin(times))
    needed = []
    for seed in range(5):
        order = [r.index for r in search(seed, evaluations=300).results]
        needed.append(order.index(optimum) + 1 if optimum in order else 301)
    # Random search without replacement needs (n + 1) / 2 = 384.5 on average.
    assert np.mean(needed) < 0.25 * 384.5


def test_options_are_validated():
    for options in ({"top": 0.0}, {"batch": 0}, {"guided": 0.8, "explore": 0.4}):
        with pytest.raises(ValueError):
            create("starchart", **options)
