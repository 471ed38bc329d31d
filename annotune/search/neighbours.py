"""One-parameter neighbourhoods of a configuration matrix, and hill climbs over them.

A neighbour of a row is another row of the same (constrained) space that differs from it in
exactly one parameter: `Neighbours` tables them for the whole space with one sort per column,
`one_move_from` finds them for one row by comparison. `hill_climb` walks a score over the
table, and `climb_ends` turns a batch of climbs into distinct rows to measure (the
`predictive` strategy's batches, also IterML's climbs).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Neighbours:
    """For every row of a configuration matrix, the rows differing from it in one column.

    Per column j, rows that agree on every other column form a group; a row's neighbours along
    j are the other members of its group. `groups[j, i]` is row i's group along column j;
    `members[j]` lists the rows sorted by group, with group g at
    `members[j][starts[j][g]:starts[j][g + 1]]`.
    """

    groups: np.ndarray
    members: tuple[np.ndarray, ...]
    starts: tuple[np.ndarray, ...]

    @classmethod
    def of(cls, values: np.ndarray) -> Neighbours:
        """Group the rows of `values` (n, d) along each column: one sort per column."""
        n, d = values.shape
        groups = np.zeros((d, n), dtype=np.intp)
        members, starts = [], []
        for j in range(d):
            other = np.delete(values, j, axis=1)
            order = np.lexsort(other.T[::-1]) if other.shape[1] else np.arange(n)
            ordered = other[order]
            new = np.ones(n, dtype=bool)
            new[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
            groups[j, order] = np.cumsum(new) - 1
            members.append(order)
            starts.append(np.flatnonzero(np.append(new, True)))
        return cls(groups, tuple(members), tuple(starts))

    def __call__(self, row: int) -> np.ndarray:
        """All rows that differ from `row` in exactly one column."""
        parts = []
        for j, group in enumerate(self.groups[:, row]):
            start, stop = self.starts[j][group], self.starts[j][group + 1]
            if stop - start > 1:
                parts.append(self.members[j][start:stop])
        if not parts:
            return np.zeros(0, dtype=np.intp)
        near = np.concatenate(parts)
        return near[near != row]


def hill_climb(
    score: Callable[[np.ndarray], np.ndarray],
    neighbours: Callable[[int], np.ndarray],
    start: int,
    rng: np.random.Generator,
    *,
    max_sideways: int = 30,
    max_steps: int = 10_000,
) -> int:
    """Stochastic hill climb from `start`; returns the row where it stops (higher is better).

    Each step moves to a neighbour drawn at random among those scoring higher than the current
    row. With none, it moves to an equally scored neighbour not visited before, at most
    `max_sideways` times in a row, to cross plateaus; then it stops.
    """
    current = start
    value = float(score(np.array([start]))[0])
    visited = {start}
    sideways = 0
    for _ in range(max_steps):
        near = neighbours(current)
        if near.size == 0:
            break
        scores = score(near)
        better = near[scores > value]
        if better.size:
            sideways = 0
            options = better
        elif sideways < max_sideways:
            options = np.array([r for r in near[scores == value] if int(r) not in visited])
            if options.size == 0:
                break
            sideways += 1
        else:
            break
        current = int(options[rng.integers(options.size)])
        value = float(score(np.array([current]))[0])
        visited.add(current)
    return current


def climb_ends(
    predicted: np.ndarray,
    neighbours: Neighbours,
    taken: np.ndarray,
    rng: np.random.Generator,
    *,
    count: int,
    from_best: int,
    best: int,
    restarts: float,
    max_sideways: int,
) -> list[int]:
    """Up to `count` rows where hill climbs on `predicted` (higher is better) end.

    The first `from_best` climbs start from row `best`, the others from random rows; at most
    `ceil(restarts * count)` climbs are made. An end point already `taken` gives its best
    predicted free neighbour instead (`free_end`), or nothing. Every row chosen is marked in
    `taken`.
    """
    chosen: list[int] = []
    for climb in range(math.ceil(restarts * count)):
        if len(chosen) == count:
            break
        start = best if climb < from_best else int(rng.integers(taken.size))
        end = hill_climb(
            lambda rows: predicted[rows],
            neighbours,
            start,
            rng,
            max_sideways=max_sideways,
        )
        pick = free_end(end, predicted, taken, neighbours, rng)
        if pick is not None:
            chosen.append(pick)
            taken[pick] = True
    return chosen


def free_end(
    end: int,
    predicted: np.ndarray,
    taken: np.ndarray,
    neighbours: Neighbours,
    rng: np.random.Generator,
) -> int | None:
    """The climb's end point if not `taken`, else its best predicted free neighbour."""
    if not taken[end]:
        return end
    near = neighbours(end)
    near = near[~taken[near]]
    if near.size == 0:
        return None
    top = near[predicted[near] == predicted[near].max()]
    return int(top[rng.integers(top.size)])


def one_move_from(values: np.ndarray, row: int) -> tuple[np.ndarray, np.ndarray]:
    """Which parameters of each row of `values` differ from `row`'s, and which rows differ in
    exactly one (its neighbours)."""
    differs = values != values[row]
    return differs, differs.sum(axis=1, dtype=np.int32) == 1
