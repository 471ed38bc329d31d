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

The package is one room per stage: the tree (`nodes`), the lexer and C's number constants
(`tokens`), the parser and its type check (`parser`), and evaluation over columns of rows, or
one configuration (`evaluate`); every stage raises `ExpressionError` (`errors`), a `TextError`.
"""

from __future__ import annotations

from annotune.space.expressions.errors import ExpressionError, TextError
from annotune.space.expressions.evaluate import evaluate, evaluate_one, evaluate_with_undefined
from annotune.space.expressions.nodes import (
    Binary,
    Conditional,
    Expression,
    Literal,
    Name,
    Node,
    Unary,
)
from annotune.space.expressions.parser import ANY_NAME, MAX_DEPTH, RESERVED_NAMES, parse_expression
from annotune.space.expressions.tokens import parse_constant, unexpected_character

__all__ = [
    "ANY_NAME",
    "Binary",
    "Conditional",
    "Expression",
    "ExpressionError",
    "Literal",
    "MAX_DEPTH",
    "Name",
    "Node",
    "RESERVED_NAMES",
    "TextError",
    "Unary",
    "evaluate",
    "evaluate_one",
    "evaluate_with_undefined",
    "parse_constant",
    "parse_expression",
    "unexpected_character",
]
