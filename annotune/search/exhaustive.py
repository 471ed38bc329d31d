"""Exhaustive search: every configuration in row order (the ground truth for small spaces)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from annotune.core.records import Candidates, Result
from annotune.search.base import Strategy


class Exhaustive(Strategy):
    """Measure rows 0, 1, 2, ... until all are measured; ignores the random generator."""

    name = "exhaustive"

    def start(self, candidates: Candidates, rng: np.random.Generator) -> None:
        self._size = len(candidates)
        self._next = 0

    def ask(self, max_count: int) -> list[int]:
        stop = min(self._size, self._next + max_count)
        batch = list(range(self._next, stop))
        self._next = stop
        return batch

    def tell(self, results: Sequence[Result]) -> None:
        """Exhaustive search learns nothing."""
