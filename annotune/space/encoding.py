"""The row encoding: a configuration as a row of value indices, one per parameter.

One int32 column per parameter in declaration order: compact, exact for float values, and the
natural input for search strategies. `decode` turns rows into actual values, `to_dicts` into
readable dictionaries.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence

import numpy as np

from annotune.space.errors import SpaceError
from annotune.space.params import Param, check_param


class Encoding:
    """Parameters, checked, and their configurations as index rows (`Space` adds the
    constraints)."""

    def __init__(self, params: Sequence[Param]):
        self.params: tuple[Param, ...] = tuple(params)
        self.names: tuple[str, ...] = tuple(p.name for p in self.params)
        checked = [check_param(param) for param in self.params]
        self._values = [values for values, _ in checked]
        self._columns = [column for _, column in checked]
        self._position: dict[str, int] = {}
        for j, name in enumerate(self.names):
            if name in self._position:
                raise SpaceError(f"duplicate parameter '{name}'", param=name)
            self._position[name] = j
        self.sizes: tuple[int, ...] = tuple(len(values) for values in self._values)
        self.cartesian_size: int = math.prod(self.sizes)

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
