"""Random legal rows by rejection: uniform coordinates are uniform over the Cartesian product,
and the first `n` distinct legal rows drawn are a uniform subset of the legal ones."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def first_distinct(rows: np.ndarray) -> np.ndarray:
    """The distinct rows of `rows`, each at its first occurrence, in order."""
    keys = np.ascontiguousarray(rows).view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1])))
    _, first = np.unique(keys[:, 0], return_index=True)
    return rows[np.sort(first)]


def draw_legal(
    sizes: tuple[int, ...],
    legal_mask: Callable[[np.ndarray], np.ndarray],
    batch_rows: int,
    n: int,
    rng: np.random.Generator,
    max_draws: int,
) -> np.ndarray:
    """Up to `n` distinct legal rows, in the order first drawn, from at most `max_draws`:
    rows of domains of `sizes`, `legal_mask` saying which are legal, `batch_rows` at most drawn
    at a time."""
    found = np.empty((0, len(sizes)), np.int32)
    draws = hits = 0
    while len(found) < n and draws < max_draws:
        # Size the batch from the legal fraction seen so far (optimistic until a hit).
        wanted = (n - len(found)) * (draws + 1) / (hits + 1) * 1.2
        batch = int(min(max(wanted, 4096), batch_rows, max_draws - draws))
        rows = np.empty((batch, len(sizes)), np.int32)
        for j, size in enumerate(sizes):
            rows[:, j] = rng.integers(0, size, size=batch, dtype=np.int32)
        legal = rows[legal_mask(rows)]
        draws += batch
        hits += len(legal)
        found = first_distinct(np.concatenate([found, legal]))
    return found[:n]
