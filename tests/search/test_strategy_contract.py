"""The ask/tell contract, checked on every registered strategy (as scikit-learn checks every
estimator): a strategy registered in `annotune.search` is covered here without a line added.

Each check runs the strategy as created by name, with its defaults, on a small constrained
space (the rows of `Candidates` are its only legal configurations), through a recorder that
sees every ask and tell, so that the driver's own guards (`run_search` cuts an ask to the
budget) cannot hide a strategy that breaks the contract.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from annotune.core.records import Candidates, Result
from annotune.search import STRATEGY_NAMES, Budget, Strategy, create, run_search

DETERMINISTIC = {"exhaustive"}
"""Strategies whose choices do not depend on the seed (every other one must)."""


def constrained_space() -> tuple[Candidates, np.ndarray]:
    """6 x 4 x 2 x 2 configurations less those with x + y > 5: 72 rows, one optimum.

    Large enough that IterML's climbs start (after 50 measured), small enough to exhaust.
    """
    grid = np.meshgrid(np.arange(6), np.arange(4), [1, 4], [0, 1], indexing="ij")
    values = np.stack([g.ravel() for g in grid], axis=1).astype(float)
    values = values[values[:, 0] + values[:, 1] <= 5]
    x, y, z, w = values.T
    times = 1.0 + 0.1 * ((x - 4) ** 2 + (y - 1) ** 2) + 0.2 * np.abs(np.log2(z) - 2) + 0.3 * w
    return Candidates(values, ("x", "y", "z", "w")), times


class Recorder(Strategy):
    """A strategy as the driver sees it: every ask, what it returned, and every tell."""

    def __init__(self, inner: Strategy) -> None:
        self.inner = inner
        self.asks: list[tuple[int, list[int]]] = []  # (max_count, the rows returned)
        self.told: list[int] = []

    @property
    def asked(self) -> list[int]:
        return [row for _, rows in self.asks for row in rows]

    def start(self, candidates: Candidates, rng: np.random.Generator) -> None:
        self.inner.start(candidates, rng)

    def ask(self, max_count: int) -> list[int]:
        rows = self.inner.ask(max_count)
        self.asks.append((max_count, list(rows)))
        return rows

    def tell(self, results: Sequence[Result]) -> None:
        self.told.extend(result.index for result in results)
        self.inner.tell(results)


def measurer(candidates: Candidates, times: np.ndarray, failing: np.ndarray | None = None):
    """Replays `times`; rows in `failing` fail. Refuses a row outside the space or twice."""
    measured: set[int] = set()

    def measure(rows: Sequence[int]) -> list[Result]:
        out = []
        for row in rows:
            assert isinstance(row, int | np.integer) and 0 <= row < len(candidates), row
            assert row not in measured, f"row {row} measured twice"
            measured.add(int(row))
            if failing is not None and failing[row]:
                out.append(Result(int(row), None, "RuntimeFailedConfig"))
            else:
                out.append(Result(int(row), float(times[row])))
        return out

    return measure


def search(
    name: str,
    *,
    seed: int = 0,
    evaluations: int | None = None,
    batch: int = 7,
    failing: np.ndarray | None = None,
):
    candidates, times = constrained_space()
    strategy = Recorder(create(name))
    outcome = run_search(
        strategy,
        candidates,
        measurer(candidates, times, failing),
        budget=Budget(evaluations=evaluations),
        rng=np.random.default_rng(seed),
        batch_size=batch,
    )
    return strategy, outcome, candidates, times


def test_the_registry_holds_every_strategy_once():
    assert len(STRATEGY_NAMES) == len(set(STRATEGY_NAMES)) >= 7
    assert {"iterml", "iterml-paper", "predictive", "random", "starchart", "transfer"} <= set(
        STRATEGY_NAMES
    )
    assert set(STRATEGY_NAMES) >= DETERMINISTIC
    for name in STRATEGY_NAMES:
        assert isinstance(create(name), Strategy)


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_a_space_smaller_than_the_budget_ends_without_asking_twice_or_outside(name):
    strategy, outcome, candidates, times = search(name, evaluations=10 * 72, batch=10)
    asked = strategy.asked
    assert outcome.stopped_by == "exhausted"
    assert len(asked) == len(set(asked)) <= len(candidates)
    assert all(isinstance(row, int) and 0 <= row < len(candidates) for row in asked)
    assert strategy.told == asked == [r.index for r in outcome.results]
    assert strategy.inner.ask(5) == []  # done stays done
    assert outcome.best is not None and outcome.best.time == times[asked].min()


@pytest.mark.parametrize("name", STRATEGY_NAMES)
@pytest.mark.parametrize(("evaluations", "batch"), [(0, 4), (1, 4), (23, 4), (33, 6)])
def test_each_ask_and_the_search_stay_within_the_budget(name, evaluations, batch):
    strategy, outcome, _, _ = search(name, evaluations=evaluations, batch=batch)
    assert len(outcome.results) <= evaluations
    # The space holds more: the budget stops the search, unless the strategy has nothing left
    # to propose (`iterml-paper` prunes what it will never measure).
    assert outcome.stopped_by == "budget" or (
        outcome.stopped_by == "exhausted" and strategy.asks[-1][1] == [] and evaluations > 20
    )
    for max_count, rows in strategy.asks:
        assert 0 < max_count <= batch
        assert len(rows) <= max_count  # not trimmed by the driver: the strategy's own answer
    assert len(strategy.asked) == len(set(strategy.asked)) == len(outcome.results)


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_asked_rows_are_never_asked_again_before_their_results_come(name):
    """Several devices: the concurrent search asks again before it tells, and tells part."""
    candidates, times = constrained_space()
    strategy = create(name)
    strategy.start(candidates, np.random.default_rng(5))
    assert strategy.ask(0) == []
    asked: list[int] = []
    pending: list[int] = []
    for step in range(14):
        rows = strategy.ask(3)
        assert len(rows) <= 3
        asked.extend(rows)
        pending.extend(rows)
        if step % 2:  # every other round tells the oldest half of what is pending
            told, pending = pending[: len(pending) // 2 + 1], pending[len(pending) // 2 + 1 :]
            strategy.tell([Result(int(r), float(times[r])) for r in told])
    assert len(asked) == len(set(asked)) > 20  # past every random first sample
    assert all(0 <= row < len(candidates) for row in asked)


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_the_same_seed_gives_the_same_choices_and_other_seeds_other_ones(name):
    def choices(seed: int) -> list[int]:
        return search(name, seed=seed, evaluations=30, batch=10)[0].asked

    assert choices(3) == choices(3)
    others = {tuple(choices(seed)) for seed in (3, 4, 5)}
    assert len(others) == (1 if name in DETERMINISTIC else 3)


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_failed_measurements_are_never_best_and_the_search_goes_on(name):
    candidates, times = constrained_space()
    x, w = candidates.values[:, 0], candidates.values[:, 3]
    failing = (x >= 4) | (w == 1)  # more than half the space, the optimum too
    assert failing[np.argmin(times)]
    strategy, outcome, _, _ = search(name, evaluations=40, batch=10, failing=failing)
    assert len(outcome.results) == len(set(strategy.asked))
    assert len(outcome.results) == 40 or outcome.stopped_by == "exhausted"
    assert any(r.time is None and r.error for r in outcome.results)
    assert outcome.best is not None and not failing[outcome.best.index]
    valid = [r.index for r in outcome.results if not failing[r.index]]
    assert outcome.best.time == times[valid].min()


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_a_search_whose_every_measurement_fails_has_no_best_and_still_ends(name):
    candidates, _ = constrained_space()
    everything = np.ones(len(candidates), dtype=bool)
    strategy, outcome, _, _ = search(name, evaluations=30, batch=10, failing=everything)
    assert len(outcome.results) == len(set(strategy.asked))
    assert len(outcome.results) == 30 or outcome.stopped_by == "exhausted"
    assert outcome.best is None
