"""The `transfer` strategy: the ask/tell contract, determinism, the lead, the IterML fallback."""

from __future__ import annotations

import numpy as np
import pytest

from annotune.core.records import Candidates, Result, TaskData
from annotune.search import Budget, create, run_search
from annotune.search.multitask import encode_space, score_space, sources_for

X, Y = np.meshgrid(np.arange(12), np.arange(6), indexing="ij")
VALUES = np.stack([X.ravel(), Y.ravel()], axis=1).astype(float)
CANDIDATES = Candidates(VALUES, ("x", "y"))


def times(best_x: float) -> np.ndarray:
    return 1.0 + 0.3 * np.abs(VALUES[:, 0] - best_x) + 0.1 * np.abs(VALUES[:, 1] - 2)


TARGET = times(9)
PRIOR = (
    TaskData("low", VALUES, times(2), (1.0,)),
    TaskData("high", VALUES, times(10), (9.0,)),
)


def measure(indices):
    return [Result(int(i), float(TARGET[i])) for i in indices]


def search(name: str, seed: int, budget: int | None, **options):
    outcome = run_search(
        create(name, **options),
        CANDIDATES,
        measure,
        budget=Budget(evaluations=budget),
        rng=np.random.default_rng(seed),
        batch_size=7,
    )
    return [r.index for r in outcome.results]


def test_without_a_prior_it_is_iterml_seed_for_seed():
    assert search("transfer", 4, 40) == search("iterml", 4, 40)
    foreign = TaskData("elsewhere", VALUES + 100.0, times(2), (1.0,))  # no shared configuration
    assert search("transfer", 4, 40, prior=[foreign], task_features=(8.0,)) == search(
        "iterml", 4, 40
    )


def test_it_proposes_every_configuration_once_then_stops():
    asked = search("transfer", 0, None, prior=PRIOR, task_features=(8.0,))
    assert sorted(asked) == list(range(len(VALUES)))


def test_the_same_seed_gives_the_same_search():
    first = search("transfer", 1, 30, prior=PRIOR, task_features=(8.0,))
    assert first == search("transfer", 1, 30, prior=PRIOR, task_features=(8.0,))
    assert first != search("transfer", 2, 30, prior=PRIOR, task_features=(8.0,))


def test_the_first_batch_is_what_the_transferred_model_ranks_best():
    strategy = create("transfer", prior=PRIOR, task_features=(8.0,), lead=5)
    strategy.start(CANDIDATES, np.random.default_rng(3))
    first = strategy.ask(100)
    # The same model, fitted with the same seed, scores every configuration.
    sources = sources_for(PRIOR, CANDIDATES)
    scores = score_space(encode_space(CANDIDATES), sources, [0], [8.0], np.random.default_rng(3))
    assert len(first) == 5
    assert scores[first].min() >= np.sort(scores)[-5]
    # ... which, for a target that resembles the "high" GPU, is near its optimum (x = 9).
    assert np.all(np.abs(VALUES[first, 0] - 9.5) <= 1.5)
    assert strategy.progress()["sources"] == 2


def test_with_sources_the_boosted_tree_climbs_stay_off_unless_asked_for():
    def climbs(**options) -> float:
        strategy = create("transfer", prior=PRIOR, task_features=(8.0,), **options)
        run_search(
            strategy,
            CANDIDATES,
            measure,
            budget=Budget(evaluations=60),
            rng=np.random.default_rng(0),
            batch_size=7,
        )
        return strategy.progress()["climbs"]

    # Their trees would not see the sources' prediction, which the forest splits on.
    assert climbs() == 0
    assert climbs(climb_share=1, climb_after=20) > 0


def test_bad_options_are_rejected_when_created():
    with pytest.raises(ValueError, match="has 2 features, the target 1"):
        create(
            "transfer", prior=[TaskData("g", VALUES, times(2), (1.0, 2.0))], task_features=(1.0,)
        )
    with pytest.raises(ValueError, match="cut"):
        create("transfer", cut=2.0)
    with pytest.raises(ValueError, match="lead"):
        create("transfer", lead=-1)
