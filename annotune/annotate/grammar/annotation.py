"""The annotation language: `@tune` comments, `#pragma annotune ...` bodies and domains.

Everything here works on plain strings and reports mistakes as `GrammarError` with a 0-based
offset into the text it was given; the front end turns offsets into FILE:LINE:COL.

    @tune DOMAIN                      on a #define line (the defined value is the default)
    @tune(NAME) DOMAIN                on a pragma with one number literal
    @tune(NAME: clause) DOMAIN        on a pragma with several: the literal after `clause(`
    DOMAIN := values(a, b, ...) | range(lo, hi[, step]) | pow2(lo, hi) | bool
    #pragma annotune param NAME DOMAIN [default(V)]
    #pragma annotune constraint EXPR

Numbers are C constants, read by the same rules as in constraints (annotune.space.expressions):
ASCII digits only, `010` is octal, `1_0` and `１０` are no numbers, integers fit in 64 bits.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from annotune.core.records import Number
from annotune.space.expressions import (
    ExpressionError,
    TextError,
    parse_constant,
    unexpected_character,
)

# Tokens of the small annotation language: names, numbers, punctuation. This is a lexer for
# our own mini-language (the C source itself is read by libclang). A number is lexed as C's
# preprocessing number, everything a constant could run on into, so that `12abc` is one bad
# constant (with its own message) rather than 12 and a stray name.
_TOKEN = re.compile(
    r"(?:(?P<number>[+-]?\.?[0-9](?:[eEpP][+-]|[0-9A-Za-z_.])*)"
    r"|(?P<name>[A-Za-z_][A-Za-z_0-9]*)"
    r"|(?P<punct>[(),:]))"
    r"[ \t\n\r\f\v]*"  # and the space after it
)
_SPACE = re.compile(r"[ \t\n\r\f\v]*")
_PLAIN_INTEGER = re.compile(r"[+-]?(?:0|[1-9][0-9]{0,17})")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z_0-9]*\Z")

DOMAIN_KINDS = ("values", "range", "pow2", "bool")
MAX_DOMAIN_SIZE = 1_000_000
"""Most values a domain may have: a search over more is no search, and `range(1, 10**12)`
must be an error, not an attempt to build a trillion-value tuple."""


class GrammarError(TextError):
    """A mistake in annotation text, at `offset` characters into it: the annotation grammar's
    one error (a number's mistake, read by the expression grammar's rules, is turned into one
    at the number's offset)."""


@dataclass(frozen=True)
class Domain:
    """A parameter's legal values, in the order the user wrote (or generated) them."""

    kind: str
    values: tuple[Number, ...]
    text: str


@dataclass(frozen=True)
class TuneComment:
    """A parsed `@tune` annotation found in a comment.

    `name` is set for `@tune(NAME)` (a pragma literal), None for a #define annotation.
    `clause` picks which literal of the pragma when it has several.
    `offset` is where `@tune` starts within the comment text.
    """

    name: str | None
    clause: str | None
    domain: Domain
    offset: int
    domain_offset: int


@dataclass(frozen=True)
class ParamPragma:
    """`#pragma annotune param NAME DOMAIN [default(V)]`, offsets relative to its body."""

    name: str
    name_offset: int
    domain: Domain
    domain_offset: int
    default: Number | None
    default_offset: int


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    offset: int


def _tokenize(text: str, base: int = 0) -> Iterator[_Token]:
    """Tokens on demand, so the first mistake from the left is the one reported, and a
    megabyte of `values(...)` is never held as a list of tokens."""
    pos = _SPACE.match(text).end()  # type: ignore[union-attr]  # matches ""
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise GrammarError(unexpected_character(text[pos]), base + pos)
        kind = match.lastgroup or ""
        yield _Token(kind, match.group(kind), base + pos)
        pos = match.end()


def parse_number(text: str) -> Number:
    """A C number literal with an optional sign (decimal, octal, hex or floating; suffixes
    checked, then ignored) as a Python number, read as C and the constraints read it.

    Raises GrammarError (a ValueError) at the offset of the mistake within `text`.
    """
    if _PLAIN_INTEGER.fullmatch(text):  # most numbers: read directly, 18 digits always fit
        return int(text)
    sign = text[:1] if text[:1] in ("+", "-") else ""
    try:
        value = parse_constant(text[len(sign) :])
    except ExpressionError as error:
        raise GrammarError(error.message, len(sign) + error.offset) from None
    return -value if sign == "-" else value


class _Cursor:
    """Walks the tokens with one of lookahead; every error points at the token it stopped on."""

    def __init__(self, text: str, base: int = 0):
        self.text = text
        self.base = base
        self._tokens = _tokenize(text, base)
        self._next = next(self._tokens, None)
        self.last: _Token | None = None
        self.end_offset = base + len(text.rstrip(" \t\n\r\f\v"))

    def source(self, start: int, end: int) -> str:
        """The original text between two absolute offsets."""
        return self.text[start - self.base : end - self.base]

    def peek(self) -> _Token | None:
        return self._next

    def here(self) -> int:
        token = self.peek()
        return token.offset if token else self.end_offset

    def _advance(self) -> _Token:
        token = self._next
        assert token is not None  # callers peeked
        self.last = token
        self._next = next(self._tokens, None)
        return token

    def take(self, kind: str, text: str | None = None, what: str = "") -> _Token:
        token = self.peek()
        if token is None or token.kind != kind or (text is not None and token.text != text):
            wanted = what or (repr(text) if text else kind)
            found = f"{token.text!r}" if token else "end of annotation"
            raise GrammarError(f"expected {wanted}, found {found}", self.here())
        return self._advance()

    def accept(self, kind: str, text: str | None = None) -> _Token | None:
        token = self.peek()
        if token is not None and token.kind == kind and (text is None or token.text == text):
            return self._advance()
        return None

    def number(self) -> tuple[Number, int]:
        token = self.take("number", what="a number")
        try:
            return parse_number(token.text), token.offset
        except GrammarError as error:
            raise GrammarError(error.message, token.offset + error.offset) from None


def _parse_domain(cursor: _Cursor) -> Domain:
    start = cursor.here()
    head = cursor.take("name", what=f"a domain ({', '.join(DOMAIN_KINDS)})")
    kind = head.text
    if kind not in DOMAIN_KINDS:
        raise GrammarError(
            f"unknown domain '{kind}' (expected one of: {', '.join(DOMAIN_KINDS)})", head.offset
        )
    if kind == "bool":
        values: tuple[Number, ...] = (0, 1)
    else:
        cursor.take("punct", "(")
        args: list[tuple[Number, int]] = []
        if not cursor.accept("punct", ")"):
            while True:
                if len(args) == MAX_DOMAIN_SIZE:
                    raise GrammarError(
                        f"too large a domain: more than {MAX_DOMAIN_SIZE:,} values", cursor.here()
                    )
                args.append(cursor.number())
                if cursor.accept("punct", ")"):
                    break
                cursor.take("punct", ",", what="',' or ')'")
        values = _domain_values(kind, args, head.offset)
    last = cursor.last
    assert last is not None  # the domain's name at least
    return Domain(kind, values, cursor.source(start, last.offset + len(last.text)))


def _domain_values(kind: str, args: list[tuple[Number, int]], at: int) -> tuple[Number, ...]:
    if kind == "values":
        if not args:
            raise GrammarError("empty domain: values() needs at least one value", at)
        seen: dict[Number, int] = {}
        for value, offset in args:
            if value in seen:
                raise GrammarError(f"duplicate value {value} in values(...)", offset)
            seen[value] = offset
        return tuple(value for value, _ in args)
    if kind == "range":
        if len(args) not in (2, 3):
            raise GrammarError("range takes (lo, hi) or (lo, hi, step)", at)
        for value, offset in args:
            if not isinstance(value, int):
                raise GrammarError("range bounds and step must be integers", offset)
        lo, hi = int(args[0][0]), int(args[1][0])
        step = int(args[2][0]) if len(args) == 3 else 1
        if step <= 0:
            raise GrammarError(f"range step must be positive, got {step}", args[2][1])
        if lo > hi:
            raise GrammarError(f"empty domain: range({lo}, {hi}) has lo > hi", args[0][1])
        count = (hi - lo) // step + 1
        if count > MAX_DOMAIN_SIZE:
            raise GrammarError(
                f"too large a domain: range({', '.join(str(v) for v, _ in args)}) has "
                f"{count:,} values, more than {MAX_DOMAIN_SIZE:,}",
                at,
            )
        return tuple(range(lo, hi + 1, step))
    # pow2
    if len(args) != 2:
        raise GrammarError("pow2 takes (lo, hi)", at)
    (lo, lo_at), (hi, hi_at) = args
    if not isinstance(lo, int) or not isinstance(hi, int):
        raise GrammarError("pow2 bounds must be integers", lo_at)
    if lo < 1:
        raise GrammarError(f"pow2 lower bound must be at least 1, got {lo}", lo_at)
    if lo > hi:
        raise GrammarError(f"empty domain: pow2({lo}, {hi}) has lo > hi", lo_at)
    values = tuple(1 << k for k in range(hi.bit_length()) if lo <= (1 << k) <= hi)
    if not values:
        raise GrammarError(f"empty domain: no power of two between {lo} and {hi}", hi_at)
    return values


def parse_domain(text: str) -> Domain:
    """A whole string that must be exactly one DOMAIN (used by the config file)."""
    cursor = _Cursor(text)
    domain = _parse_domain(cursor)
    _expect_end(cursor)
    return domain


def _expect_end(cursor: _Cursor) -> None:
    token = cursor.peek()
    if token is not None:
        raise GrammarError(f"unexpected {token.text!r} after the annotation", token.offset)


def find_tune_comments(comment: str) -> list[TuneComment]:
    """All `@tune` annotations in one comment's text (`// ...` or `/* ... */`)."""
    body_start, body_end = _comment_body(comment)
    found: list[TuneComment] = []
    positions = [m.start() for m in re.finditer(r"@tune\b", comment, re.ASCII)]
    for i, at in enumerate(positions):
        if at < body_start or at >= body_end:
            continue
        stop = positions[i + 1] if i + 1 < len(positions) else body_end
        found.append(_parse_tune(comment, at, min(stop, body_end)))
    return found


def _comment_body(comment: str) -> tuple[int, int]:
    if comment.startswith("/*"):
        return 2, len(comment) - 2 if comment.endswith("*/") else len(comment)
    return (2 if comment.startswith("//") else 0), len(comment)


def _parse_tune(comment: str, at: int, stop: int) -> TuneComment:
    pos = at + len("@tune")
    name = clause = None
    if comment.startswith("(", pos):
        close = comment.find(")", pos)
        if close < 0 or close >= stop:
            raise GrammarError("unclosed '(' after @tune", pos)
        inner = comment[pos + 1 : close]
        name_text, _, clause_text = inner.partition(":")
        name = name_text.strip()
        if not _IDENTIFIER.match(name):
            raise GrammarError(f"expected a parameter name in @tune(...), found {name!r}", pos + 1)
        if clause_text.strip():
            clause = clause_text.strip()
            if not _IDENTIFIER.match(clause):
                raise GrammarError(f"expected a clause name after ':', found {clause!r}", pos + 1)
        pos = close + 1
    body = comment[pos:stop]
    cursor = _Cursor(body, pos)
    domain_offset = cursor.here()
    domain = _parse_domain(cursor)
    _expect_end(cursor)
    return TuneComment(name, clause, domain, at, domain_offset)


def parse_param_pragma(body: str) -> ParamPragma:
    """The text after `#pragma annotune param`."""
    cursor = _Cursor(body)
    name_token = cursor.take("name", what="a parameter name")
    following = cursor.peek()
    if name_token.text in DOMAIN_KINDS and (following is None or following.text == "("):
        raise GrammarError("expected a parameter name before the domain", name_token.offset)
    domain_offset = cursor.here()
    domain = _parse_domain(cursor)
    default: Number | None = None
    default_offset = -1
    if cursor.accept("name", "default"):
        cursor.take("punct", "(")
        default, default_offset = cursor.number()
        cursor.take("punct", ")")
    _expect_end(cursor)
    return ParamPragma(
        name_token.text, name_token.offset, domain, domain_offset, default, default_offset
    )
