"""One configuration's launch: the grid, block, dynamic shared bytes and arguments a backend
needs, computed from a kernel's declaration, and `LaunchError` where C leaves a value undefined
or a dimension is out of range."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from annotune.annotate.grammar.kernel_items import one_line
from annotune.core.records import Number
from annotune.space.expressions import Expression, evaluate_one


class LaunchError(ValueError):
    """A configuration whose launch cannot be computed (division by zero, a zero block...)."""


@dataclass(frozen=True)
class LaunchArg:
    """An argument of one launch: an array of `count` elements, or a scalar `value`."""

    name: str
    kind: str
    dtype: str
    count: int = 0
    value: Number = 0
    fill: tuple[str, tuple[Number, ...]] | None = None  # the rule and its bounds' values

    @property
    def is_pointer(self) -> bool:
        return self.kind != "scalar"

    @property
    def nbytes(self) -> int:
        return self.count * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class Launch:
    """Everything a backend needs to launch the kernel for one configuration."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    args: tuple[LaunchArg, ...]
    constants: tuple[LaunchConstant, ...] = ()  # to fill before the first launch

    def to_json(self) -> dict:
        return {"grid": list(self.grid), "block": list(self.block), "shared": self.shared}


@dataclass(frozen=True)
class LaunchConstant:
    """A `__constant__` variable to fill for one configuration: its symbol, element type and
    fill rule with its bounds' values (None: the default rule)."""

    name: str
    symbol: str
    dtype: str
    fill: tuple[str, tuple[Number, ...]] | None = None


def value_of(expr: Expression, values: Mapping[str, Number], what: str) -> Number:
    """`expr`'s value for one configuration (`values`: the knobs' and the macros'); LaunchError,
    saying `what` it is, where C leaves it undefined."""
    value = evaluate_one(expr, values)
    if value is None:
        raise LaunchError(
            f"{what} is undefined in C here ({one_line(expr)}): e.g. a division by zero or a "
            "signed overflow"
        )
    return value


def checked_fill(
    rule: str, element: str, ctype: str, count: int, bounds: tuple[Number, ...], what: str
) -> tuple[str, tuple[Number, ...]]:
    """A fill's rule and bounds, once they can fill the array of `count` elements of numpy
    dtype `element` (C type `ctype`): a range that is not empty, and integers the element type
    holds (never silently wrapped)."""
    if rule in ("range", "uniform") and not bounds[0] < bounds[1]:
        raise LaunchError(f"{what} is empty: {rule}({bounds[0]}, {bounds[1]})")
    dtype = np.dtype(element)
    if dtype.kind in "iub":
        low, high = (0, 1) if dtype.kind == "b" else (np.iinfo(dtype).min, np.iinfo(dtype).max)
        if rule == "iota":
            least, most = 0, count - 1
        elif rule == "value":
            least = most = bounds[0]
        else:
            least, most = bounds[0], math.ceil(bounds[1]) - 1
        if not (low <= least and most <= high):
            raise LaunchError(f"{what} does not fit its type {ctype}: {rule}{bounds}")
    return rule, bounds


def non_negative(value: Number, what: str) -> int:
    count = int(value)
    if count < 0:
        raise LaunchError(f"{what} is negative ({count})")
    return count


def dimensions(exprs: tuple[Expression, ...], values: Mapping[str, Number], what: str) -> tuple:
    dims = [int(value_of(e, values, f"{what}(...)")) for e in exprs]
    for dim in dims:
        if not 1 <= dim < 2**32:
            raise LaunchError(f"{what} dimension {dim} is out of range")
    return tuple(dims + [1] * (3 - len(dims)))
