"""Where real CUDA code writes its launch sizes: kernel launches (`k<<<g, b>>>`, template
arguments and all) and `dim3` declarations (`dim3 block (16, 16);`), found in the tokens the
compiler parses. Each piece is a `Group`: tokens and the bytes they span, so that a variant
can write a configuration's value over exactly those bytes.

Nothing here knows of knobs: it answers "what does the code write where", and the config's
forms (`launch_knobs`) decide which of it a knob names."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from annotune.annotate.source import Token

_OPENING = {"(": ")", "[": "]", "{": "}"}
_CLOSING = {")", "]", "}"}


@dataclass(frozen=True)
class Group:
    """Tokens of one piece of code (an argument, a component, a clause's value) and the bytes
    [start, end) they span; `start == end` marks where an absent piece would go."""

    tokens: tuple[Token, ...]
    start: int
    end: int

    @property
    def text(self) -> str:
        return " ".join(t.text for t in self.tokens)


@dataclass(frozen=True)
class LaunchSite:
    """`kernel<targs><<<config>>>(...)`: the kernel's name as written (`ns::k`), its template
    arguments (None: none written), the launch's arguments (grid, block, shared, stream: 2 to
    4 groups), and the `<<<` and `>>>` tokens."""

    kernel: str
    name: Token
    template: tuple[Group, ...] | None
    template_span: tuple[int, int] | None  # the bytes between `<` and `>`
    config: tuple[Group, ...]
    opening: Token
    closing: Token


@dataclass(frozen=True)
class Dim3Declaration:
    """One declarator of a `dim3` declaration (`dim3 block (16, 16), grid;`): the variable, its
    components as written (none for `dim3 g;`), and the bytes between the brackets, where an
    added component would go."""

    name: Token
    components: tuple[Group, ...]
    inside: tuple[int, int] | None  # (start, end) between the brackets; None: no initializer


def split_top(tokens: Sequence[Token], start: int, end: int) -> tuple[Group, ...]:
    """`tokens` (the bytes [start, end) of a bracketed list) split at the commas outside any
    bracket; an empty list gives no group."""
    groups: list[Group] = []
    piece: list[Token] = []
    depth = 0
    piece_start = start
    for token in tokens:
        if token.text in _OPENING:
            depth += 1
        elif token.text in _CLOSING:
            depth -= 1
        elif token.text == "," and depth == 0:
            groups.append(_group(piece, piece_start, token.start))
            piece, piece_start = [], token.end
            continue
        piece.append(token)
    if piece or groups:
        groups.append(_group(piece, piece_start, end))
    return tuple(groups)


def _group(tokens: list[Token], start: int, end: int) -> Group:
    if not tokens:
        return Group((), start, start)
    return Group(tuple(tokens), tokens[0].start, tokens[-1].end)


def _matching(tokens: Sequence[Token], at: int) -> int | None:
    """The index of the bracket that closes the one at `at`; None when the file ends first."""
    depth = 0
    for index in range(at, len(tokens)):
        text = tokens[index].text
        if text in _OPENING:
            depth += 1
        elif text in _CLOSING:
            depth -= 1
            if depth == 0:
                return index
    return None


def launch_sites(tokens: Sequence[Token]) -> list[LaunchSite]:
    """Every `<<<...>>>` launch in `tokens` (a file's code tokens, in order)."""
    sites = []
    for index, token in enumerate(tokens):
        if token.text != "<<<":
            continue
        close = _launch_end(tokens, index)
        if close is None:
            continue
        template, template_span, name_at = _template_before(tokens, index)
        if name_at is None or tokens[name_at].kind != "identifier":
            continue
        inside = tokens[index + 1 : close]
        config = split_top(inside, token.end, tokens[close].start)
        sites.append(
            LaunchSite(
                _qualified(tokens, name_at),
                tokens[name_at],
                template,
                template_span,
                config,
                token,
                tokens[close],
            )
        )
    return sites


def _launch_end(tokens: Sequence[Token], opening: int) -> int | None:
    depth = 0
    for index in range(opening + 1, len(tokens)):
        text = tokens[index].text
        if text in _OPENING:
            depth += 1
        elif text in _CLOSING:
            depth -= 1
        elif text == ">>>" and depth == 0:
            return index
        elif text in (";", "<<<") and depth == 0:
            return None
    return None


def _template_before(
    tokens: Sequence[Token], opening: int
) -> tuple[tuple[Group, ...] | None, tuple[int, int] | None, int | None]:
    """The template arguments written before the `<<<` at `opening` and the index of the
    kernel's name: `k<float, 8><<<` gives the two groups and the index of `k`."""
    before = opening - 1
    if before < 0:
        return None, None, None
    if tokens[before].text not in (">", ">>"):
        return None, None, before
    depth, at = 0, before
    while at >= 0:
        text = tokens[at].text
        if text in (">", ">>"):
            depth += len(text)
        elif text == "<":
            depth -= 1
            if depth == 0:
                break
        elif text in (";", "{", "}"):
            return None, None, None
        at -= 1
    if at <= 0:
        return None, None, None
    last = tokens[before]
    end = last.start if last.text == ">" else last.start  # `>>` closes an inner one too
    inner = tokens[at + 1 : before] if last.text == ">" else tokens[at + 1 : before + 1]
    if last.text == ">>":  # keep the inner template's `>` inside the group, drop ours
        end = last.start + 1
    groups = split_top(inner, tokens[at].end, end)
    return groups, (tokens[at].end, end), at - 1


def _qualified(tokens: Sequence[Token], at: int) -> str:
    parts = [tokens[at].text]
    while at >= 2 and tokens[at - 1].text == "::" and tokens[at - 2].kind == "identifier":
        parts.insert(0, tokens[at - 2].text)
        at -= 2
    return "::".join(parts)


def dim3_declarations(tokens: Sequence[Token]) -> list[Dim3Declaration]:
    """Every declarator of every `dim3` declaration in `tokens`."""
    found = []
    for index, token in enumerate(tokens):
        if token.text != "dim3" or index + 1 >= len(tokens):
            continue
        previous = tokens[index - 1].text if index else ";"
        if previous not in (";", "{", "}", ")", "const", "static", "constexpr", ":"):
            continue  # `dim3(...)` in an expression, a cast, a parameter's type
        at = index + 1
        while at < len(tokens) and tokens[at].kind == "identifier":
            declarator, at = _dim3_declarator(tokens, at)
            if declarator is None:
                break
            found.append(declarator)
            if at >= len(tokens) or tokens[at].text != ",":
                break
            at += 1
    return found


def _dim3_declarator(tokens: Sequence[Token], at: int) -> tuple[Dim3Declaration | None, int]:
    name = tokens[at]
    following = tokens[at + 1].text if at + 1 < len(tokens) else ";"
    if following in (";", ","):
        return Dim3Declaration(name, (), None), at + 1
    if following in ("(", "{"):
        return _bracketed(tokens, name, at + 1)
    if following == "=" and at + 2 < len(tokens):
        value = at + 2
        if tokens[value].text == "dim3" and value + 1 < len(tokens):
            return _bracketed(tokens, name, value + 1)
        if tokens[value].text == "{":
            return _bracketed(tokens, name, value)
        end = value
        depth = 0
        while end < len(tokens):
            text = tokens[end].text
            if text in _OPENING:
                depth += 1
            elif text in _CLOSING:
                depth -= 1
            elif depth == 0 and text in (";", ","):
                break
            end += 1
        pieces = tokens[value:end]
        if not pieces:
            return None, end
        group = Group(tuple(pieces), pieces[0].start, pieces[-1].end)
        return Dim3Declaration(name, (group,), None), end
    return None, at + 1


def _bracketed(
    tokens: Sequence[Token], name: Token, opening: int
) -> tuple[Dim3Declaration | None, int]:
    if tokens[opening].text not in ("(", "{"):
        return None, opening
    close = _matching(tokens, opening)
    if close is None:
        return None, len(tokens)
    start, end = tokens[opening].end, tokens[close].start
    groups = split_top(tokens[opening + 1 : close], start, end)
    return Dim3Declaration(name, groups, (start, end)), close + 1
