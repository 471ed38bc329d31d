"""The ask/tell strategies and the driver loop that owns the budget."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from annotune.core.records import Candidates, Result
from annotune.search import Budget, IterML, IterMLSettings, Strategy, create, run_search
from annotune.search import climbs as climbs_module
from annotune.search.predictive import PredictiveStrategy


def bowl(n_x: int = 24, n_y: int = 24, n_z: int = 8) -> tuple[Candidates, np.ndarray]:
    """A synthetic space with one known optimum at (17, 5, 2) and a smooth bowl around it."""
    x, y, z = np.meshgrid(np.arange(n_x), np.arange(n_y), np.arange(n_z), indexing="ij")
    values = np.stack([x.ravel(), y.ravel(), z.ravel()], axis=1).astype(float)
    times = (
        1.0 + 0.05 * ((values[:, 0] - 17) ** 2 + (values[:, 1] - 5) ** 2) + (values[:, 2] - 2) ** 2
    )
    return Candidates(values, ("x", "y", "z")), times


def replay(times: np.ndarray, invalid: np.ndarray | None = None):
    def measure(indices: Sequence[int]) -> list[Result]:
        out = []
        for i in indices:
            if invalid is not None and invalid[i]:
                out.append(Result(int(i), None, "RuntimeFailedConfig"))
            else:
                out.append(Result(int(i), float(times[i])))
        return out

    return measure


def test_random_and_exhaustive_measure_each_configuration_once():
    candidates, times = bowl(6, 5, 2)
    for name in ("random", "exhaustive"):
        outcome = run_search(
            create(name),
            candidates,
            replay(times),
            budget=Budget(),
            rng=np.random.default_rng(1),
            batch_size=7,
        )
        indices = [r.index for r in outcome.results]
        assert sorted(indices) == list(range(len(candidates)))
        assert outcome.stopped_by == "exhausted"
        assert outcome.best is not None and outcome.best.time == times.min()
    assert indices == list(range(len(candidates)))  # exhaustive keeps row order


class Recorder(Strategy):
    """Wraps a strategy and records every told result, to check what the driver tells."""

    def __init__(self, inner: Strategy):
        self.inner = inner
        self.told: list[int] = []
        self.asked: list[int] = []

    def start(self, candidates, rng):
        self.inner.start(candidates, rng)

    def ask(self, max_count):
        batch = self.inner.ask(max_count)
        self.asked.extend(batch)
        return batch

    def tell(self, results):
        self.told.extend(r.index for r in results)
        self.inner.tell(results)


@settings(max_examples=15, deadline=None)
@given(
    evaluations=st.integers(0, 60),
    batch=st.integers(1, 25),
    name=st.sampled_from(["random", "iterml", "iterml-paper"]),
)
def test_budget_is_never_exceeded_and_every_measurement_is_told(evaluations, batch, name):
    candidates, times = bowl(8, 8, 2)
    strategy = Recorder(create(name, pick=11) if name.startswith("iterml") else create(name))
    outcome = run_search(
        strategy,
        candidates,
        replay(times),
        budget=Budget(evaluations=evaluations),
        rng=np.random.default_rng(0),
        batch_size=batch,
    )
    assert len(outcome.results) <= evaluations
    assert strategy.told == [r.index for r in outcome.results]
    assert len(set(strategy.asked)) == len(strategy.asked)  # never asks twice


def test_time_budget_stops_the_loop():
    candidates, times = bowl(6, 6, 2)
    ticks = iter(range(1000))
    outcome = run_search(
        create("random"),
        candidates,
        replay(times),
        budget=Budget(seconds=3),
        rng=np.random.default_rng(0),
        batch_size=4,
        clock=lambda: float(next(ticks)),
    )
    assert outcome.stopped_by == "time"
    assert len(outcome.results) == 8  # two batches fit in three ticks


def test_callback_can_stop_the_search():
    candidates, times = bowl(6, 6, 2)
    outcome = run_search(
        create("random"),
        candidates,
        replay(times),
        budget=Budget(),
        rng=np.random.default_rng(0),
        batch_size=5,
        on_batch=lambda *_: True,
    )
    assert outcome.stopped_by == "callback" and len(outcome.results) == 5


@pytest.mark.parametrize("name", ["iterml", "iterml-paper"])
def test_same_seed_same_search(name):
    candidates, times = bowl()

    def indices(seed: int) -> list[int]:
        outcome = run_search(
            create(name),
            candidates,
            replay(times),
            budget=Budget(evaluations=80),
            rng=np.random.default_rng(seed),
        )
        return [r.index for r in outcome.results]

    assert indices(3) == indices(3)
    assert indices(3) != indices(4)


def test_invalid_configurations_are_learned_from_and_never_best():
    candidates, times = bowl()
    # Invalid: the whole region around the optimum except the optimum's own column z=2.
    invalid = (np.abs(candidates.values[:, 0] - 17) <= 3) & (candidates.values[:, 2] != 2)
    invalid |= times < 1.02  # the optimum itself fails, so the best valid one is elsewhere
    for name in ("iterml", "iterml-paper", "random"):
        outcome = run_search(
            create(name),
            candidates,
            replay(times, invalid),
            budget=Budget(evaluations=200),
            rng=np.random.default_rng(2),
        )
        assert outcome.best is not None and outcome.best.time is not None
        assert not invalid[outcome.best.index]
        assert any(r.time is None and r.error for r in outcome.results)


def test_iterml_beats_random_on_a_space_with_a_known_optimum():
    candidates, times = bowl()  # 4,608 configurations, one optimum
    optimum = int(np.argmin(times))

    def evaluations_to_optimum(name: str, seed: int) -> int:
        outcome = run_search(
            create(name),
            candidates,
            replay(times),
            budget=Budget(evaluations=len(candidates)),
            rng=np.random.default_rng(seed),
            on_batch=lambda results, *_: any(r.index == optimum for r in results),
        )
        return len(outcome.results)

    iterml = np.median([evaluations_to_optimum("iterml", s) for s in range(5)])
    # Random search without replacement needs (n + 1) / 2 draws on average: about 2,300.
    assert iterml < 150


def test_paper_mode_prunes_irreversibly():
    candidates, times = bowl()
    strategy = create("iterml-paper")
    outcome = run_search(
        strategy, candidates, replay(times), budget=Budget(), rng=np.random.default_rng(0)
    )
    assert outcome.stopped_by == "exhausted"
    # Each round measures 20 and cuts half the rest: far fewer than the space is measured.
    assert len(outcome.results) < 200
    assert strategy.progress()["alive"] == 0


def test_pick_ratio_and_option_checks():
    candidates, times = bowl(10, 10, 2)
    strategy = IterML(IterMLSettings(pick=0.05, initial=None))
    strategy.start(candidates, np.random.default_rng(0))
    assert len(strategy.ask(1000)) == 10  # 5% of 200
    assert create("iterml", cut=0.3).settings == IterMLSettings(cut=0.3)
    with pytest.raises(ValueError):
        IterMLSettings(cut=1.0)
    with pytest.raises(ValueError):
        IterMLSettings(exploit=0.8, local=0.5)
    with pytest.raises(ValueError, match="unknown strategy"):
        create("annealing")


def test_iterml_batches_are_small_until_early_until_then_pick():
    candidates, times = bowl()
    sizes: list[int] = []

    def record(results, outcome, strategy):
        sizes.append(len(results))

    run_search(
        IterML(IterMLSettings(initial=20, pick=10, early_pick=5, early_until=40)),
        candidates,
        replay(times),
        budget=Budget(evaluations=80),
        rng=np.random.default_rng(0),
        on_batch=record,
    )
    assert sizes == [20, 5, 5, 5, 5, 10, 10, 10, 10]
    with pytest.raises(ValueError):
        IterMLSettings(early_pick=-1)
    sizes.clear()
    run_search(
        create("iterml-paper"),
        candidates,
        replay(times),
        budget=Budget(evaluations=60),
        rng=np.random.default_rng(0),
        on_batch=record,
    )
    assert sizes == [20, 20, 20]  # the paper's constant pick


def test_iterml_climbs_take_their_share_of_the_batches_after_climb_after():
    candidates, times = bowl()
    for share, expected in ((0.5, 3), (2 / 3, 4), (1, 6), (0, 0)):
        strategy = IterML(
            IterMLSettings(initial=20, pick=10, early_pick=0, climb_after=40, climb_share=share)
        )
        outcome = run_search(
            strategy,
            candidates,
            replay(times),
            budget=Budget(evaluations=100),
            rng=np.random.default_rng(0),
        )
        # Six batches after 40 measured; a share of 1/2: forest, climbs, forest, climbs, ...;
        # of 2/3: forest, climbs, climbs, forest, climbs, climbs.
        assert strategy.progress()["climbs"] == expected
        indices = [r.index for r in outcome.results]
        assert len(indices) == 100 == len(set(indices))
    with pytest.raises(ValueError):
        IterMLSettings(climb_share=1.5)


def test_iterml_starts_the_climbs_at_their_first_turn_with_every_result_so_far(monkeypatch):
    climbers: list[PredictiveStrategy] = []

    class RecordedClimber(PredictiveStrategy):
        def start(self, candidates, rng):
            climbers.append(self)
            super().start(candidates, rng)

    monkeypatch.setattr(climbs_module, "PredictiveStrategy", RecordedClimber)
    candidates, times = bowl()
    for budget, started in ((40, 0), (100, 1)):
        climbers.clear()
        strategy = IterML(IterMLSettings(initial=20, pick=10, early_pick=0, climb_after=50))
        outcome = run_search(
            strategy,
            candidates,
            replay(times),
            budget=Budget(evaluations=budget),
            rng=np.random.default_rng(0),
        )
        # A search that ends before `climb_after` never pays for the climbs' neighbour table.
        assert len(climbers) == started
    # Created after 50 measured, the climber was still told all 100 results.
    assert climbers[0].progress()["measured"] == len(outcome.results) == 100
    assert strategy.progress()["climbs"] == 3  # batches from 50: forest, climbs, climbs, ...


def test_iterml_climbs_batches_first_check_the_best_along_its_small_parameters():
    candidates, times = bowl(24, 24, 3)  # z has 3 values: the one parameter checked
    strategy = IterML(
        IterMLSettings(initial=20, pick=10, early_pick=0, climb_after=40, incumbent_checks=2)
    )
    batches: list[list[int]] = []
    run_search(
        strategy,
        candidates,
        replay(times),
        budget=Budget(evaluations=100),
        rng=np.random.default_rng(0),
        on_batch=lambda results, outcome, s: batches.append([r.index for r in results]),
    )
    # 20, 10, 10 measured, then forest, climbs, climbs, forest, climbs, climbs.
    assert [len(b) for b in batches] == [20, 10, 10, 10, 10, 10, 10, 10, 10]
    values = candidates.values
    for k in (4, 5, 7, 8):
        measured = [i for batch in batches[:k] for i in batch]
        best = min(measured, key=lambda i: times[i])
        along_z = (values[:, :2] == values[best, :2]).all(axis=1) & (
            values[:, 2] != values[best, 2]
        )
        expected = set(np.flatnonzero(along_z)) - set(measured)
        assert set(batches[k][: len(expected)]) == expected, k
    with pytest.raises(ValueError):
        IterMLSettings(incumbent_checks=-1)


def test_iterml_with_climbs_every_batch_exhausts_a_small_space_once_each():
    candidates, times = bowl(6, 5, 2)
    strategy = IterML(IterMLSettings(initial=10, climb_after=0, climb_share=1))
    outcome = run_search(
        strategy, candidates, replay(times), budget=Budget(), rng=np.random.default_rng(3)
    )
    assert outcome.stopped_by == "exhausted"
    assert sorted(r.index for r in outcome.results) == list(range(len(candidates)))
    assert strategy.progress()["climbs"] > 0
