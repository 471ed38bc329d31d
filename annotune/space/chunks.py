"""Chunks of Cartesian rows: how many a chunk holds within a memory budget, and the chunks
themselves, as index columns split from linear indices by repeated divmod (the first parameter
varies slowest)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np

from annotune.space.expressions import Expression

CHUNK_BYTES = 1 << 28
"""About the memory one chunk of rows takes while the constraints are evaluated on it (index
and value columns, intermediate results). Rows are taken 2^20 at a time unless a space's many
parameters or deeply nested constraints need smaller chunks to stay within it."""

_MAX_CHUNK_ROWS = 1 << 20
_MIN_CHUNK_ROWS = 1 << 6


def chunk_rows(params: int, expressions: Sequence[Expression]) -> int:
    """How many rows a chunk holds within CHUNK_BYTES: per row, each parameter's int64 index,
    int32 output and int64 value column, and each intermediate result of the widest
    constraint (int64 values, a bool mask, the operation's temporary)."""
    width = max((expr.width for expr in expressions), default=0)
    per_row = 20 * params + 17 * (width + 1)
    return max(_MIN_CHUNK_ROWS, min(_MAX_CHUNK_ROWS, CHUNK_BYTES // per_row))


def cartesian_chunks(sizes: tuple[int, ...], chunk_size: int) -> Iterator[list[np.ndarray]]:
    """Index columns of consecutive Cartesian rows of domains of `sizes`, first parameter
    slowest, `chunk_size` rows at a time."""
    if chunk_size < 1:
        raise ValueError("chunk_size must be positive")
    cartesian_size = math.prod(sizes)
    for start in range(0, cartesian_size, chunk_size):
        linear = np.arange(start, min(start + chunk_size, cartesian_size), dtype=np.int64)
        columns: list[np.ndarray] = [linear] * len(sizes)
        for j in reversed(range(len(sizes))):
            linear, columns[j] = np.divmod(linear, sizes[j])
        yield columns
