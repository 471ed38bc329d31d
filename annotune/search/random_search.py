"""Random search without replacement: the baseline every standard is measured against."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from annotune.core.records import Candidates, Result
from annotune.search.base import Strategy


class RandomSearch(Strategy):
    """Measure the configurations in one uniformly random order, each at most once."""

    name = "random"

    def start(self, candidates: Candidates, rng: np.random.Generator) -> None:
        self._order = rng.permutation(len(candidates))
        self._next = 0

    def ask(self, max_count: int) -> list[int]:
        batch = self._order[self._next : self._next + max_count]
        self._next += len(batch)
        return [int(i) for i in batch]

    def tell(self, results: Sequence[Result]) -> None:
        """Random search learns nothing."""
