"""Random picks spread over value pairs: a greedy pairwise covering design.

Combinatorial testing's observation carries over to tuning spaces: what a plain random sample
misses is most often a *pair* of parameter values (pnpoly's best configurations need tile
size 18-20 together with use_method 0; either alone is worse than the plateau the search sits
on). Picks that first cover (value, value) pairs no measurement has covered yet find such
combinations early, while each pick is still drawn at random from the candidates that cover
the most.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np


class PairCoverage:
    """How often each (value, value) pair of two parameters has been measured.

    Only parameters with 2 to `max_values` values take part: with a budget of a few hundred
    measurements the pairs of a parameter with many values (31 block sizes: 31 x 11 pairs
    with an 11-valued one) cannot be covered, and they would outnumber and crowd out the
    pairs that can.
    """

    def __init__(self, values: np.ndarray, max_values: int) -> None:
        codes, sizes = [], []
        for column in np.asarray(values).T:
            levels, code = np.unique(column, return_inverse=True)
            if 1 < levels.size <= max_values:
                codes.append(code)
                sizes.append(levels.size)
        self._codes = np.stack(codes, axis=1) if codes else np.zeros((len(values), 0), np.intp)
        pairs = np.asarray(list(combinations(range(len(sizes)), 2)), dtype=np.intp)
        self._first, self._second = pairs.reshape(-1, 2).T
        size = np.asarray(sizes, dtype=np.intp)
        cells = size[self._first] * size[self._second]
        self._offset = np.concatenate([[0], np.cumsum(cells)[:-1]]).astype(np.intp)
        self._second_size = size[self._second]
        self._counts = np.zeros(int(cells.sum()), dtype=np.int64)

    @property
    def pairs(self) -> int:
        return self._first.size

    def record(self, rows: Sequence[int] | np.ndarray) -> None:
        """Count the pairs that measured `rows` cover."""
        rows = np.asarray(rows, dtype=np.intp)
        if rows.size and self.pairs:
            np.add.at(self._counts, self._cells(rows).ravel(), 1)

    def spread(
        self, rows: np.ndarray, size: int, rng: np.random.Generator, candidates: int = 256
    ) -> np.ndarray:
        """`size` of `rows`, each covering the most pairs not covered so far.

        Greedy over `candidates` rows (at least `size`) drawn at random, ties broken at
        random; with nothing to cover it is a uniform random pick.
        """
        size = min(size, rows.size)
        if size <= 0:
            return np.zeros(0, dtype=np.intp)
        if not self.pairs:
            return rng.choice(rows, size=size, replace=False)
        candidates = max(candidates, size)
        pool = rows if rows.size <= candidates else rng.choice(rows, candidates, replace=False)
        cells = self._cells(pool)
        counts = self._counts.copy()
        free = np.ones(pool.size, dtype=bool)
        chosen = []
        for _ in range(size):
            uncovered = np.where(free, (counts[cells] == 0).sum(axis=1), -1)
            best = np.flatnonzero(uncovered == uncovered.max())
            pick = int(best[rng.integers(best.size)])
            free[pick] = False
            counts[cells[pick]] += 1
            chosen.append(int(pool[pick]))
        return np.asarray(chosen, dtype=np.intp)

    def _cells(self, rows: np.ndarray) -> np.ndarray:
        """(rows, pairs) index of each row's value pair in the counts."""
        codes = self._codes[rows]
        return self._offset + codes[:, self._first] * self._second_size + codes[:, self._second]
