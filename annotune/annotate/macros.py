"""A macro's value: the one room that computes it, for a knob's default and for a kernel's clauses.

Two questions, two answers, both here:

- what number the compiler sees (`compiler_value`): a macro's value or a constant's initializer
  expanded as the preprocessor expands it (the definitions it keeps; a macro within its own
  expansion stays a name), then evaluated as a C expression of numbers: a knob's default, which
  must be a number however it is written (`(2 * BASE)`);
- what expression over the knobs a macro stands for (`numeric_macros`): each object-like
  macro's body parsed as a C expression, resolved in dependency order, evaluated per
  configuration in a kernel's launch (`#define CELLS (NX * BLOCK)`).

A `#define` as the front end's scan saw it is a `Define`; `function_like` says which of them
take arguments (a `(` right after the name), by one rule for both.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass

from annotune.annotate.grammar import parse_number
from annotune.annotate.source import ParsedSource, SourceFile, TextSpan, Token
from annotune.core.diagnostics import Location
from annotune.core.records import Number
from annotune.space.expressions import (
    ANY_NAME,
    RESERVED_NAMES,
    Expression,
    ExpressionError,
    evaluate_one,
    parse_expression,
)

EXPANSION_LIMIT = 4096  # tokens: a macro that expands further is not a knob's plain value


@dataclass(frozen=True)
class Define:
    """A `#define NAME value` seen in the user's files; `active` when the preprocessor keeps it
    under the flags in use (it is not in a skipped `#if` branch)."""

    name: str
    name_location: Location
    value_tokens: tuple[Token, ...]
    value_span: TextSpan | None
    guarded: bool
    function_like: bool
    file: SourceFile
    active: bool


def function_like(words: tuple[Token, ...]) -> bool:
    """Whether a `#define`'s words (its name first) define a function-like macro: a `(` right
    after the name, no space between."""
    return len(words) > 1 and words[1].text == "(" and words[1].start == words[0].end


def define_value(define: Define) -> Number | None:
    """The number a #define expands to, if it is a (possibly negated, parenthesized) literal."""
    return literal_value(define.value_tokens)


def literal_value(tokens: tuple[Token, ...]) -> Number | None:
    texts = [t.text for t in tokens]
    while len(texts) >= 2 and texts[0] == "(" and texts[-1] == ")":
        texts = texts[1:-1]
    if texts in (["true"], ["false"]):
        return int(texts[0] == "true")
    sign = ""
    if len(texts) == 2 and texts[0] in "+-":
        sign, texts = texts[0], texts[1:]
    if len(texts) != 1:
        return None
    try:
        return parse_number(sign + texts[0])
    except ValueError:
        return None


def compiler_value(tokens: tuple[Token, ...], defines: Mapping[str, Define]) -> Number | None:
    """The number a macro's value or a constant's initializer comes to, as the compiler would
    compute it: a literal, or a C expression of literals and other macros kept by the
    preprocessor (`(2 * BASE)`; `defines`: the definition of each name the front end keeps).
    None when it is anything else (a call, a cast, `sizeof`)."""
    literal = literal_value(tokens)
    if literal is not None:
        return literal
    texts: list[str] = []
    pending = [(token.text, frozenset()) for token in tokens]
    pending.reverse()
    while pending:
        if len(texts) + len(pending) > EXPANSION_LIMIT:
            return None
        text, expanding = pending.pop()
        other = defines.get(text)
        if other is None or text in expanding:  # a name not defined, or its own expansion
            texts.append(text)
            continue
        if not other.active or other.function_like:
            return None
        inner = expanding | {text}
        pending.extend((token.text, inner) for token in reversed(other.value_tokens))
    try:
        expression = parse_expression(" ".join(texts), names=())
        return evaluate_one(expression, {})
    except (ExpressionError, TypeError):
        return None


def numeric_macros(parsed: ParsedSource, params: set[str]) -> dict[str, Expression]:
    """Object-like macros whose value is a C expression over numbers, params and such macros.

    The first definition of a name wins (as in the front end); a macro whose value is anything
    else (a string, a cast, a call), or that uses itself, is left out, so naming it in the pragma
    is an unknown name. Each body is parsed once and the macros are resolved in dependency
    order (a macro may use one defined after it): linear, where retrying every unresolved body
    until nothing changes is quadratic in a header of thousands of macros.
    """
    bodies: dict[str, str] = {}
    for source in parsed.files:
        for directive in source.directives:
            words = directive.words
            if directive.name != "define" or not words or words[0].kind == "punctuation":
                continue
            name = words[0].text
            if function_like(words) or name in params or name in RESERVED_NAMES or len(words) < 2:
                continue
            bodies.setdefault(name, " ".join(w.text for w in words[1:]))
    candidates: dict[str, Expression] = {}
    for name, body in bodies.items():
        try:
            candidates[name] = parse_expression(body, ANY_NAME)
        except ExpressionError:
            continue
    return _resolve(candidates, params)


def _resolve(candidates: Mapping[str, Expression], params: set[str]) -> dict[str, Expression]:
    """The candidates whose names all resolve to parameters or resolved candidates, each after
    the macros it uses, otherwise in definition order (Kahn's algorithm over a heap)."""
    order = {name: i for i, name in enumerate(candidates)}
    waiting: dict[str, set[str]] = {}
    users: dict[str, list[str]] = {}
    ready: list[tuple[int, str]] = []
    for name, expr in candidates.items():
        needs = {n for n in expr.names if n not in params}
        if not needs <= candidates.keys():
            continue  # uses a name that is neither: never numeric
        waiting[name] = needs
        for need in needs:
            users.setdefault(need, []).append(name)
        if not needs:
            heapq.heappush(ready, (order[name], name))
    macros: dict[str, Expression] = {}
    while ready:
        _, name = heapq.heappop(ready)
        macros[name] = candidates[name]
        for user in users.get(name, ()):
            needs = waiting[user]
            needs.discard(name)
            if not needs:
                heapq.heappush(ready, (order[user], user))
    return macros


def macros_needed(
    used: set[str], macros: Mapping[str, Expression]
) -> tuple[tuple[str, Expression], ...]:
    """The macros reachable from `used`, in resolution order (each after those it uses)."""
    needed, stack = set(), [n for n in used if n in macros]
    while stack:
        name = stack.pop()
        if name not in needed:
            needed.add(name)
            stack += [n for n in macros[name].names if n in macros]
    return tuple((name, expr) for name, expr in macros.items() if name in needed)
