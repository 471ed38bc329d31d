"""The parser: operator precedence with explicit stacks, then the types and names checked.

Operands wait on one stack, operators and open brackets on another, so nesting costs list
entries, never Python frames; `MAX_DEPTH` bounds how deep they may nest.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

from annotune.space.expressions.errors import ExpressionError
from annotune.space.expressions.nodes import (
    INTEGER_ONLY,
    Binary,
    Conditional,
    Expression,
    Literal,
    Name,
    Node,
    Unary,
    postorder,
)
from annotune.space.expressions.tokens import Token, clip, syntax_error, tokenize

MAX_DEPTH = 200
"""Most parentheses, unary operators and `?:` an expression may nest inside one another. Real
constraints nest a handful; the bound keeps the columns a hostile one holds at once while it is
evaluated (`Expression.width`) small. Chains such as `a + b + ... + z` do not nest."""

RESERVED_NAMES = frozenset({"min", "max", "true", "false"})
"""Words that constraints use themselves, so no parameter can be called that."""


class _AnyName:
    def __contains__(self, name: object) -> bool:
        return True


ANY_NAME: Container[str] = _AnyName()
"""Every name, for `parse_expression`: syntax is checked, and the caller checks the names after,
each with its own message (a kernel's clause, a macro's body)."""

_PRECEDENCE = {
    "||": 1, "&&": 2, "|": 3, "^": 4, "&": 5,
    "==": 6, "!=": 6, "<": 7, "<=": 7, ">": 7, ">=": 7,
    "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10,
}  # fmt: skip
_UNARY_PRECEDENCE = 11
_UNARY = frozenset({"+", "-", "!", "~"})
_EXPECTED = {"(": "')'", "call": "',' or ')'", "?": "':'"}


@dataclass
class _Frame:
    """An operator or bracket read but not yet applied.

    kind: "binary", "unary", "(", "call" (min/max, `token` is the name), "?" (a conditional
    reading its middle operand) or ":" (one waiting for its last operand).
    """

    kind: str
    token: Token
    arguments: int = 1  # of a call, so far

    def binding(self) -> int:
        """How tightly the frame holds the operand on top of the stack; -1 for brackets, which
        only their closing token applies. `?:` is right-associative, so ':' binds loosest."""
        if self.kind == "binary":
            return _PRECEDENCE[self.token.text]
        return {"unary": _UNARY_PRECEDENCE, ":": 0}.get(self.kind, -1)


class _Parser:
    def __init__(self, text: str):
        self._tokens = tokenize(text)
        self._next = next(self._tokens)
        self._operands: list[Node] = []
        self._frames: list[_Frame] = []
        self._depth = 0  # open frames that nest: all but binary operators

    def parse(self) -> Node:
        if self._next.kind == "end":
            raise syntax_error("empty expression", 0)
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

    def _advance(self) -> Token:
        token = self._next
        if token.kind != "end":
            self._next = next(self._tokens)
        return token

    def _operand(self, token: Token) -> bool:
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

    def _name(self, token: Token) -> bool:
        call = self._next.kind == "op" and self._next.text == "("
        if token.text in ("min", "max"):
            if not call:
                raise syntax_error(f"expected '(' after '{token.text}'", self._next.offset)
            self._open(_Frame("call", token), self._advance().offset)
            return True
        if call:
            raise syntax_error("calls are not allowed (only min and max)", token.offset)
        if token.text in ("true", "false"):
            self._operands.append(Literal(int(token.text == "true"), token.offset))
        else:
            self._operands.append(Name(token.text, token.offset))
        return False

    def _operator(self, token: Token) -> bool:
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
            raise syntax_error(f"expression is nested more than {MAX_DEPTH} deep", at)
        self._depth += 1
        self._frames.append(frame)

    def _close(self, frame: _Frame) -> None:
        """A closing ')': a group leaves its operand as it is; a call takes its two."""
        self._depth -= 1
        if frame.kind == "call":
            if frame.arguments != 2:
                raise syntax_error(
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


def _unexpected(token: Token, expected: str = "") -> ExpressionError:
    if expected:
        found = "the end" if token.kind == "end" else f"'{token.text}'"
        return syntax_error(f"expected {expected} but found {found}", token.offset)
    if token.kind == "end":
        return syntax_error("unexpected end of expression", token.offset)
    if token.text == ",":
        return syntax_error("the comma operator is not allowed", token.offset)
    return syntax_error(f"unexpected '{clip(token.text)}'", token.offset)


def _misplaced(token: Token, innermost: str) -> ExpressionError:
    """A token that cannot follow a complete operand: what the innermost open bracket (or
    `?`) waits for decides the message."""
    return _unexpected(token, _EXPECTED.get(innermost, ""))


def _check_types(root: Node) -> int:
    """Reject `%`, shifts and bitwise operators on floating-point constants, left to right;
    return the tree's width (see `Expression`)."""
    results: list[tuple[bool, int]] = []  # (floating-point whatever the parameters, width)
    for node in postorder(root):
        if isinstance(node, Literal | Name):
            results.append((isinstance(node, Literal) and isinstance(node.value, float), 1))
        elif isinstance(node, Unary):
            is_float, width = results.pop()
            if is_float and node.op == "~":
                raise _float_operand_error(node.op, node.offset)
            results.append((is_float and node.op in ("+", "-"), width))
        elif isinstance(node, Binary):
            (right, right_width), (left, left_width) = results.pop(), results.pop()
            if (left or right) and node.op in INTEGER_ONLY:
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


def parse_expression(text: str, names: Container[str]) -> Expression:
    """Parse the C expression `text`, whose identifiers must all be among `names`.

    Raises ExpressionError with the offset of the offending token. Syntax is checked before
    types and names, so `os.system(1)` is a syntax error rather than an unknown parameter.
    `names` is searched once per identifier: give a set or a dict for many parameters.
    """
    root = _Parser(text).parse()
    width = _check_types(root)
    used = [node for node in postorder(root) if isinstance(node, Name)]
    for name in used:
        if name.name not in names:
            raise ExpressionError(f"unknown parameter '{name.name}' in constraint", name.offset)
    return Expression(text, root, tuple(dict.fromkeys(name.name for name in used)), width)
