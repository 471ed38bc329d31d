from __future__ import annotations

import itertools

import numpy as np

from annotune.search.covering import PairCoverage


def grid(*sizes: int) -> np.ndarray:
    return np.array(list(itertools.product(*(range(s) for s in sizes))), dtype=float)


def pairs_covered(values: np.ndarray, rows) -> int:
    return len(
        {
            (a, b, values[r, a], values[r, b])
            for r in rows
            for a, b in itertools.combinations(range(values.shape[1]), 2)
        }
    )


def test_one_batch_covers_every_value_pair_of_a_small_space():
    values = grid(3, 3, 3, 3)  # 54 value pairs; 9 rows can cover them all
    for seed in range(5):
        picks = PairCoverage(values, 12).spread(
            np.arange(len(values)), 10, np.random.default_rng(seed)
        )
        assert len(set(picks.tolist())) == 10
        assert pairs_covered(values, picks) == 54
    # Uniform random picks of the same size leave pairs uncovered.
    rng = np.random.default_rng(0)
    uniform = [pairs_covered(values, rng.choice(81, 10, replace=False)) for _ in range(20)]
    assert max(uniform) < 54


def test_recorded_measurements_steer_the_next_picks_elsewhere():
    values = grid(3, 3, 3)
    for seed in range(20):
        coverage = PairCoverage(values, 12)
        coverage.record([0])  # (0, 0, 0): the three (0, 0) pairs are covered
        (pick,) = coverage.spread(np.arange(1, 27), 1, np.random.default_rng(seed))
        # A row with two zeros repeats a covered pair; 7 of the 26 rows have them.
        assert (values[pick] == 0).sum() <= 1


def test_parameters_with_many_values_take_no_part_and_picks_stay_in_the_given_rows():
    values = np.column_stack([np.repeat(np.arange(31), 3), np.tile(np.arange(3), 31)])
    coverage = PairCoverage(values, 12)
    assert coverage.pairs == 0  # one parameter left: no pairs, uniform random picks
    rows = np.arange(10, 40)
    picks = coverage.spread(rows, 50, np.random.default_rng(1))
    assert sorted(picks.tolist()) == rows.tolist()
    assert PairCoverage(values, 31).pairs == 1
    assert coverage.spread(rows, 0, np.random.default_rng(1)).size == 0


def test_a_batch_larger_than_the_candidate_draw_still_gets_distinct_rows():
    values = grid(4, 4, 4, 4, 4)
    picks = PairCoverage(values, 12).spread(
        np.arange(len(values)), 300, np.random.default_rng(2), candidates=64
    )
    assert picks.size == 300 == len(set(picks.tolist()))
