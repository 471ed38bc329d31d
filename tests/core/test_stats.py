"""The median's order-statistic interval."""

from __future__ import annotations

import math

import numpy as np
import pytest

from annotune.core.stats import median_interval, relative_halfwidth


def test_too_few_samples_have_no_95_percent_interval():
    assert median_interval([1.0, 2.0, 3.0, 4.0, 5.0]) is None
    assert relative_halfwidth([1.0, 2.0, 3.0]) == math.inf
    assert median_interval([]) is None


@pytest.mark.parametrize(("n", "lower_rank"), [(6, 1), (10, 2), (20, 6), (50, 18)])
def test_the_ranks_match_the_binomial_table(n, lower_rank):
    samples = list(range(1, n + 1))[::-1]  # order must not matter
    assert median_interval(samples) == (lower_rank, n + 1 - lower_rank)


def test_the_interval_holds_the_true_median_about_95_percent_of_the_time():
    rng = np.random.default_rng(1)
    hits = 0
    for _ in range(2000):
        samples = rng.lognormal(0.0, 0.5, 15)  # skewed, like timings; true median 1
        low, high = median_interval(list(samples))
        hits += low <= 1.0 <= high
    assert 0.95 <= hits / 2000 <= 0.99  # order statistics are conservative, never below


def test_relative_halfwidth():
    assert relative_halfwidth([10.0] * 6) == 0.0
    assert relative_halfwidth([9.0, 10, 10, 10, 10, 11]) == pytest.approx(0.1)
