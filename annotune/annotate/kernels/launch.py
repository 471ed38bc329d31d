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
    """A configuration that cannot launch: its launch cannot be computed (a division by zero,
    a zero block), or the device would refuse it (`annotune.run.kernel.launch_limits`). A
    property of the configuration, never of the machine: such a configuration is invalid for
    good. `clause` names the declaration's clause whose value it is ("grid", "block",
    "shared"; "" for another part), so that an error about every configuration can point at
    where that clause is written."""

    def __init__(self, message: str, clause: str = ""):
        super().__init__(message)
        self.clause = clause

    def __reduce__(self) -> tuple:  # the clause too, across processes
        return type(self), (str(self), self.clause)


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


def value_of(expr: Expression, values: Mapping[str, Number], what: str, clause: str = "") -> Number:
    """`expr`'s value for one configuration (`values`: the knobs' and the macros'); LaunchError,
    saying `what` it is (of `clause`), where C leaves it undefined."""
    value = evaluate_one(expr, values)
    if value is None:
        raise LaunchError(
            f"{what} is undefined in C here ({one_line(expr)}): e.g. a division by zero or a "
            "signed overflow",
            clause,
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
    whole = np.dtype(element)
    fields = [whole] if whole.names is None else [f for f, *_ in whole.fields.values()]  # type: ignore[union-attr]
    for field in fields:  # a struct's numbers each; a vector type's lanes each an element
        dtype, numbers = field.base, count * int(np.prod(field.shape))
        if dtype.kind not in "iub":
            continue
        low, high = (0, 1) if dtype.kind == "b" else (np.iinfo(dtype).min, np.iinfo(dtype).max)
        if rule == "iota":
            least, most = 0, numbers - 1
        elif rule == "value":
            least = most = bounds[0]
        else:
            least, most = bounds[0], math.ceil(bounds[1]) - 1
        if not (low <= least and most <= high):
            raise LaunchError(f"{what} does not fit its type {ctype}: {rule}{bounds}")
    return rule, bounds


def non_negative(value: Number, what: str, clause: str = "") -> int:
    """A count (elements, bytes): at least 0, its fraction dropped."""
    count = int(value)
    if count < 0:
        raise LaunchError(f"{what} is negative ({count})", clause)
    return count


def whole(value: Number, what: str, clause: str = "") -> int:
    """`value` as the integer it is; LaunchError for a fraction, which the launch's unsigned
    parameters would silently truncate (a grid of 2.5 blocks is a mistake, not 2 blocks)."""
    if isinstance(value, float) and not value.is_integer():
        raise LaunchError(f"{what} is {value:g}, not an integer", clause)
    return int(value)


def dimensions(exprs: tuple[Expression, ...], values: Mapping[str, Number], what: str) -> tuple:
    """A grid's or block's three dimensions, the missing ones 1: each a whole number from 1 to
    what a dim3 (unsigned int) holds; the device's own limits are `launch_limits`'."""
    dims = []
    for axis, expr in zip("xyz", exprs, strict=False):
        value = value_of(expr, values, f"{what}(...)", what)
        dim = whole(value, f"{what} {axis} ({one_line(expr)})", what)
        if not 1 <= dim < 2**32:
            bound = "must be at least 1" if dim < 1 else "does not fit a dim3 (below 2^32)"
            raise LaunchError(
                f"{what} dimension {dim} is out of range: {what} {axis} ({one_line(expr)}) {bound}",
                what,
            )
        dims.append(dim)
    return tuple(dims + [1] * (3 - len(dims)))
