"""The search space: tunable parameters with finite domains, and C constraints over them.

A configuration is encoded as a row of value *indices*, one int32 column per parameter in
declaration order: compact, exact for float values, and the natural input for search strategies.
`decode` turns rows into actual values, `to_dicts` into readable dictionaries.

Enumeration is vectorized and chunked: a chunk of linear Cartesian indices is split into index
columns by repeated divmod (the first parameter varies slowest), and each constraint is evaluated
only on the rows that all earlier constraints left legal. A constraint that is undefined in C on a
row (division by zero, an out-of-range shift) makes that row illegal; see
annotune.space.expressions.

The rooms: the parameters and their checks (`params`), the row encoding (`encoding`), chunks of
Cartesian rows sized to a memory budget (`chunks`), random legal rows (`sampling`), the errors
(`errors`), and the constraints' parser and evaluator (`expressions`); `Space` ties them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from annotune.space.chunks import CHUNK_BYTES, cartesian_chunks, chunk_rows
from annotune.space.encoding import Encoding
from annotune.space.errors import SpaceError, SpaceTooLarge
from annotune.space.expressions import Expression, ExpressionError, evaluate, parse_expression
from annotune.space.params import Constraint, Param
from annotune.space.sampling import draw_legal

__all__ = [
    "CHUNK_BYTES",
    "ENUMERATION_LIMIT",
    "MAX_CANDIDATES",
    "MAX_SAMPLE_DRAWS",
    "SAMPLE_ENUMERATION_LIMIT",
    "Constraint",
    "Param",
    "Space",
    "SpaceError",
    "SpaceTooLarge",
]

ENUMERATION_LIMIT = 10**8
"""Largest Cartesian size that `legal_indices` and `count_legal` enumerate: about 10 s at
10^7 rows per second; `legal_indices` then holds 4 * d bytes per legal row."""

SAMPLE_ENUMERATION_LIMIT = 1 << 20
"""`sample` enumerates spaces up to this size and draws random rows from larger ones."""

MAX_SAMPLE_DRAWS = 1 << 25
"""Random Cartesian rows that `sample` draws at most before giving up on a sparse space."""

MAX_CANDIDATES = 1_000_000
"""Spaces with more legal configurations are searched over a uniform sample of this many."""


class Space(Encoding):
    """Parameters and constraints, with enumeration, uniform sampling and the row encoding.

    Validates everything on construction and raises SpaceError; every constraint is parsed and
    type-checked once on the default configuration, so later evaluation cannot fail.
    """

    def __init__(self, params: Sequence[Param], constraints: Sequence[str | Constraint]):
        super().__init__(params)
        self.constraints: tuple[Constraint, ...] = tuple(
            c if isinstance(c, Constraint) else Constraint(c) for c in constraints
        )
        self.expressions: tuple[Expression, ...] = tuple(
            self._parse(i, c.text) for i, c in enumerate(self.constraints)
        )
        self._chunk_rows = chunk_rows(len(self.names), self.expressions)

    def _parse(self, index: int, text: str) -> Expression:
        try:
            expr = parse_expression(text, self._position)
            # Types depend only on the parameters' dtypes, so one row finds every type error.
            self._holds(expr, [np.array([i]) for i in self.default_row()], None, 1)
        except ExpressionError as error:
            raise SpaceError(error.message, constraint=index, offset=error.offset) from error
        return expr

    def is_legal(self, index_rows: np.ndarray) -> np.ndarray:
        """A bool mask: which of the (k, d) index rows satisfy every constraint."""
        return self._legal_mask(self._check_rows(index_rows))

    def _legal_mask(self, rows: np.ndarray) -> np.ndarray:
        """Chunk by chunk, so that checking many rows stays within CHUNK_BYTES."""
        mask = np.zeros(len(rows), bool)
        for start in range(0, len(rows), self._chunk_rows):
            part = rows[start : start + self._chunk_rows]
            alive, _ = self._filter([part[:, j] for j in range(len(self.names))], len(part))
            mask[start + alive] = True
        return mask

    # -- constraints -------------------------------------------------------------------------

    def _holds(
        self,
        expr: Expression,
        index_columns: list[np.ndarray],
        select: np.ndarray | None,
        rows: int,
    ) -> np.ndarray:
        """Where `expr` is true on the `rows` selected rows (None: all of them)."""
        columns = {}
        for name in expr.names:
            j = self._position[name]
            indices = index_columns[j] if select is None else index_columns[j][select]
            columns[name] = self._columns[j][indices]
        return evaluate(expr, columns, rows) != 0

    def _filter(self, index_columns: list[np.ndarray], rows: int) -> tuple[np.ndarray, int]:
        """The positions of the legal rows, and the index of the constraint that left none
        (the number of constraints if some rows are legal).

        Each constraint only sees the rows that the earlier ones left legal.
        """
        alive = np.arange(rows)
        for index, expr in enumerate(self.expressions):
            select = None if len(alive) == rows else alive
            alive = alive[self._holds(expr, index_columns, select, len(alive))]
            if len(alive) == 0:
                return alive, index
        return alive, len(self.expressions)

    # -- enumeration -------------------------------------------------------------------------

    def iter_legal(self, chunk_size: int | None = None) -> Iterator[np.ndarray]:
        """Legal rows as int32 (k, d) index chunks, in lexicographic order; lazy, so no limit.

        `chunk_size` Cartesian rows are looked at a time; by default as many as fit in
        CHUNK_BYTES, at most 2^20.
        """
        for columns in cartesian_chunks(
            self.sizes, self._chunk_rows if chunk_size is None else chunk_size
        ):
            rows = len(columns[0]) if columns else 1
            alive, _ = self._filter(columns, rows)
            if len(alive):
                chunk = np.empty((len(alive), len(columns)), np.int32)
                for j, column in enumerate(columns):
                    chunk[:, j] = column[alive]
                yield chunk

    def _check_enumerable(self) -> None:
        if self.cartesian_size > ENUMERATION_LIMIT:
            raise SpaceTooLarge(
                f"the space has {self.cartesian_size:,} configurations, too large to count: "
                f"annotune enumerates at most {ENUMERATION_LIMIT:,}; sample it instead"
            )

    def legal_indices(self) -> np.ndarray:
        """All legal rows as an int32 (n, d) index matrix; SpaceTooLarge beyond the limit."""
        self._check_enumerable()
        chunks = list(self.iter_legal())
        if not chunks:
            return np.empty((0, len(self.names)), np.int32)
        return np.concatenate(chunks)

    def count_legal(self) -> int:
        """The number of legal configurations; SpaceTooLarge beyond the limit."""
        self._check_enumerable()
        return sum(len(chunk) for chunk in self.iter_legal())

    def first_emptying_constraint(self) -> int | None:
        """The index of the first constraint after which (with all before it) nothing is legal.

        None if some configuration is legal. Stops at the first legal row found; a space larger
        than the enumeration limit is probed with random rows and raises SpaceTooLarge if none
        is legal, since it cannot be decided.
        """
        if self.cartesian_size > ENUMERATION_LIMIT:
            if len(self._draw(1, np.random.default_rng(0), SAMPLE_ENUMERATION_LIMIT)):
                return None
            raise SpaceTooLarge(
                f"no legal configuration in {SAMPLE_ENUMERATION_LIMIT:,} random draws, and the "
                f"space has {self.cartesian_size:,}, too many to enumerate"
            )
        deepest = 0
        for columns in cartesian_chunks(self.sizes, self._chunk_rows):
            alive, depth = self._filter(columns, len(columns[0]) if columns else 1)
            if len(alive):
                return None
            deepest = max(deepest, depth)
        return deepest

    def search_rows(
        self, rng: np.random.Generator, limit: int = MAX_CANDIDATES
    ) -> tuple[np.ndarray, int | None]:
        """The rows a search sees, all legal ones or a uniform sample of `limit` of them, and
        the legal count (None when the space is too large to count)."""
        try:
            legal = self.legal_indices()
        except SpaceTooLarge:
            return self.sample(limit, rng), None
        if len(legal) > limit:
            chosen = np.sort(rng.choice(len(legal), limit, replace=False))
            return legal[chosen], len(legal)
        return legal, len(legal)

    # -- sampling ----------------------------------------------------------------------------

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """`n` distinct legal rows, a uniformly random subset of the legal set, as (n, d) indices.

        Small spaces are enumerated. Larger ones are sampled by rejection: independent uniform
        coordinates are uniform over the Cartesian product, and the first `n` distinct legal rows
        drawn are a uniform subset of the legal ones. Raises SpaceError when the space has fewer
        than `n` legal rows, or when `MAX_SAMPLE_DRAWS` draws found too few.
        """
        if n < 0:
            raise ValueError("n must be non-negative")
        if self.cartesian_size > SAMPLE_ENUMERATION_LIMIT:
            found = self._draw(n, rng, MAX_SAMPLE_DRAWS)
            if len(found) == n:
                return found
            if self.cartesian_size > ENUMERATION_LIMIT:
                raise SpaceError(
                    f"found only {len(found)} of {n} distinct legal configurations in "
                    f"{MAX_SAMPLE_DRAWS:,} random draws from {self.cartesian_size:,}: the "
                    "constraints leave too small a fraction of the space to sample"
                )
        legal = self.legal_indices()
        if n > len(legal):
            raise SpaceError(
                f"cannot sample {n} distinct configurations: only {len(legal)} are legal"
            )
        return legal[rng.choice(len(legal), size=n, replace=False)]

    def _draw(self, n: int, rng: np.random.Generator, max_draws: int) -> np.ndarray:
        """Up to `n` distinct legal rows, in the order first drawn, from at most `max_draws`."""
        return draw_legal(self.sizes, self._legal_mask, self._chunk_rows, n, rng, max_draws)
