"""The kernel-clause grammar: a kernel's declaration split into its name, template arguments and
clauses, each clause into its top-level items, every character located.

    #pragma annotune kernel NAME grid(E[, E[, E]]) block(E[, E[, E]]) [shared(E)] args(A, ...)
        [tolerance(R)] [constants(NAME = FILL, ...)]

Clauses may come in any order, each at most once. Code that must not be edited declares its
kernels in its config instead, with the same clauses and grammar, each clause's text a string
(`args` also a list, one string an argument), located in the config (`annotate.config`):

    [[file.kernel]]
    name = "conv2d"
    grid = "(NJ + BLOCK_X - 1) / BLOCK_X, NI / BLOCK_Y"
    block = "BLOCK_X, BLOCK_Y"
    args = ["in(NI * NJ)", "out(NI * NJ)"]

Both become one `Declaration`; what each item says is `kernel_items`'s to read. A mistake is an
AnnotuneError located at the offending character: the text knows where it is written
(`LocatedText`), so this grammar's one error is the located one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from annotune.annotate.source import Directive, SourceFile, join_continuations
from annotune.core.diagnostics import AnnotuneError, Location

CLAUSES = ("grid", "block", "shared", "args", "tolerance", "constants")


@dataclass(frozen=True)
class DeclaredClause:
    """A clause of a kernel declared in a config: `grid`, `block`, `shared` or `args`, and its
    text, each piece where the config writes it (a string; `args` may be a list of them)."""

    name: str
    pieces: tuple[tuple[str, Location], ...]


@dataclass(frozen=True)
class DeclaredKernel:
    """`[[file.kernel]]` of a config: what `#pragma annotune kernel` says, for a source that
    must not be edited. `location`: where its name is written."""

    name: str
    location: Location
    clauses: tuple[DeclaredClause, ...]


def is_kernel_pragma(directive: Directive) -> bool:
    words = directive.words
    return (
        directive.name == "pragma"
        and len(words) >= 2
        and words[0].text == "annotune"
        and words[1].text == "kernel"
    )


@dataclass(frozen=True)
class LocatedText:
    """Text of a declaration and where each character of it is written: in a source (from
    byte `start` of `source`) or in a config (from `base`; a TOML escape is not undone, so a
    column after one is off by its length)."""

    text: str
    source: SourceFile | None = None
    start: int = 0
    base: Location | None = None

    def location(self, offset: int) -> Location:
        if self.source is not None:
            return self.source.location(self.start + len(self.text[:offset].encode()))
        assert self.base is not None
        before = self.text[:offset]
        if "\n" not in before:
            return self.base.shifted(offset)
        line = self.base.line + before.count("\n")
        return Location(self.base.file, line, offset - before.rfind("\n"))


@dataclass(frozen=True)
class Clause:
    name: str
    at: Location  # where the clause is named
    items: tuple[tuple[LocatedText, str, int], ...]  # top-level comma-separated items and offsets


@dataclass(frozen=True)
class Declaration:
    """A kernel's declaration, a pragma's or a config's, split into clauses."""

    name: str
    where: Location
    clauses: Mapping[str, Clause]
    what: str = "kernel pragma"  # for messages
    template: TemplateText | None = None  # `NAME<ARGS>`: a template kernel's instance


@dataclass(frozen=True)
class TemplateText:
    """The `<...>` after a kernel's name: where it opens, its top-level items."""

    at: Location
    items: tuple[tuple[LocatedText, str, int], ...]


_KERNEL_NAME = re.compile(r"\s*([A-Za-z_]\w*)\s*")


def _kernel_name(text: LocatedText, what: str) -> tuple[str, Location, TemplateText | None, int]:
    """`NAME` or `NAME<ARGS>` at the start of `text`: the name, where it is, the template's
    arguments and the offset after it all."""
    match = _KERNEL_NAME.match(text.text)
    if match is None:
        raise AnnotuneError(f"{what} needs the kernel's name", text.location(0))
    end = match.end()
    if text.text[end : end + 1] != "<":
        return match.group(1), text.location(match.start(1)), None, match.end(1)
    items, end = split_items(text, end, "<", ">")
    template = TemplateText(text.location(match.end()), tuple(items))
    return match.group(1), text.location(match.start(1)), template, end


def pragma_declaration(source: SourceFile, directive: Directive) -> Declaration:
    keyword = directive.words[1]
    raw = source.slice(keyword.end, directive.end)
    text = LocatedText(join_continuations(raw), source, keyword.end)
    name, where, template, end = _kernel_name(text, "'#pragma annotune kernel'")
    return Declaration(name, where, _clauses(text, end), template=template)


def config_declaration(kernel: DeclaredKernel) -> Declaration:
    """A config's kernel: each piece of a clause split at its top-level commas, as the text
    between the pragma's parentheses is."""
    clauses = {}
    for clause in kernel.clauses:
        items: list[tuple[LocatedText, str, int]] = []
        for piece, location in clause.pieces:
            text = LocatedText(f"({piece})", base=location.shifted(-1))
            split, end = split_items(text, 0)
            if end != len(text.text):
                raise AnnotuneError("unbalanced ')'", text.location(end - 1))
            if not split:
                raise AnnotuneError(f"empty {clause.name}", location)
            items += split
        at = clause.pieces[0][1] if clause.pieces else kernel.location
        clauses[clause.name] = Clause(clause.name, at, tuple(items))
    name, where, template, end = _kernel_name(
        LocatedText(kernel.name, base=kernel.location), "[[file.kernel]]"
    )
    if kernel.name[end:].strip():
        raise AnnotuneError(
            "a kernel's name is NAME or NAME<TEMPLATE ARGUMENTS>", kernel.location.shifted(end)
        )
    return Declaration(name, where, clauses, "[[file.kernel]]", template)


def _clauses(text: LocatedText, pos: int) -> dict[str, Clause]:
    """`NAME(items)` clauses up to the end of the pragma, each at most once."""
    body = text.text
    clauses: dict[str, Clause] = {}
    word = re.compile(r"\s*([A-Za-z_]\w*)")
    while body[pos:].strip():
        match = word.match(body, pos)
        if match is None:
            at = pos + len(body[pos:]) - len(body[pos:].lstrip())
            raise AnnotuneError(
                f"expected a clause ({', '.join(CLAUSES)}) but found '{body[at]}'",
                text.location(at),
            )
        name, at = match.group(1), match.start(1)
        if name not in CLAUSES:
            raise AnnotuneError(
                f"unknown clause '{name}' (expected: {', '.join(CLAUSES)})", text.location(at)
            )
        if name in clauses:
            raise AnnotuneError(f"duplicate clause '{name}'", text.location(at))
        pos = match.end()
        while pos < len(body) and body[pos].isspace():
            pos += 1
        if pos >= len(body) or body[pos] != "(":
            raise AnnotuneError(f"expected '(' after '{name}'", text.location(pos))
        items, pos = split_items(text, pos)
        clauses[name] = Clause(name, text.location(at), tuple(items))
    return clauses


def split_items(
    text: LocatedText, open_at: int, opening: str = "(", closing: str = ")"
) -> tuple[list[tuple[LocatedText, str, int]], int]:
    """Split `( ... )` (or `< ... >`) at its top-level commas; returns the items and the
    offset after the closing bracket. Brackets of the other kind nest inside: `<` counts
    in a template's arguments (`k<Pair<int, int>, 4>`), as C++ reads them."""
    body = text.text
    depth, start, items = 0, open_at + 1, []
    inner = 0  # parentheses inside a template's arguments
    for pos in range(open_at, len(body)):
        ch = body[pos]
        if opening == "<" and ch in "()":
            inner += 1 if ch == "(" else -1
            continue
        if inner:
            continue
        if ch == opening:
            depth += 1
        elif ch == closing:
            depth -= 1
            if depth == 0:
                items.append((text, body[start:pos], start))
                if len(items) == 1 and not items[0][1].strip():
                    return [], pos + 1
                return items, pos + 1
        elif ch == "," and depth == 1:
            items.append((text, body[start:pos], start))
            start = pos + 1
    raise AnnotuneError(f"unclosed '{opening}'", text.location(open_at))
