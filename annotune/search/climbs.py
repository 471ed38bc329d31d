"""IterML's climbs: its share of the batches given to hill climbs on boosted trees.

The forest's moves (one-parameter steps, Thompson picks inside a pool ranked by one model)
wait on a plateau when the better region needs several parameters changed at once. Climbs on
a second, differently biased model from random starts end in other places: on convolution
W6600 the `predictive` strategy alone reaches Standard 1 in 263 measurements where the forest
alone needed 511. Sharing the batches, each model learns from the other's measurements.
`Climbs` decides whose turn a batch is, runs the `predictive` strategy for the climbs' batches
and first checks the best measured configuration along its small parameters.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from annotune.core.records import Candidates, Result
from annotune.search.neighbours import one_move_from
from annotune.search.predictive import PredictiveStrategy


class Climbs:
    """The climbs' turns in one IterML search over `candidates`, drawing from `rng`.

    share: the fraction of the batches from `after` measured that are climbs (evenly
        interleaved; 0: never). incumbent_checks, incumbent_values: each climbs batch first
        takes up to `incumbent_checks` unmeasured neighbours of the best measured along
        parameters of at most `incumbent_values` values. n_jobs: the trees' threads.
    """

    def __init__(
        self,
        candidates: Candidates,
        rng: np.random.Generator,
        *,
        share: float,
        after: int,
        incumbent_checks: int,
        incumbent_values: int,
        n_jobs: int,
    ) -> None:
        self.share = share
        self.after = after
        self.incumbent_checks = incumbent_checks
        self.n_jobs = n_jobs
        self.batches = 0  # climbs batches that chose anything
        self._candidates = candidates
        self._rng = rng
        self._batches_after_start = 0
        self._turn_told = -1  # results told when the turn last passed
        self._climber: PredictiveStrategy | None = None  # created at its first turn
        self._checked_axes = np.array(
            [np.unique(column).size <= incumbent_values for column in candidates.values.T],
            dtype=bool,
        )

    def batch(
        self, count: int, told: Sequence[int], times: Sequence[float], alive: np.ndarray
    ) -> np.ndarray:
        """The climbs' batch of up to `count` `alive` rows when it is their turn, else nothing.

        `told` and `times` are everything measured so far (NaN: invalid); `alive` marks the
        rows not asked yet.
        """
        if not self.share or len(told) < self.after:
            return np.zeros(0, dtype=np.intp)
        # The turn passes only when something new was told: asked again first (several
        # devices measuring: the concurrent search tops up a batch), the batch goes on with the
        # same model, so topping it up costs no fit of the other model.
        if len(told) != self._turn_told:
            self._turn_told = len(told)
            self._batches_after_start += 1
        turn = self._batches_after_start
        # Batch `turn` is the climbs' when it completes another whole share (1e-9: 3 * (2/3)).
        if math.floor(turn * self.share + 1e-9) == math.floor((turn - 1) * self.share + 1e-9):
            return np.zeros(0, dtype=np.intp)
        if self._climber is None:
            self._climber = self._start_climber(told, times, alive)
        checks = self._incumbent_neighbours(min(self.incumbent_checks, count), told, times, alive)
        self._climber.exclude(checks)
        climbed = np.asarray(self._climber.ask(count - checks.size), dtype=np.intp)
        chosen = np.concatenate([checks, climbed[alive[climbed]]])
        self.batches += bool(chosen.size)
        return chosen

    def exclude(self, rows: np.ndarray) -> None:
        """Rows IterML asked for: the climbs never propose them."""
        if self._climber is not None:
            self._climber.exclude(rows)

    def tell(self, results: Sequence[Result]) -> None:
        """Results of the search, whichever model chose them."""
        if self._climber is not None:
            self._climber.tell(results)

    def _incumbent_neighbours(
        self, count: int, told: Sequence[int], times: Sequence[float], alive: np.ndarray
    ) -> np.ndarray:
        """Up to `count` `alive` one-parameter neighbours of the best measured, along the
        parameters with at most `incumbent_values` values, in random order."""
        times = np.asarray(times)
        valid = ~np.isnan(times)
        if count <= 0 or not valid.any():
            return np.zeros(0, dtype=np.intp)
        best = np.asarray(told)[valid][np.argmin(times[valid])]
        differs, one_move = one_move_from(self._candidates.values, best)
        neighbours = one_move & alive & differs[:, self._checked_axes].any(axis=1)
        return self._rng.permutation(np.flatnonzero(neighbours))[:count].astype(np.intp)

    def _start_climber(
        self, told: Sequence[int], times: Sequence[float], alive: np.ndarray
    ) -> PredictiveStrategy:
        """The climbs' strategy, told everything measured so far.

        Created late because its neighbour table costs about 2 s on 10^6 configurations,
        wasted on a search that stops before `after` measurements.
        """
        # explore=0: the forest's batches already hold the random (pair-covering) share; the
        # predictive strategy's own uniform random fifth only diluted the climbs.
        climber = PredictiveStrategy(initial=0, explore=0.0, n_jobs=self.n_jobs)
        climber.start(self._candidates, self._rng)
        climber.tell(
            [
                Result(row, None if math.isnan(time) else time)
                for row, time in zip(told, times, strict=True)
            ]
        )
        climber.exclude(np.flatnonzero(~alive))  # asked, results still to come
        return climber
