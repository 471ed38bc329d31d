"""The tree a constraint is parsed into: small frozen dataclasses, walked without recursion.

Offsets are kept for error messages but ignored when comparing trees. Integers are C's signed
64-bit ones (`INT64_MIN`, `INT64_MAX`); `INTEGER_ONLY` are the operators that refuse a
floating-point operand, when the tree is checked and when it is evaluated.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field


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


INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

INTEGER_ONLY = frozenset({"%", "<<", ">>", "&", "^", "|", "~"})


def children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Unary):
        return (node.operand,)
    if isinstance(node, Binary):
        return (node.left, node.right)
    if isinstance(node, Conditional):
        return (node.condition, node.if_true, node.if_false)
    return ()


def postorder(root: Node) -> Iterator[Node]:
    """Every node after its children, left to right, without recursion: chains of binary
    operators make trees as deep as they are long."""
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        below = children(node)
        if expanded or not below:
            yield node
        else:
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(below))
