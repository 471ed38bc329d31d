"""The paper's standards: exact random-search values and the statistics of repeated runs."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from annotune.bench import (
    Standards,
    bench,
    plot_boxes,
    random_best_quantile,
    random_miss_probability,
    random_standards,
    run_seeds,
    size_prior,
    standards_from_hits,
)
from annotune.core.records import Candidates
from annotune.results.replay import ReplayDataset


def synthetic_dataset(n_side: int = 14, seed: int = 0) -> ReplayDataset:
    """A 14 x 14 x 4 space (784 configurations) with a smooth optimum and some failures."""
    x, y, z = np.meshgrid(np.arange(n_side), np.arange(n_side), np.arange(4), indexing="ij")
    values = np.stack([x.ravel(), y.ravel(), z.ravel()], axis=1).astype(float)
    times = 1.0 + 0.1 * ((values[:, 0] - 9) ** 2 + (values[:, 1] - 3) ** 2) + values[:, 2]
    rng = np.random.default_rng(seed)
    invalid = rng.random(len(times)) < 0.05
    invalid[np.argmin(times)] = False
    times[invalid] = np.nan
    errors = tuple("RuntimeFailedConfig" if bad else "" for bad in invalid)
    return ReplayDataset("synthetic", Candidates(values, ("x", "y", "z")), times, errors)


def monte_carlo_first_hits(normalized: np.ndarray, runs: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    good = normalized >= 0.95
    return np.array(
        [int(np.flatnonzero(good[rng.permutation(normalized.size)])[0]) + 1 for _ in range(runs)]
    )


def test_exact_random_miss_probability_matches_monte_carlo():
    normalized = np.concatenate([np.full(6, 0.97), np.linspace(0.0, 0.9, 994)])
    miss = random_miss_probability(normalized)
    assert miss[0] == 1.0 and miss[-1] == 0.0 and np.all(np.diff(miss) <= 1e-15)
    hits = monte_carlo_first_hits(normalized, 4000, seed=1)
    for n in (10, 50, 150, 400):
        assert abs(np.mean(hits > n) - miss[n]) < 0.03
    exact = random_standards(normalized)
    estimated = standards_from_hits(list(hits))
    assert abs(estimated.std1 - exact.std1) <= 0.1 * exact.std1
    assert abs(estimated.std2 - exact.std2) <= 0.1 * exact.std2


def test_exact_random_standards_small_case():
    # 1 good configuration in 4: after N draws the miss probability is (4 - N) / 4.
    standards = random_standards(np.array([1.0, 0.5, 0.2, 0.0]))
    assert standards == Standards(std1=2, std2=4)


def test_exact_random_best_quantile_matches_monte_carlo():
    rng = np.random.default_rng(3)
    normalized = rng.random(300)
    draws = 20
    best = np.array([normalized[rng.permutation(300)[:draws]].max() for _ in range(4000)])
    for q in (0.05, 0.5):
        exact = random_best_quantile(normalized, draws, q)
        assert abs(np.quantile(best, q, method="inverted_cdf") - exact) < 0.01


def test_standards_from_hits_uses_the_inverted_cdf():
    hits = list(range(1, 101))  # run k first reaches 0.95 after k measurements
    assert standards_from_hits(hits) == Standards(std1=50, std2=95)
    assert standards_from_hits(hits[:94] + [None] * 6) == Standards(std1=50, std2=None)
    assert standards_from_hits([None] * 3) == Standards(None, None)


@pytest.mark.slow
def test_bench_is_deterministic_and_iterml_beats_random():
    dataset = synthetic_dataset()
    rows = bench(dataset, ["iterml", "random"], repeats=12, seed=7, workers=1)
    again = bench(dataset, ["iterml"], repeats=4, seed=7, workers=1)  # the first 4 seeds again
    first = [t.best.tolist() for t in rows[0].traces[:4]]
    assert first == [t.best.tolist() for t in again[0].traces]
    iterml, random = rows
    assert iterml.random == random.random == random_standards(dataset.normalized())
    assert iterml.standards.std1 is not None and iterml.standards.std1 < iterml.random.std1
    assert all(len(t.best) <= iterml.cap for t in iterml.traces)
    assert run_seeds(7, 3) == run_seeds(7, 3) != run_seeds(8, 3)


def test_box_plot_is_written(tmp_path):
    pytest.importorskip("matplotlib")
    dataset = synthetic_dataset()
    rows = bench(dataset, ["iterml"], repeats=4, seed=0, workers=1)
    path = tmp_path / "fig.png"
    plot_boxes(rows, {dataset.name: dataset.normalized()}, path)
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_size_prior_takes_the_same_kernel_at_other_problem_sizes():
    values = np.array([[1.0, 2.0], [2.0, 2.0]])
    base = ReplayDataset(
        "k_100", Candidates(values, ("a", "b")), np.array([1.0, 2.0]), ("", ""), "", "k", (100.0,)
    )
    bigger = replace(base, name="k_200", problem_size=(200.0,))
    same_size = replace(base, name="k_100_again")
    other_kernel = replace(base, name="j_300", kernel="j", problem_size=(300.0,))
    no_size = replace(base, name="k_unknown", problem_size=())
    options = size_prior(base, [base, bigger, same_size, other_kernel, no_size])
    assert [task.name for task in options["prior"]] == ["k_200"]
    assert options["prior"][0].features == (200.0,)
    assert options["task_features"] == (100.0,)
    assert size_prior(base, [base, other_kernel]) == {}
