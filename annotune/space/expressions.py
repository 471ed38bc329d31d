"""A safe parser and vectorized evaluator for C constraint expressions over parameter names.

Constraints come from user files, so they are read by our own parser into a tree of small frozen
dataclasses and evaluated with numpy. Nothing is ever handed to Python's eval, exec, compile or
ast: an expression can only name parameters, write numbers, apply C operators and call
`min`/`max`. Parsing, checking and evaluation walk the tree with explicit stacks, never Python
recursion, so a long expression (`a + a + ... + a`, left-deep) costs time, not the call stack.

Semantics follow C, evaluated over whole columns of configurations at once:

- Integer operands are 64-bit: `/` truncates toward zero and `%` takes the sign of the dividend
  (a == (a / b) * b + a % b).
- If either operand is floating-point, the operation is done in float64 (the usual arithmetic
  conversions). `%`, shifts, `~`, `&`, `^` and `|` need integers.
- Comparisons and logical operators give 0 or 1; a value is true when it is nonzero.
- `min(a, b)` means `a < b ? a : b`, `max(a, b)` means `a > b ? a : b`.
- Division or remainder by zero, signed overflow of `+`, `-`, `*`, unary `-` and `/`
  (INT64_MIN / -1), and shifts by a negative count or by 64 or more are undefined in C. They are
  tracked per row; `&&`, `||` and `?:` short-circuit per row, so `b != 0 && a / b > 2` is simply
  false where b == 0. A constraint that is undefined on a row reads as 0 there, i.e. that
  configuration is illegal: a product that overflows never passes `BX * BY <= 1024` by wrapping.
- Number suffixes (`u`, `l`, `ul`, `ll`, `f`, ...) are accepted and ignored: all integers are
  signed 64-bit, all floating literals double. Only ASCII digits make numbers.
"""

from __future__ import annotations

import math
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
    "parse_constant",
    "parse_expression",
    "unexpected_character",
]

MAX_DEPTH = 200
"""Most parentheses, unary operators and `?:` an expression may nest inside one another. Real
constraints nest a handful; the bound keeps the columns a hostile one holds at once while it is
evaluated (`Expression.width`) small. Chains such as `a + b + ... + z` do not nest."""

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
    """A parsed constraint: its text, its tree, and the parameters it uses (in order of use).

    `width` is the most intermediate columns alive at once while it is evaluated, so callers
    can size their chunks of rows to a memory budget.
    """

    text: str
    root: Node
    names: tuple[str, ...]
    width: int = field(default=1, compare=False)


# ---------------------------------------------------------------------------------------------
# Tokens.


@dataclass(frozen=True)
class _Token:
    kind: str  # "number", "name", "op" or "end"
    text: str
    offset: int
    value: int | float = 0


_DIGITS = frozenset("0123456789")
_OCTAL = frozenset("01234567")
_SPACE = frozenset(" \t\n\r\f\v")  # C's whitespace; U+00A0 and co. are no separators
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FLOAT = re.compile(r"(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")
_HEX = re.compile(r"0[xX][0-9A-Fa-f]+")
_DECIMAL = re.compile(r"[0-9]+")
_SUFFIX = re.compile(r"[A-Za-z0-9_.]*")
_INT_SUFFIXES = frozenset({"", "u", "l", "ul", "lu", "ll", "ull", "llu"})
_FLOAT_SUFFIXES = frozenset({"", "f", "l"})
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_INT64_DIGITS = len(str(_INT64_MAX))

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


def unexpected_character(ch: str) -> str:
    """The message for a character no token starts with. Python's int() and str.isdigit()
    take '٣' and '３' for digits; C does not, so such a character says why it is refused."""
    if ch.isdigit() or ch.isnumeric():
        return f"unexpected character {ch!r}: numbers are written with the ASCII digits 0-9"
    return f"unexpected character {ch!r}"


def _clip(text: str) -> str:
    """Text quoted in a message, shortened: a hostile constant may be megabytes long."""
    return text if len(text) <= 40 else f"{text[:20]}...{text[-8:]}"


def _tokenize(text: str) -> Iterator[_Token]:
    """Tokens on demand, so errors come left to right (`f("x")` is a call before a string)."""
    pos = 0
    while pos < len(text):
        ch = text[pos]
        if ch in _SPACE:
            pos += 1
        elif ch in _DIGITS or (ch == "." and text[pos + 1 : pos + 2] in _DIGITS):
            try:
                token = _number(text, pos)
            except ExpressionError as error:
                raise _syntax_error(error.message, error.offset) from None
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
                raise _syntax_error(unexpected_character(ch), pos)
            if op in _ASSIGNMENTS:
                raise _syntax_error("assignment is not allowed", pos)
            if op in _FORBIDDEN:
                raise _syntax_error(_FORBIDDEN[op], pos)
            yield _Token("op", op, pos)
            pos += len(op)
    yield _Token("end", "", len(text))


def _number(text: str, pos: int) -> _Token:
    """Read a C integer or floating constant at `pos`; its suffix is checked, then dropped.

    Only ASCII digits count (the patterns say [0-9], never \\d). A decimal constant longer than
    INT64_MAX is refused before int() sees it: Python's int() raises on over 4300 digits.
    """
    value: int | float
    if match := _FLOAT.match(text, pos):
        digits, suffixes, value = match.group(), _FLOAT_SUFFIXES, float(match.group())
        if math.isinf(value):
            raise ExpressionError(f"floating constant '{_clip(digits)}' is out of range", pos)
    elif match := _HEX.match(text, pos):
        digits, suffixes, value = match.group(), _INT_SUFFIXES, int(match.group(), 16)
    else:
        digits = _DECIMAL.match(text, pos).group()  # type: ignore[union-attr]  # pos is a digit
        suffixes = _INT_SUFFIXES
        if len(digits) > 1 and digits.startswith("0"):
            if not set(digits) <= _OCTAL:
                raise ExpressionError(f"invalid digit in octal constant '{_clip(digits)}'", pos)
            value = int(digits, 8)
        else:
            value = int(digits) if len(digits) <= _INT64_DIGITS else _INT64_MAX + 1
    end = pos + len(digits)
    suffix = _SUFFIX.match(text, end).group()  # type: ignore[union-attr]  # matches ""
    if suffix.lower() not in suffixes:
        raise ExpressionError(
            f"invalid suffix '{_clip(suffix)}' on constant '{_clip(digits)}'", end
        )
    if isinstance(value, int) and value > _INT64_MAX:
        raise ExpressionError(f"integer constant '{_clip(digits)}' does not fit in 64 bits", pos)
    return _Token("number", digits + suffix, pos, value)


def parse_constant(text: str) -> int | float:
    """All of `text` as one unsigned C number constant, by the rules constraints use, so that
    an annotation or a `#define` reads `010` as 8 and `1_0` as no number at all, as C does.

    Raises ExpressionError (a ValueError) with the offset of the mistake.
    """
    if not text or not (text[0] in _DIGITS or (text[0] == "." and text[1:2] in _DIGITS)):
        raise ExpressionError("expected a number", 0)
    token = _number(text, 0)
    end = len(token.text)
    if end < len(text):
        raise ExpressionError(
            f"unexpected {text[end]!r} after the constant '{_clip(token.text)}'", end
        )
    return token.value


# ---------------------------------------------------------------------------------------------
# Parser: operator precedence with explicit stacks. Operands wait on one stack, operators and
# open brackets on another, so nesting costs list entries, never Python frames.

_PRECEDENCE = {
    "||": 1, "&&": 2, "|": 3, "^": 4, "&": 5,
    "==": 6, "!=": 6, "<": 7, "<=": 7, ">": 7, ">=": 7,
    "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10,
}  # fmt: skip
_UNARY_PRECEDENCE = 11
_UNARY = frozenset({"+", "-", "!", "~"})
_INTEGER_ONLY = frozenset({"%", "<<", ">>", "&", "^", "|", "~"})
_EXPECTED = {"(": "')'", "call": "',' or ')'", "?": "':'"}


@dataclass
class _Frame:
    """An operator or bracket read but not yet applied.

    kind: "binary", "unary", "(", "call" (min/max, `token` is the name), "?" (a conditional
    reading its middle operand) or ":" (one waiting for its last operand).
    """

    kind: str
    token: _Token
    arguments: int = 1  # of a call, so far

    def binding(self) -> int:
        """How tightly the frame holds the operand on top of the stack; -1 for brackets, which
        only their closing token applies. `?:` is right-associative, so ':' binds loosest."""
        if self.kind == "binary":
            return _PRECEDENCE[self.token.text]
        return {"unary": _UNARY_PRECEDENCE, ":": 0}.get(self.kind, -1)


class _Parser:
    def __init__(self, text: str):
        self._tokens = _tokenize(text)
        self._next = next(self._tokens)
        self._operands: list[Node] = []
        self._frames: list[_Frame] = []
        self._depth = 0  # open frames that nest: all but binary operators

    def parse(self) -> Node:
        if self._next.kind == "end":
            raise _syntax_error("empty expression", 0)
        want_operand = True
        while True:
            token = self._advance()
            if want_operand:
                want_operand = self._operand(token)
            elif token.kind == "end":
                self._reduce(0)
                if self._frames:
                    raise _misplaced(token, self._frames[-1].kind)
                return self._operands.pop()
            else:
                want_operand = self._operator(token)

    def _advance(self) -> _Token:
        token = self._next
        if token.kind != "end":
            self._next = next(self._tokens)
        return token

    def _operand(self, token: _Token) -> bool:
        """Read a token where an operand must start; whether an operand is still wanted."""
        if token.kind == "number":
            self._operands.append(Literal(token.value, token.offset))
            return False
        if token.kind == "name":
            return self._name(token)
        if token.kind == "op" and token.text in _UNARY:
            self._open(_Frame("unary", token), token.offset)
            return True
        if token.kind == "op" and token.text == "(":
            self._open(_Frame("(", token), token.offset)
            return True
        raise _unexpected(token)

    def _name(self, token: _Token) -> bool:
        call = self._next.kind == "op" and self._next.text == "("
        if token.text in ("min", "max"):
            if not call:
                raise _syntax_error(f"expected '(' after '{token.text}'", self._next.offset)
            self._open(_Frame("call", token), self._advance().offset)
            return True
        if call:
            raise _syntax_error("calls are not allowed (only min and max)", token.offset)
        if token.text in ("true", "false"):
            self._operands.append(Literal(int(token.text == "true"), token.offset))
        else:
            self._operands.append(Name(token.text, token.offset))
        return False

    def _operator(self, token: _Token) -> bool:
        """Read a token after a complete operand; whether an operand is wanted next."""
        text = token.text if token.kind == "op" else ""
        if text in _PRECEDENCE:
            self._reduce(_PRECEDENCE[text])  # left-associative: apply what binds as tightly
            self._frames.append(_Frame("binary", token))
            return True
        if text == "?":
            self._reduce(1)
            self._open(_Frame("?", token), token.offset)
            return True
        self._reduce(0)
        top = self._frames[-1] if self._frames else None
        kind = top.kind if top is not None else ""
        if top is not None and (text, kind) == (":", "?"):
            top.kind = ":"
            return True
        if top is not None and (text, kind) == (",", "call"):
            top.arguments += 1
            return True
        if top is not None and text == ")" and kind in ("(", "call"):
            self._close(self._frames.pop())
            return False
        raise _misplaced(token, kind)

    def _open(self, frame: _Frame, at: int) -> None:
        if self._depth == MAX_DEPTH:
            raise _syntax_error(f"expression is nested more than {MAX_DEPTH} deep", at)
        self._depth += 1
        self._frames.append(frame)

    def _close(self, frame: _Frame) -> None:
        """A closing ')': a group leaves its operand as it is; a call takes its two."""
        self._depth -= 1
        if frame.kind == "call":
            if frame.arguments != 2:
                raise _syntax_error(
                    f"{frame.token.text} takes exactly two arguments", frame.token.offset
                )
            right, left = self._operands.pop(), self._operands.pop()
            self._operands.append(Binary(frame.token.text, left, right, frame.token.offset))

    def _reduce(self, min_binding: int) -> None:
        """Apply the operators on top of the stack that bind at least `min_binding` tightly."""
        operands = self._operands
        while self._frames and self._frames[-1].binding() >= min_binding:
            frame = self._frames.pop()
            token = frame.token
            if frame.kind == "binary":
                right, left = operands.pop(), operands.pop()
                operands.append(Binary(token.text, left, right, token.offset))
                continue
            self._depth -= 1
            if frame.kind == "unary":
                operands.append(Unary(token.text, operands.pop(), token.offset))
            else:
                if_false, if_true, condition = operands.pop(), operands.pop(), operands.pop()
                operands.append(Conditional(condition, if_true, if_false, token.offset))


def _unexpected(token: _Token, expected: str = "") -> ExpressionError:
    if expected:
        found = "the end" if token.kind == "end" else f"'{token.text}'"
        return _syntax_error(f"expected {expected} but found {found}", token.offset)
    if token.kind == "end":
        return _syntax_error("unexpected end of expression", token.offset)
    if token.text == ",":
        return _syntax_error("the comma operator is not allowed", token.offset)
    return _syntax_error(f"unexpected '{_clip(token.text)}'", token.offset)


def _misplaced(token: _Token, innermost: str) -> ExpressionError:
    """A token that cannot follow a complete operand: what the innermost open bracket (or
    `?`) waits for decides the message."""
    return _unexpected(token, _EXPECTED.get(innermost, ""))


def _children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Unary):
        return (node.operand,)
    if isinstance(node, Binary):
        return (node.left, node.right)
    if isinstance(node, Conditional):
        return (node.condition, node.if_true, node.if_false)
    return ()


def _postorder(root: Node) -> Iterator[Node]:
    """Every node after its children, left to right, without recursion: chains of binary
    operators make trees as deep as they are long."""
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        children = _children(node)
        if expanded or not children:
            yield node
        else:
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(children))


def _check_types(root: Node) -> int:
    """Reject `%`, shifts and bitwise operators on floating-point constants, left to right;
    return the tree's width (see `Expression`)."""
    results: list[tuple[bool, int]] = []  # (floating-point whatever the parameters, width)
    for node in _postorder(root):
        if isinstance(node, Literal | Name):
            results.append((isinstance(node, Literal) and isinstance(node.value, float), 1))
        elif isinstance(node, Unary):
            is_float, width = results.pop()
            if is_float and node.op == "~":
                raise _float_operand_error(node.op, node.offset)
            results.append((is_float and node.op in ("+", "-"), width))
        elif isinstance(node, Binary):
            (right, right_width), (left, left_width) = results.pop(), results.pop()
            if (left or right) and node.op in _INTEGER_ONLY:
                raise _float_operand_error(node.op, node.offset)
            is_float = (left or right) and node.op in ("+", "-", "*", "/", "min", "max")
            results.append((is_float, max(left_width, right_width + 1)))
        else:  # the type of a conditional is its branches'
            (if_false, false_width), (if_true, true_width) = results.pop(), results.pop()
            _, condition_width = results.pop()
            width = max(condition_width, true_width + 1, false_width + 2)
            results.append((if_true or if_false, width))
    return results.pop()[1]


def _float_operand_error(op: str, offset: int) -> ExpressionError:
    return ExpressionError(
        f"invalid operands to '{op}': it needs integers, not floating-point", offset
    )


def parse_expression(text: str, names: Collection[str]) -> Expression:
    """Parse the C expression `text`, whose identifiers must all be among `names`.

    Raises ExpressionError with the offset of the offending token. Syntax is checked before
    types and names, so `os.system(1)` is a syntax error rather than an unknown parameter.
    `names` is searched once per identifier: give a set or a dict for many parameters.
    """
    root = _Parser(text).parse()
    width = _check_types(root)
    used = [node for node in _postorder(root) if isinstance(node, Name)]
    for name in used:
        if name.name not in names:
            raise ExpressionError(f"unknown parameter '{name.name}' in constraint", name.offset)
    return Expression(text, root, tuple(dict.fromkeys(name.name for name in used)), width)


# ---------------------------------------------------------------------------------------------
# Evaluation: every node gives a column of values and the rows where C is undefined. Literals
# stay 0-d arrays that numpy broadcasts, so a constant costs nothing per row.


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
    for node in _postorder(root):
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
        overflows = values.dtype.kind == "i" and values.size and values.min() == _INT64_MIN
        return np.negative(values), (values == _INT64_MIN) if overflows else None
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
    if low >= _INT64_MIN and high <= _INT64_MAX:
        return None
    if op == "+":
        return ((a ^ result) & (b ^ result)) < 0  # both operands' signs differ from the sum's
    if op == "-":
        return ((a ^ b) & (a ^ result)) < 0
    # A product that did not overflow divides back exactly; -1 * INT64_MIN wraps to itself
    # and so does its quotient, hence its own test.
    divisor = np.where(a == 0, 1, a)
    return ((a != 0) & (result // divisor != b)) | ((a == -1) & (b == _INT64_MIN))


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
