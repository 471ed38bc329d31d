"""A safe parser and vectorized evaluator for C constraint expressions over parameter names.

Constraints come from user files, so they are read by our own recursive-descent parser into a
tree of small frozen dataclasses and evaluated with numpy. Nothing is ever handed to Python's
eval, exec, compile or ast: an expression can only name parameters, write numbers, apply C
operators and call `min`/`max`.

Semantics follow C, evaluated over whole columns of configurations at once:

- Integer operands are 64-bit: `/` truncates toward zero and `%` takes the sign of the dividend
  (a == (a / b) * b + a % b). Overflow wraps around (two's complement); C's `int` is usually
  32-bit, but parameter values are small.
- If either operand is floating-point, the operation is done in float64 (the usual arithmetic
  conversions). `%`, shifts, `~`, `&`, `^` and `|` need integers.
- Comparisons and logical operators give 0 or 1; a value is true when it is nonzero.
- `min(a, b)` means `a < b ? a : b`, `max(a, b)` means `a > b ? a : b`.
- Division or remainder by zero (also INT64_MIN / -1) and shifts by a negative count or by 64 or
  more are undefined in C. They are tracked per row; `&&`, `||` and `?:` short-circuit per row, so
  `b != 0 && a / b > 2` is simply false where b == 0. A constraint that is undefined on a row
  reads as 0 there, i.e. that configuration is illegal.
- Number suffixes (`u`, `l`, `ul`, `ll`, `f`, ...) are accepted and ignored: all integers are
  signed 64-bit, all floating literals double.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "Binary",
    "Conditional",
    "Expression",
    "ExpressionError",
    "Literal",
    "MAX_DEPTH",
    "Name",
    "Node",
    "RESERVED_NAMES",
    "Unary",
    "evaluate",
    "evaluate_with_undefined",
    "parse_expression",
]

MAX_DEPTH = 200
"""Deepest expression tree accepted; real constraints are a handful of levels deep."""

RESERVED_NAMES = frozenset({"min", "max", "true", "false"})
"""Words that constraints use themselves, so no parameter can be called that."""


class ExpressionError(ValueError):
    """A constraint that cannot be parsed or evaluated.

    `offset` is the 0-based character offset of the offending token in the expression text, so
    the caller can point at FILE:LINE:COL.
    """

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.message = message
        self.offset = offset


# ---------------------------------------------------------------------------------------------
# The tree. Offsets are kept for error messages but ignored when comparing trees.


@dataclass(frozen=True)
class Literal:
    value: int | float
    offset: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Name:
    name: str
    offset: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Unary:
    op: str  # one of + - ! ~
    operand: Node
    offset: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Binary:
    """A binary operator; `min` and `max` calls are binary nodes with op "min"/"max"."""

    op: str
    left: Node
    right: Node
    offset: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Conditional:
    condition: Node
    if_true: Node
    if_false: Node
    offset: int = field(default=0, compare=False)


Node = Literal | Name | Unary | Binary | Conditional


@dataclass(frozen=True)
class Expression:
    """A parsed constraint: its text, its tree, and the parameters it uses (in order of use)."""

    text: str
    root: Node
    names: tuple[str, ...]


# ---------------------------------------------------------------------------------------------
# Tokens.


@dataclass(frozen=True)
class _Token:
    kind: str  # "number", "name", "op" or "end"
    text: str
    offset: int
    value: int | float = 0


_DIGITS = frozenset("0123456789")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FLOAT = re.compile(r"(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")
_HEX = re.compile(r"0[xX][0-9A-Fa-f]+")
_DECIMAL = re.compile(r"[0-9]+")
_SUFFIX = re.compile(r"[A-Za-z0-9_.]*")
_INT_SUFFIXES = frozenset({"", "u", "l", "ul", "lu", "ll", "ull", "llu"})
_FLOAT_SUFFIXES = frozenset({"", "f", "l"})
_INT64_MAX = 2**63 - 1

# Longest first, so that e.g. "<<=" is not read as "<<" then "=".
_OPERATORS = (
    "<<=", ">>=",
    "->", "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "^=", "|=",
    "<<", ">>", "<=", ">=", "==", "!=", "&&", "||",
    "+", "-", "*", "/", "%", "<", ">", "!", "~", "&", "^", "|", "?", ":", "(", ")", ",",
    "=", ".", "[",
)  # fmt: skip
_FORBIDDEN = {
    "->": "member access is not allowed",
    ".": "member access is not allowed",
    "[": "subscripts are not allowed",
    "++": "increment and decrement are not allowed",
    "--": "increment and decrement are not allowed",
}
_ASSIGNMENTS = frozenset({"=", "<<=", ">>=", "+=", "-=", "*=", "/=", "%=", "&=", "^=", "|="})


def _syntax_error(detail: str, offset: int) -> ExpressionError:
    return ExpressionError(f"syntax error: {detail}", offset)


def _tokenize(text: str) -> Iterator[_Token]:
    """Tokens on demand, so errors come left to right (`f("x")` is a call before a string)."""
    pos = 0
    while pos < len(text):
        ch = text[pos]
        if ch.isspace():
            pos += 1
        elif ch in _DIGITS or (ch == "." and text[pos + 1 : pos + 2] in _DIGITS):
            token = _number(text, pos)
            yield token
            pos += len(token.text)
        elif match := _NAME.match(text, pos):
            yield _Token("name", match.group(), pos)
            pos = match.end()
        elif ch in "\"'":
            raise _syntax_error("strings are not allowed", pos)
        else:
            op = next((op for op in _OPERATORS if text.startswith(op, pos)), None)
            if op is None:
                raise _syntax_error(f"unexpected character {ch!r}", pos)
            if op in _ASSIGNMENTS:
                raise _syntax_error("assignment is not allowed", pos)
            if op in _FORBIDDEN:
                raise _syntax_error(_FORBIDDEN[op], pos)
            yield _Token("op", op, pos)
            pos += len(op)
    yield _Token("end", "", len(text))


def _number(text: str, pos: int) -> _Token:
    """Read a C integer or floating constant at `pos`; its suffix is checked, then dropped."""
    value: int | float
    if match := _FLOAT.match(text, pos):
        digits, suffixes, value = match.group(), _FLOAT_SUFFIXES, float(match.group())
    elif match := _HEX.match(text, pos):
        digits, suffixes, value = match.group(), _INT_SUFFIXES, int(match.group(), 16)
    else:
        digits = _DECIMAL.match(text, pos).group()  # type: ignore[union-attr]  # pos is a digit
        suffixes = _INT_SUFFIXES
        if len(digits) > 1 and digits.startswith("0"):
            if not set(digits) <= set("01234567"):
                raise _syntax_error(f"invalid digit in octal constant '{digits}'", pos)
            value = int(digits, 8)
        else:
            value = int(digits)
    end = pos + len(digits)
    suffix = _SUFFIX.match(text, end).group()  # type: ignore[union-attr]  # matches ""
    if suffix.lower() not in suffixes:
        raise _syntax_error(f"invalid suffix '{suffix}' on constant '{digits}'", end)
    if isinstance(value, int) and value > _INT64_MAX:
        raise _syntax_error(f"integer constant '{digits}' does not fit in 64 bits", pos)
    return _Token("number", digits + suffix, pos, value)


# ---------------------------------------------------------------------------------------------
# Parser: precedence climbing for binary operators, recursion for unary and ?:.

_PRECEDENCE = {
    "||": 1, "&&": 2, "|": 3, "^": 4, "&": 5,
    "==": 6, "!=": 6, "<": 7, "<=": 7, ">": 7, ">=": 7,
    "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10,
}  # fmt: skip
_INTEGER_ONLY = frozenset({"%", "<<", ">>", "&", "^", "|", "~"})


class _Parser:
    def __init__(self, tokens: Iterator[_Token]):
        self._tokens = tokens
        self._current = next(tokens)

    def parse(self) -> Node:
        if self._peek().kind == "end":
            raise _syntax_error("empty expression", 0)
        node = self._conditional()
        if self._peek().kind != "end":
            raise self._unexpected(self._peek())
        return node

    def _peek(self) -> _Token:
        return self._current

    def _advance(self) -> _Token:
        token = self._current
        if token.kind != "end":
            self._current = next(self._tokens)
        return token

    def _is_op(self, text: str) -> bool:
        token = self._peek()
        return token.kind == "op" and token.text == text

    def _expect(self, text: str) -> None:
        if not self._is_op(text):
            raise self._unexpected(self._peek(), f"'{text}'")
        self._advance()

    @staticmethod
    def _unexpected(token: _Token, expected: str = "") -> ExpressionError:
        if expected:
            found = "the end" if token.kind == "end" else f"'{token.text}'"
            return _syntax_error(f"expected {expected} but found {found}", token.offset)
        if token.kind == "end":
            return _syntax_error("unexpected end of expression", token.offset)
        if token.text == ",":
            return _syntax_error("the comma operator is not allowed", token.offset)
        return _syntax_error(f"unexpected '{token.text}'", token.offset)

    def _conditional(self) -> Node:
        condition = self._binary(1)
        if not self._is_op("?"):
            return condition
        question = self._advance()
        if_true = self._conditional()
        self._expect(":")
        if_false = self._conditional()
        return Conditional(condition, if_true, if_false, question.offset)

    def _binary(self, min_precedence: int) -> Node:
        left = self._unary()
        while True:
            token = self._peek()
            precedence = _PRECEDENCE.get(token.text, 0) if token.kind == "op" else 0
            if precedence < min_precedence:
                return left
            self._advance()
            right = self._binary(precedence + 1)  # all binary operators are left-associative
            left = Binary(token.text, left, right, token.offset)

    def _unary(self) -> Node:
        token = self._peek()
        if token.kind == "op" and token.text in ("+", "-", "!", "~"):
            self._advance()
            return Unary(token.text, self._unary(), token.offset)
        return self._primary()

    def _primary(self) -> Node:
        token = self._advance()
        if token.kind == "number":
            return Literal(token.value, token.offset)
        if token.kind == "name":
            if self._is_op("("):
                if token.text not in ("min", "max"):
                    raise _syntax_error("calls are not allowed (only min and max)", token.offset)
                return self._call(token)
            if token.text in ("min", "max"):
                raise _syntax_error(f"expected '(' after '{token.text}'", self._peek().offset)
            if token.text in ("true", "false"):
                return Literal(int(token.text == "true"), token.offset)
            return Name(token.text, token.offset)
        if token.kind == "op" and token.text == "(":
            inner = self._conditional()
            self._expect(")")
            return inner
        raise self._unexpected(token)

    def _call(self, function: _Token) -> Node:
        self._expect("(")
        args = [self._conditional()]
        while self._is_op(","):
            self._advance()
            args.append(self._conditional())
        if not self._is_op(")"):
            raise self._unexpected(self._peek(), "',' or ')'")
        if len(args) != 2:
            raise _syntax_error(f"{function.text} takes exactly two arguments", function.offset)
        self._advance()
        return Binary(function.text, args[0], args[1], function.offset)


def _is_float(node: Node) -> bool:
    """Whether `node` is floating-point whatever the parameters are; rejects float `%` and co."""
    if isinstance(node, Literal):
        return isinstance(node.value, float)
    if isinstance(node, Name):
        return False
    if isinstance(node, Unary):
        operand = _is_float(node.operand)
        if operand and node.op == "~":
            raise _float_operand_error(node.op, node.offset)
        return operand and node.op in ("+", "-")
    if isinstance(node, Binary):
        left, right = _is_float(node.left), _is_float(node.right)
        if (left or right) and node.op in _INTEGER_ONLY:
            raise _float_operand_error(node.op, node.offset)
        return (left or right) and node.op in ("+", "-", "*", "/", "min", "max")
    _is_float(node.condition)  # only for its errors: the type is the branches'
    if_true, if_false = _is_float(node.if_true), _is_float(node.if_false)
    return if_true or if_false


def _float_operand_error(op: str, offset: int) -> ExpressionError:
    return ExpressionError(
        f"invalid operands to '{op}': it needs integers, not floating-point", offset
    )


def _children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Unary):
        return (node.operand,)
    if isinstance(node, Binary):
        return (node.left, node.right)
    if isinstance(node, Conditional):
        return (node.condition, node.if_true, node.if_false)
    return ()


def _check_depth(root: Node) -> None:
    """Reject trees deep enough to exhaust Python's stack when evaluated (`1+1+1+...`)."""
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _syntax_error(f"expression is nested more than {MAX_DEPTH} deep", node.offset)
        stack.extend((child, depth + 1) for child in _children(node))


def _names(root: Node) -> list[Name]:
    """The Name nodes in textual order."""
    names, stack = [], [root]
    while stack:
        node = stack.pop()
        if isinstance(node, Name):
            names.append(node)
        stack.extend(reversed(_children(node)))
    return names


def parse_expression(text: str, names: Collection[str]) -> Expression:
    """Parse the C expression `text`, whose identifiers must all be among `names`.

    Raises ExpressionError with the offset of the offending token. Syntax is checked before
    names, so `os.system(1)` is a syntax error rather than an unknown parameter.
    """
    try:
        root = _Parser(_tokenize(text)).parse()
    except RecursionError:
        raise _syntax_error("expression is nested too deeply", 0) from None
    _check_depth(root)
    _is_float(root)
    used = _names(root)
    for name in used:
        if name.name not in names:
            raise ExpressionError(f"unknown parameter '{name.name}' in constraint", name.offset)
    return Expression(text, root, tuple(dict.fromkeys(name.name for name in used)))


# ---------------------------------------------------------------------------------------------
# Evaluation: every node gives a column of values and the rows where C is undefined.

_INT64_MIN = np.iinfo(np.int64).min


@dataclass(frozen=True)
class _Column:
    values: np.ndarray  # int64 or float64
    undefined: np.ndarray | None  # bool; None when every row is defined


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
        result = _evaluate(expr.root, data, rows)
    undefined = result.undefined
    return result.values, np.zeros(rows, bool) if undefined is None else undefined


def evaluate(
    expr: Expression, columns: Mapping[str, np.ndarray], rows: int | None = None
) -> np.ndarray:
    """The values of `expr` on each row, 0 (false: illegal) where C leaves it undefined."""
    values, undefined = evaluate_with_undefined(expr, columns, rows)
    if undefined.any():
        values = np.where(undefined, values.dtype.type(0), values)
    return values


def _evaluate(node: Node, data: Mapping[str, np.ndarray], rows: int) -> _Column:
    if isinstance(node, Literal):
        dtype = np.float64 if isinstance(node.value, float) else np.int64
        return _Column(np.full(rows, node.value, dtype), None)
    if isinstance(node, Name):
        return _Column(data[node.name], None)
    if isinstance(node, Unary):
        operand = _evaluate(node.operand, data, rows)
        return _Column(_unary(node, operand.values), operand.undefined)
    if isinstance(node, Conditional):
        return _conditional(node, data, rows)
    left = _evaluate(node.left, data, rows)
    right = _evaluate(node.right, data, rows)
    if node.op in ("&&", "||"):
        return _logical(node.op, left, right)
    values, undefined = _binary(node, left.values, right.values)
    return _Column(values, _either(_either(left.undefined, right.undefined), undefined))


def _unary(node: Unary, values: np.ndarray) -> np.ndarray:
    if node.op == "+":
        return values
    if node.op == "-":
        return np.negative(values)
    if node.op == "!":
        return (values == 0).astype(np.int64)
    _require_integers(node.op, node.offset, values)
    return np.invert(values)


def _require_integers(op: str, offset: int, *operands: np.ndarray) -> None:
    if any(operand.dtype.kind == "f" for operand in operands):
        raise ExpressionError(
            f"invalid operands to '{op}': it needs integers, but a parameter is floating-point",
            offset,
        )


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
    return _Column(values.astype(np.int64), undefined)


def _conditional(node: Conditional, data: Mapping[str, np.ndarray], rows: int) -> _Column:
    condition = _evaluate(node.condition, data, rows)
    if_true = _evaluate(node.if_true, data, rows)
    if_false = _evaluate(node.if_false, data, rows)
    chosen = condition.values != 0
    true_values, false_values = _promote(if_true.values, if_false.values)
    undefined = _either(
        condition.undefined,
        _either(_where(chosen, if_true.undefined), _where(~chosen, if_false.undefined)),
    )
    return _Column(np.where(chosen, true_values, false_values), undefined)


def _binary(node: Binary, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Apply a binary operator; also returns the rows where this operation is undefined."""
    op = node.op
    if op in _INTEGER_ONLY:
        _require_integers(op, node.offset, a, b)
    a, b = _promote(a, b)
    if op in ("/", "%"):
        return _divide(op, a, b)
    if op in ("<<", ">>"):
        undefined = (b < 0) | (b > 63)
        count = np.where(undefined, 0, b)
        shifted = np.left_shift(a, count) if op == "<<" else np.right_shift(a, count)
        return shifted, undefined
    return _ARITHMETIC[op](a, b), None


def _divide(op: str, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if a.dtype.kind == "f":
        undefined = b == 0
        return a / np.where(undefined, 1.0, b), undefined
    undefined = (b == 0) | ((a == _INT64_MIN) & (b == -1))
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
