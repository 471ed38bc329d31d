"""The search space: tunable parameters with finite domains, and C constraints over them.

A configuration is encoded as a row of value *indices*, one int32 column per parameter in
declaration order: compact, exact for float values, and the natural input for search strategies.
`decode` turns rows into actual values, `to_dicts` into readable dictionaries.

Enumeration is vectorized and chunked: a chunk of linear Cartesian indices is split into index
columns by repeated divmod (the first parameter varies slowest), and each constraint is evaluated
only on the rows that all earlier constraints left legal. A constraint that is undefined in C on a
row (division by zero, an out-of-range shift) makes that row illegal; see
annotune.space.expressions.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from annotune.space.expressions import (
    RESERVED_NAMES,
    Expression,
    ExpressionError,
    evaluate,
    parse_expression,
)

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

CHUNK_BYTES = 1 << 28
"""About the memory one chunk of rows takes while the constraints are evaluated on it (index
and value columns, intermediate results). Rows are taken 2^20 at a time unless a space's many
parameters or deeply nested constraints need smaller chunks to stay within it."""

_MAX_CHUNK_ROWS = 1 << 20
_MIN_CHUNK_ROWS = 1 << 6

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT64 = np.iinfo(np.int64)


class SpaceError(ValueError):
    """An invalid parameter or constraint, or a space that cannot do what was asked.

    `param` names the offending parameter; `constraint` is the index of the offending constraint
    and `offset` the character offset in its text, so the front end can point at the source.
    """

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        constraint: int | None = None,
        offset: int | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.param = param
        self.constraint = constraint
        self.offset = offset


class SpaceTooLarge(SpaceError):
    """The space is too large to enumerate; sample it instead."""


@dataclass(frozen=True)
class Param:
    """A tunable parameter: its domain in the user's order and its default (one of the values)."""

    name: str
    values: tuple[int | float, ...]
    default: int | float


@dataclass(frozen=True)
class Constraint:
    """A C expression over parameter names, as written; legal where it is nonzero."""

    text: str


class Space:
    """Parameters and constraints, with enumeration, uniform sampling and the row encoding.

    Validates everything on construction and raises SpaceError; every constraint is parsed and
    type-checked once on the default configuration, so later evaluation cannot fail.
    """

    def __init__(self, params: Sequence[Param], constraints: Sequence[str | Constraint]):
        self.params: tuple[Param, ...] = tuple(params)
        self.names: tuple[str, ...] = tuple(p.name for p in self.params)
        checked = [_check_param(param) for param in self.params]
        self._values = [values for values, _ in checked]
        self._columns = [column for _, column in checked]
        self._position: dict[str, int] = {}
        for j, name in enumerate(self.names):
            if name in self._position:
                raise SpaceError(f"duplicate parameter '{name}'", param=name)
            self._position[name] = j
        self.sizes: tuple[int, ...] = tuple(len(values) for values in self._values)
        self.cartesian_size: int = math.prod(self.sizes)
        self.constraints: tuple[Constraint, ...] = tuple(
            c if isinstance(c, Constraint) else Constraint(c) for c in constraints
        )
        self.expressions: tuple[Expression, ...] = tuple(
            self._parse(i, c.text) for i, c in enumerate(self.constraints)
        )
        self._chunk_rows = _chunk_rows(len(self.names), self.expressions)

    def _parse(self, index: int, text: str) -> Expression:
        try:
            expr = parse_expression(text, self._position)
            # Types depend only on the parameters' dtypes, so one row finds every type error.
            self._holds(expr, [np.array([i]) for i in self.default_row()], None, 1)
        except ExpressionError as error:
            raise SpaceError(error.message, constraint=index, offset=error.offset) from error
        return expr

    # -- encoding ----------------------------------------------------------------------------

    def default_row(self) -> np.ndarray:
        """The default configuration as a (d,) index row."""
        return np.array(
            [values.index(p.default) for p, values in zip(self.params, self._values, strict=True)],
            np.int32,
        )

    def index_row(self, params: Mapping[str, int | float]) -> np.ndarray | None:
        """The (d,) index row of a configuration that names every parameter; None when one is
        missing or a value is not in its domain."""
        try:
            indices = [
                positions[params[name]]
                for name, positions in zip(self.names, self._positions, strict=True)
            ]
        except (KeyError, TypeError):  # TypeError: an unhashable value, in no domain
            return None
        return np.array(indices, np.int32)

    @functools.cached_property
    def _positions(self) -> list[dict[int | float, int]]:
        """Each domain's {value: index}: configurations are looked up one by one (resuming a
        study), and a linear search per value would be quadratic in a million-value domain.
        Built on first use, which `scan` never makes. 1 and 1.0 find the same entry, as ==."""
        return [{value: i for i, value in enumerate(values)} for values in self._values]

    def decode(self, index_rows: np.ndarray) -> np.ndarray:
        """The actual values of (k, d) index rows, as a float64 (k, d) matrix."""
        rows = self._check_rows(index_rows)
        decoded = np.empty(rows.shape, np.float64)
        for j, column in enumerate(self._columns):
            decoded[:, j] = column[rows[:, j]]
        return decoded

    def to_dicts(self, index_rows: np.ndarray) -> list[dict[str, int | float]]:
        """One {name: value} per row, with Python ints for integer values."""
        rows = self._check_rows(index_rows)
        return [
            {name: values[i] for name, values, i in zip(self.names, self._values, row, strict=True)}
            for row in rows.tolist()
        ]

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

    def _check_rows(self, index_rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(index_rows)
        if rows.ndim != 2 or rows.shape[1] != len(self.names) or rows.dtype.kind not in "iu":
            raise ValueError(
                f"expected a (k, {len(self.names)}) integer index matrix, "
                f"got shape {rows.shape} and dtype {rows.dtype}"
            )
        if len(rows) and ((rows < 0).any() or (rows >= np.array(self.sizes)).any()):
            raise ValueError("index out of range for a parameter's domain")
        return rows

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

    def _chunks(self, chunk_size: int) -> Iterator[list[np.ndarray]]:
        """Index columns of consecutive Cartesian rows, first parameter slowest."""
        if chunk_size < 1:
            raise ValueError("chunk_size must be positive")
        for start in range(0, self.cartesian_size, chunk_size):
            linear = np.arange(start, min(start + chunk_size, self.cartesian_size), dtype=np.int64)
            columns: list[np.ndarray] = [linear] * len(self.sizes)
            for j in reversed(range(len(self.sizes))):
                linear, columns[j] = np.divmod(linear, self.sizes[j])
            yield columns

    def iter_legal(self, chunk_size: int | None = None) -> Iterator[np.ndarray]:
        """Legal rows as int32 (k, d) index chunks, in lexicographic order; lazy, so no limit.

        `chunk_size` Cartesian rows are looked at a time; by default as many as fit in
        CHUNK_BYTES, at most 2^20.
        """
        for columns in self._chunks(self._chunk_rows if chunk_size is None else chunk_size):
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
            if len(self._draw_legal(1, np.random.default_rng(0), SAMPLE_ENUMERATION_LIMIT)):
                return None
            raise SpaceTooLarge(
                f"no legal configuration in {SAMPLE_ENUMERATION_LIMIT:,} random draws, and the "
                f"space has {self.cartesian_size:,}, too many to enumerate"
            )
        deepest = 0
        for columns in self._chunks(self._chunk_rows):
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
            found = self._draw_legal(n, rng, MAX_SAMPLE_DRAWS)
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

    def _draw_legal(self, n: int, rng: np.random.Generator, max_draws: int) -> np.ndarray:
        """Up to `n` distinct legal rows, in the order first drawn, from at most `max_draws`."""
        found = np.empty((0, len(self.names)), np.int32)
        draws = hits = 0
        while len(found) < n and draws < max_draws:
            # Size the batch from the legal fraction seen so far (optimistic until a hit).
            wanted = (n - len(found)) * (draws + 1) / (hits + 1) * 1.2
            batch = int(min(max(wanted, 4096), self._chunk_rows, max_draws - draws))
            rows = np.empty((batch, len(self.names)), np.int32)
            for j, size in enumerate(self.sizes):
                rows[:, j] = rng.integers(0, size, size=batch, dtype=np.int32)
            legal = rows[self._legal_mask(rows)]
            draws += batch
            hits += len(legal)
            found = _first_distinct(np.concatenate([found, legal]))
        return found[:n]


def _first_distinct(rows: np.ndarray) -> np.ndarray:
    """The distinct rows of `rows`, each at its first occurrence, in order."""
    keys = np.ascontiguousarray(rows).view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1])))
    _, first = np.unique(keys[:, 0], return_index=True)
    return rows[np.sort(first)]


def _check_param(param: Param) -> tuple[tuple[int | float, ...], np.ndarray]:
    """Validate one parameter; its values as plain Python ints and floats, and as an array
    (int64 when every value is an integer, else float64)."""
    name = param.name
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise SpaceError(f"parameter name {name!r} is not a C identifier", param=str(name))
    if name in RESERVED_NAMES:
        raise SpaceError(f"parameter name '{name}' is reserved in constraints", param=name)
    if len(param.values) == 0:
        raise SpaceError(f"parameter '{name}' has an empty domain", param=name)
    column = _integer_column(param.values)
    values: tuple[int | float, ...] | None = None
    if column is not None:
        values = tuple(column.tolist())
        if len(set(values)) != len(values):
            values = None  # a duplicate: the check below says which
    if values is None:
        values = _check_values(param)
        column = _value_column(values)
    if _plain_number(param.default) not in values:
        raise SpaceError(
            f"default {param.default!r} of parameter '{name}' is not in its domain", param=name
        )
    return values, column


def _integer_column(values: Sequence[object]) -> np.ndarray | None:
    """The domain as int64 when numpy reads it as integers (a range(), a million values, in
    milliseconds); None for anything else, which is checked value by value."""
    try:
        array = np.asarray(values)
    except (ValueError, TypeError, OverflowError):  # ragged, or numbers numpy cannot hold
        return None
    if array.ndim != 1 or array.dtype.kind not in "bi":
        return None
    return array.astype(np.int64)


def _check_values(param: Param) -> tuple[int | float, ...]:
    """The values one by one: the first one that is no plain number, or repeats, is the error."""
    values: list[int | float] = []
    seen: set[int | float] = set()
    for value in param.values:
        number = _plain_number(value)
        if number is None:
            raise SpaceError(
                f"parameter '{param.name}' has the value {value!r}; values must be integers "
                "that fit in 64 bits or finite floats",
                param=param.name,
            )
        if number in seen:
            raise SpaceError(
                f"parameter '{param.name}' has the value {value!r} twice", param=param.name
            )
        seen.add(number)
        values.append(number)
    return tuple(values)


def _plain_number(value: object) -> int | float | None:
    """A finite int (within int64) or float as a Python number; None for anything else."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and _INT64.min <= value <= _INT64.max:
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    return None


def _value_column(values: tuple[int | float, ...]) -> np.ndarray:
    """The domain as an array: int64 when every value is an integer, else float64."""
    if all(isinstance(v, int) for v in values):
        return np.array(values, np.int64)
    return np.array(values, np.float64)


def _chunk_rows(params: int, expressions: Sequence[Expression]) -> int:
    """How many rows a chunk holds within CHUNK_BYTES: per row, each parameter's int64 index,
    int32 output and int64 value column, and each intermediate result of the widest
    constraint (int64 values, a bool mask, the operation's temporary)."""
    width = max((expr.width for expr in expressions), default=0)
    per_row = 20 * params + 17 * (width + 1)
    return max(_MIN_CHUNK_ROWS, min(_MAX_CHUNK_ROWS, CHUNK_BYTES // per_row))
