"""The inputs of a space: parameters with finite domains and constraints as written, and the
check of each parameter (a C name, a domain of plain numbers without repeats, its default
among them), in linear time even for a million-value domain."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from annotune.space.errors import SpaceError
from annotune.space.expressions import RESERVED_NAMES

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT64 = np.iinfo(np.int64)


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


def check_param(param: Param) -> tuple[tuple[int | float, ...], np.ndarray]:
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
