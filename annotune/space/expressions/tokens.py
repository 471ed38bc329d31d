"""The lexer: C tokens on demand, and C number constants read as C reads them.

Tokens come one at a time, so errors come left to right. Only ASCII digits make numbers, and a
number's suffix is checked, then dropped (`parse_constant`: the annotation grammar and the
header reader read their numbers by it too).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

from annotune.space.expressions.errors import ExpressionError
from annotune.space.expressions.nodes import INT64_MAX


@dataclass(frozen=True)
class Token:
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

_INT64_DIGITS = len(str(INT64_MAX))

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


def syntax_error(detail: str, offset: int) -> ExpressionError:
    return ExpressionError(f"syntax error: {detail}", offset)


def unexpected_character(ch: str) -> str:
    """The message for a character no token starts with. Python's int() and str.isdigit()
    take '٣' and '３' for digits; C does not, so such a character says why it is refused."""
    if ch.isdigit() or ch.isnumeric():
        return f"unexpected character {ch!r}: numbers are written with the ASCII digits 0-9"
    return f"unexpected character {ch!r}"


def clip(text: str) -> str:
    """Text quoted in a message, shortened: a hostile constant may be megabytes long."""
    return text if len(text) <= 40 else f"{text[:20]}...{text[-8:]}"


def tokenize(text: str) -> Iterator[Token]:
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
                raise syntax_error(error.message, error.offset) from None
            yield token
            pos += len(token.text)
        elif match := _NAME.match(text, pos):
            yield Token("name", match.group(), pos)
            pos = match.end()
        elif ch in "\"'":
            raise syntax_error("strings are not allowed", pos)
        else:
            op = next((op for op in _OPERATORS if text.startswith(op, pos)), None)
            if op is None:
                raise syntax_error(unexpected_character(ch), pos)
            if op in _ASSIGNMENTS:
                raise syntax_error("assignment is not allowed", pos)
            if op in _FORBIDDEN:
                raise syntax_error(_FORBIDDEN[op], pos)
            yield Token("op", op, pos)
            pos += len(op)
    yield Token("end", "", len(text))


def _number(text: str, pos: int) -> Token:
    """Read a C integer or floating constant at `pos`; its suffix is checked, then dropped.

    Only ASCII digits count (the patterns say [0-9], never \\d). A decimal constant longer than
    INT64_MAX is refused before int() sees it: Python's int() raises on over 4300 digits.
    """
    value: int | float
    if match := _FLOAT.match(text, pos):
        digits, suffixes, value = match.group(), _FLOAT_SUFFIXES, float(match.group())
        if math.isinf(value):
            raise ExpressionError(f"floating constant '{clip(digits)}' is out of range", pos)
    elif match := _HEX.match(text, pos):
        digits, suffixes, value = match.group(), _INT_SUFFIXES, int(match.group(), 16)
    else:
        digits = _DECIMAL.match(text, pos).group()  # type: ignore[union-attr]  # pos is a digit
        suffixes = _INT_SUFFIXES
        if len(digits) > 1 and digits.startswith("0"):
            if not set(digits) <= _OCTAL:
                raise ExpressionError(f"invalid digit in octal constant '{clip(digits)}'", pos)
            value = int(digits, 8)
        else:
            value = int(digits) if len(digits) <= _INT64_DIGITS else INT64_MAX + 1
    end = pos + len(digits)
    suffix = _SUFFIX.match(text, end).group()  # type: ignore[union-attr]  # matches ""
    if suffix.lower() not in suffixes:
        raise ExpressionError(f"invalid suffix '{clip(suffix)}' on constant '{clip(digits)}'", end)
    if isinstance(value, int) and value > INT64_MAX:
        raise ExpressionError(f"integer constant '{clip(digits)}' does not fit in 64 bits", pos)
    return Token("number", digits + suffix, pos, value)


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
            f"unexpected {text[end]!r} after the constant '{clip(token.text)}'", end
        )
    return token.value
