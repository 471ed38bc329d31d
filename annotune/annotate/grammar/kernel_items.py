"""What a kernel clause's items say: C expressions over the tunable parameters and the numeric
object-like macros of the user's files (`#define NX 4096`, `#define CELLS (NX * NY)`), an input
array's fill rule, and the outputs' tolerance.

An `in` or `inout` array may say how it is filled, after its count (`FILLS`): `in(N, range(0,
M))` (integers in [0, M): indices that must stay in bounds), `in(N, uniform(-1, 1))`, `in(N,
value(1))` or `in(N, iota)` (0, 1, 2, ...); without one, floats are uniform in [0, 1) and
integers in [0, 100). `tolerance(R)` is the relative difference from the default's outputs a
configuration may show (a number; `--check-rtol` overrides it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

from annotune.annotate.grammar.kernel_clauses import Clause, LocatedText, split_items
from annotune.core.diagnostics import AnnotuneError
from annotune.space.expressions import (
    ANY_NAME,
    Binary,
    Conditional,
    Expression,
    ExpressionError,
    Name,
    Node,
    Unary,
    parse_expression,
)

FILLS = {"uniform": 2, "range": 2, "value": 1, "iota": 0}
"""How an input array may be filled, and how many bounds each rule takes."""


@dataclass(frozen=True)
class Fill:
    """An input array's fill rule (`FILLS`) with its bounds, C expressions like the count."""

    rule: str
    bounds: tuple[Expression, ...] = ()

    def to_json(self) -> dict:
        return {"rule": self.rule, "bounds": [one_line(b) for b in self.bounds]}


def one_line(expr: Expression) -> str:
    return " ".join(expr.text.split())


def parse_tolerance(clause: Clause) -> float:
    """tolerance(R): one number, finite and not negative."""
    if len(clause.items) != 1:
        raise AnnotuneError("tolerance(...) takes one number (a relative tolerance)", clause.at)
    text, item, offset = clause.items[0]
    at = text.location(offset + len(item) - len(item.lstrip()))
    try:
        value = float(item.strip())
    except ValueError:
        raise AnnotuneError(
            f"tolerance(...) takes a number, not {item.strip()!r}", at, hint="e.g. 1e-3"
        ) from None
    if not math.isfinite(value) or value < 0:
        raise AnnotuneError(f"tolerance {item.strip()} is not a finite number >= 0", at)
    return value


@dataclass(frozen=True)
class Names:
    params: Collection[str]
    macros: Mapping[str, Expression]

    def __contains__(self, name: object) -> bool:
        return name in self.params or name in self.macros


def item_expression(text: LocatedText, item: str, offset: int, names: Names) -> Expression:
    offset += len(item) - len(item.lstrip())
    item = item.strip()
    if not item:
        raise AnnotuneError("empty expression", text.location(offset))
    try:
        expr = parse_expression(item, ANY_NAME)
    except ExpressionError as error:
        raise AnnotuneError(error.message, text.location(offset + error.offset)) from None
    for node in _name_nodes(expr.root):
        if node.name not in names:
            raise AnnotuneError(
                f"unknown name '{node.name}' (not a tunable parameter or a numeric macro)",
                text.location(offset + node.offset),
            )
    return expr


def _name_nodes(root: Node) -> list[Name]:
    found, stack = [], [root]
    while stack:
        node = stack.pop()
        if isinstance(node, Name):
            found.append(node)
        elif isinstance(node, Unary):
            stack.append(node.operand)
        elif isinstance(node, Binary):
            stack += [node.right, node.left]
        elif isinstance(node, Conditional):
            stack += [node.if_false, node.if_true, node.condition]
    return found


_DIM3 = re.compile(r"\s*dim3\s*(?=\()")


def dim_expressions(clause: Clause, names: Names) -> tuple[Expression, ...]:
    """A grid's or block's 1 to 3 expressions, written as the launch would write them: `X, Y`
    or `dim3(X, Y)` (one item that is a `dim3`'s construction)."""
    items = clause.items
    if len(items) == 1 and (dim3 := _DIM3.match(items[0][1])) is not None:
        text, item, offset = items[0]
        inner, end = split_items(text, offset + dim3.end())
        if item[end - offset :].strip():
            raise AnnotuneError(
                f"{clause.name}(...): nothing may follow dim3(...)", text.location(end)
            )
        clause = replace(clause, items=tuple(inner))
    if not 1 <= len(clause.items) <= 3:
        raise AnnotuneError(
            f"{clause.name}(...) takes 1 to 3 expressions, found {len(clause.items)}", clause.at
        )
    return tuple(item_expression(text, item, offset, names) for text, item, offset in clause.items)


_FILL = re.compile(r"\s*([A-Za-z_]\w*)\s*")


def parse_fill(text: LocatedText, item: str, offset: int, kind: str, names: Names) -> Fill:
    """`range(LO, HI)`, `uniform(LO, HI)`, `value(V)` or `iota`: an input's fill rule."""
    at = text.location(offset + len(item) - len(item.lstrip()))
    match = _FILL.match(item)
    rule = match.group(1) if match else ""
    rules = ", ".join(f"{r}({', '.join('E' * n)})" if n else r for r, n in FILLS.items())
    if kind == "out":
        raise AnnotuneError("an out(...) array starts as zeros: it takes no fill", at)
    if rule not in FILLS:
        raise AnnotuneError(f"unknown fill {item.strip()!r}", at, hint=f"fills: {rules}")
    if FILLS[rule] == 0:
        if item[match.end() :].strip():
            raise AnnotuneError(f"'{rule}' takes no bounds", at, hint=f"fills: {rules}")
        return Fill(rule)
    open_at = offset + match.end()
    if text.text[open_at : open_at + 1] != "(":
        raise AnnotuneError(f"'{rule}' needs its bounds in (...)", at, hint=f"fills: {rules}")
    parts, after = split_items(text, open_at)
    if text.text[after : offset + len(item)].strip() or len(parts) != FILLS[rule]:
        raise AnnotuneError(
            f"'{rule}' takes {FILLS[rule]} bound{'s' * (FILLS[rule] > 1)}",
            at,
            hint=f"fills: {rules}",
        )
    return Fill(rule, tuple(item_expression(text, t, o, names) for _, t, o in parts))
