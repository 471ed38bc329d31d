"""Evaluation: an expression over whole columns of configurations at once, or one.

Every node gives a column of values and the rows where C is undefined. Literals stay 0-d arrays
that numpy broadcasts, so a constant costs nothing per row. Post-order over a stack of results:
at most `Expression.width` columns are alive at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from annotune.space.expressions.errors import ExpressionError
from annotune.space.expressions.nodes import (
    INT64_MAX,
    INT64_MIN,
    INTEGER_ONLY,
    Binary,
    Expression,
    Literal,
    Name,
    Node,
    Unary,
    postorder,
)


@dataclass(frozen=True)
class _Column:
    values: np.ndarray  # int64 or float64, (rows,) or 0-d
    undefined: np.ndarray | None  # bool, (rows,) or 0-d; None when every row is defined


def _column(values: np.ndarray, undefined: np.ndarray | None) -> _Column:
    """numpy turns operations on 0-d arrays into scalars; keep everything an array."""
    return _Column(np.asarray(values), None if undefined is None else np.asarray(undefined))


def _either(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    if a is None:
        return b
    if b is None:
        return a
    return a | b


def _where(mask: np.ndarray, a: np.ndarray | None) -> np.ndarray | None:
    return None if a is None else mask & a


def _promote(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if a.dtype == b.dtype:
        return a, b
    return a.astype(np.float64), b.astype(np.float64)


def _as_column(name: str, column: object, rows: int) -> np.ndarray:
    array = np.asarray(column)
    if array.shape != (rows,):
        raise ValueError(f"column '{name}' has shape {array.shape}, expected ({rows},)")
    if array.dtype.kind in "biu":
        return array.astype(np.int64, copy=False)
    if array.dtype.kind == "f":
        return array.astype(np.float64, copy=False)
    raise TypeError(f"column '{name}' has dtype {array.dtype}, expected numbers")


def _full(array: np.ndarray, rows: int) -> np.ndarray:
    return array if array.shape == (rows,) else np.full(rows, array)


def evaluate_with_undefined(
    expr: Expression, columns: Mapping[str, np.ndarray], rows: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The values of `expr` on each row (int64 or float64) and the rows where C is undefined.

    `rows` is the number of rows; by default the length of the columns (all the same length).
    """
    if rows is None:
        if not columns:
            raise ValueError("rows must be given when there are no columns")
        rows = len(next(iter(columns.values())))
    data = {name: _as_column(name, columns[name], rows) for name in expr.names}
    with np.errstate(all="ignore"):
        result = _evaluate(expr.root, data)
    undefined = result.undefined
    values = _full(result.values, rows)
    return values, np.zeros(rows, bool) if undefined is None else _full(undefined, rows)


def evaluate(
    expr: Expression, columns: Mapping[str, np.ndarray], rows: int | None = None
) -> np.ndarray:
    """The values of `expr` on each row, 0 (false: illegal) where C leaves it undefined."""
    values, undefined = evaluate_with_undefined(expr, columns, rows)
    if undefined.any():
        values = np.where(undefined, values.dtype.type(0), values)
    return values


def _evaluate(root: Node, data: Mapping[str, np.ndarray]) -> _Column:
    """Post-order over a stack of results: at most `Expression.width` columns alive at once."""
    results: list[_Column] = []
    for node in postorder(root):
        if isinstance(node, Literal):
            dtype = np.float64 if isinstance(node.value, float) else np.int64
            results.append(_Column(np.asarray(node.value, dtype), None))
        elif isinstance(node, Name):
            results.append(_Column(data[node.name], None))
        elif isinstance(node, Unary):
            operand = results.pop()
            values, undefined = _unary(node, operand.values)
            results.append(_column(values, _either(operand.undefined, undefined)))
        elif isinstance(node, Binary):
            right, left = results.pop(), results.pop()
            results.append(_binary_column(node, left, right))
        else:
            if_false, if_true, condition = results.pop(), results.pop(), results.pop()
            results.append(_conditional(condition, if_true, if_false))
    return results.pop()


def _unary(node: Unary, values: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    if node.op == "+":
        return values, None
    if node.op == "-":
        overflows = values.dtype.kind == "i" and values.size and values.min() == INT64_MIN
        return np.negative(values), (values == INT64_MIN) if overflows else None
    if node.op == "!":
        return (values == 0).astype(np.int64), None
    _require_integers(node.op, node.offset, values)
    return np.invert(values), None


def _require_integers(op: str, offset: int, *operands: np.ndarray) -> None:
    if any(operand.dtype.kind == "f" for operand in operands):
        raise ExpressionError(
            f"invalid operands to '{op}': it needs integers, but a parameter is floating-point",
            offset,
        )


def _binary_column(node: Binary, left: _Column, right: _Column) -> _Column:
    if node.op in ("&&", "||"):
        return _logical(node.op, left, right)
    values, undefined = _binary(node, left.values, right.values)
    return _column(values, _either(_either(left.undefined, right.undefined), undefined))


def _logical(op: str, left: _Column, right: _Column) -> _Column:
    """`&&` and `||`: the right side's undefined rows count only where it is evaluated in C."""
    left_true = left.values != 0
    right_true = right.values != 0
    if op == "&&":
        values = left_true & right_true
        undefined = _either(left.undefined, _where(left_true, right.undefined))
    else:
        values = left_true | right_true
        undefined = _either(left.undefined, _where(~left_true, right.undefined))
    return _column(values.astype(np.int64), undefined)


def _conditional(condition: _Column, if_true: _Column, if_false: _Column) -> _Column:
    chosen = condition.values != 0
    true_values, false_values = _promote(if_true.values, if_false.values)
    undefined = _either(
        condition.undefined,
        _either(_where(chosen, if_true.undefined), _where(~chosen, if_false.undefined)),
    )
    return _column(np.where(chosen, true_values, false_values), undefined)


def _binary(node: Binary, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Apply a binary operator; also returns the rows where this operation is undefined."""
    op = node.op
    if op in INTEGER_ONLY:
        _require_integers(op, node.offset, a, b)
    a, b = _promote(a, b)
    if op in ("/", "%"):
        return _divide(op, a, b)
    if op in ("<<", ">>"):
        undefined = (b < 0) | (b > 63)
        count = np.where(undefined, 0, b)
        shifted = np.left_shift(a, count) if op == "<<" else np.right_shift(a, count)
        return shifted, undefined
    result = _ARITHMETIC[op](a, b)
    if op in ("+", "-", "*") and result.dtype.kind == "i":
        return result, _overflow(op, a, b, result)
    return result, None


def _overflow(op: str, a: np.ndarray, b: np.ndarray, result: np.ndarray) -> np.ndarray | None:
    """The rows where int64 `a op b` overflowed (`result` wrapped around).

    The operands' ranges decide first, from four reductions: with parameter values of everyday
    size nothing can overflow and no row is looked at.
    """
    if a.size == 0 or b.size == 0:
        return None
    low_a, high_a, low_b, high_b = int(a.min()), int(a.max()), int(b.min()), int(b.max())
    if op == "+":
        low, high = low_a + low_b, high_a + high_b
    elif op == "-":
        low, high = low_a - high_b, high_a - low_b
    else:
        corners = [x * y for x in (low_a, high_a) for y in (low_b, high_b)]
        low, high = min(corners), max(corners)
    if low >= INT64_MIN and high <= INT64_MAX:
        return None
    if op == "+":
        return ((a ^ result) & (b ^ result)) < 0  # both operands' signs differ from the sum's
    if op == "-":
        return ((a ^ b) & (a ^ result)) < 0
    # A product that did not overflow divides back exactly; -1 * INT64_MIN wraps to itself
    # and so does its quotient, hence its own test.
    divisor = np.where(a == 0, 1, a)
    return ((a != 0) & (result // divisor != b)) | ((a == -1) & (b == INT64_MIN))


def _divide(op: str, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if a.dtype.kind == "f":
        undefined = b == 0
        return a / np.where(undefined, 1.0, b), undefined
    undefined = (b == 0) | ((a == INT64_MIN) & (b == -1))
    divisor = np.where(undefined, 1, b)
    remainder = np.fmod(a, divisor)  # C's %: the sign of the dividend
    if op == "%":
        return remainder, undefined
    return (a - remainder) // divisor, undefined  # exact, hence truncated toward zero


def _compare(ufunc: np.ufunc):
    return lambda a, b: ufunc(a, b).astype(np.int64)


_ARITHMETIC = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "<": _compare(np.less),
    "<=": _compare(np.less_equal),
    ">": _compare(np.greater),
    ">=": _compare(np.greater_equal),
    "==": _compare(np.equal),
    "!=": _compare(np.not_equal),
    "&": np.bitwise_and,
    "^": np.bitwise_xor,
    "|": np.bitwise_or,
    "min": lambda a, b: np.where(a < b, a, b),
    "max": lambda a, b: np.where(a > b, a, b),
}


def evaluate_one(expr: Expression, values: Mapping[str, int | float]) -> int | float | None:
    """The value of `expr` for one configuration (`values`: each name's), as a Python number;
    None where C leaves it undefined (a division by zero, a signed overflow): a kernel's launch
    and a macro's value are computed one configuration at a time."""
    columns = {name: np.array([values[name]]) for name in expr.names}
    result, undefined = evaluate_with_undefined(expr, columns, rows=1)
    return None if undefined[0] else result[0].item()
