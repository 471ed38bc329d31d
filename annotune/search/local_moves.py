"""IterML's local moves: model-chosen one-parameter steps from the best measured configurations.

A forest is too coarse to rank the top configurations of a space, but it tells well which
value of one parameter suits a configuration already known to be good. `LocalMoves` remembers
which (centre, parameter) pairs it expanded, so that a search walks down the ranking of what
it measured instead of circling the same few centres.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from annotune.search.neighbours import one_move_from


class LocalMoves:
    """One-parameter moves around the best measured rows of `values`, each (centre,
    parameter) pair expanded once per search; up to `moves_per_centre` parameters around one
    centre per call before the next centre."""

    def __init__(self, values: np.ndarray, moves_per_centre: int) -> None:
        self.values = values
        self.moves_per_centre = moves_per_centre
        self._expanded: dict[int, set[int]] = {}  # centre row -> parameters moved along

    def choose(
        self,
        told: Sequence[int],
        times: Sequence[float],
        alive: np.ndarray,
        score: np.ndarray,
        count: int,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """`count` model-chosen unmeasured neighbours of the best measured configurations.

        `told` and `times` are the measured rows and their times (NaN: invalid), `score` the
        model's value (lower is better) for each of the `alive` rows: the forest's mean, or
        one tree's. A neighbour differs from its centre in exactly one parameter. Centres are
        taken best first; around each, up to `moves_per_centre` parameters not expanded before
        (drawn at random) are moved to the value with the best `score`. Drawing the parameter
        first matters: ranking all neighbours together spends the picks on the parameter
        with the most values even when it hardly matters (pnpoly's 31 block sizes).
        """
        if count <= 0:
            return np.zeros(0, dtype=np.intp)
        times = np.asarray(times)
        told = np.asarray(told)
        valid = ~np.isnan(times)
        centres = told[valid][np.argsort(times[valid], kind="stable")]
        predicted = np.full(len(self.values), np.inf)
        predicted[alive] = score
        chosen: list[int] = []
        for centre in centres:
            if len(chosen) == count:
                break
            differs, one_move = one_move_from(self.values, centre)
            near = one_move & np.isfinite(predicted)
            if not near.any():
                continue
            expanded = self._expanded.setdefault(int(centre), set())
            axes = [a for a in np.flatnonzero(differs[near].any(axis=0)) if a not in expanded]
            moves = min(self.moves_per_centre, count - len(chosen))
            for axis in rng.permutation(axes)[:moves]:
                expanded.add(int(axis))
                along = np.flatnonzero(near & differs[:, axis] & np.isfinite(predicted))
                if along.size == 0:
                    continue
                best = along[predicted[along] == predicted[along].min()]
                pick = int(best[rng.integers(best.size)])
                predicted[pick] = np.inf
                chosen.append(pick)
        return np.asarray(chosen, dtype=np.intp)
