"""Launches a config rewrites over knobs (`[[file.launch]]`), in code that must not be edited.

`grid = "(n / 2 + BS - 1) / BS"` and `block = "BS"` for `rotate<<<(n / 2 + 255) / 256, 256>>>`
rewrite both in every variant's copy, so that a block size and the grid computed from it move
together: the coupling a lone literal knob cannot follow. What the code writes there is read
and kept (`Rewrite.written`), and with every knob at its default the config's expressions
must compute what the code computes: token for token, or, where names of the program's own
are in it (`n`), for every value of those names tried (C's integer arithmetic, a few hundred
values). Otherwise the baseline would be another program than the user's, or the vendored
file has changed under the config: either is an error at the config's line, never a rewrite
made blindly.

A knob named alone where the code writes a number (`block = "BS"` over `256`) has that number
as its default; one named only in expressions needs a `default` in the config. Numbers the
rewrite does not reach (`__launch_bounds__(256)`, a `__shared__ float s[256]` of the kernel, a
template argument not rewritten) are the knob's couplings, said by `scan` as a literal knob's.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from annotune.annotate.config import FileConfig
from annotune.annotate.config.records import LaunchTemplate
from annotune.annotate.grammar import parse_number
from annotune.annotate.knobs.c_declarations import code_tokens, declaration_kind, initializer_tokens
from annotune.annotate.knobs.clause_knobs import narrowed
from annotune.annotate.knobs.launch_knobs import kernel_couplings, site_at
from annotune.annotate.knobs.launch_sites import (
    Dim3Declaration,
    Group,
    LaunchSite,
    dim3_declarations,
    launch_sites,
    split_top,
)
from annotune.annotate.knobs.state import Collector
from annotune.annotate.problem import Rewrite, template_names
from annotune.annotate.source import SourceFile, TextSpan, Token
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.records import Number
from annotune.space.expressions import ANY_NAME, ExpressionError, evaluate_with_undefined
from annotune.space.expressions import parse_expression as parse_c

_ARGUMENT_INDEX = {"grid": 0, "block": 1, "shared": 2}
_SAMPLES = 256


@dataclass(frozen=True)
class _Piece:
    """One piece of one launch the config rewrites: the template's argument and text, where
    the config writes it, and what the code writes there (`group`; an absent `shared` is an
    empty group where it would go), with `written` resolved through a `dim3` or constant
    declaration of a name (`block` of `dim3 block(16, 16)`)."""

    argument: str
    index: int
    template: str
    at: Location
    group: Group
    written: tuple[str, ...]  # components (one for a number) as the code computes them


@dataclass(frozen=True)
class FoundLaunch:
    """A `[[file.launch]]` and the launches of the code it names, each with its pieces."""

    template: LaunchTemplate
    sites: tuple[tuple[SourceFile, LaunchSite, tuple[_Piece, ...]], ...]
    declarations: Mapping[str, list[Dim3Declaration]]  # of each file with a site, by path


def find_launches(collector: Collector, config: FileConfig) -> list[FoundLaunch]:
    """The launches each `[[file.launch]]` names; AnnotuneError at its `kernel` when none is
    there (in the files the compiler reads, in the branches it keeps), or at a piece the
    launch does not have (a template for a launch that writes none)."""
    found = []
    files = [(s, code_tokens(s)) for s in collector.parsed.files]
    for template in config.launches:
        place = template.place
        sites = []
        declared: dict[str, list[Dim3Declaration]] = {}
        for source, tokens in files:
            declarations = None
            for site in launch_sites(tokens):
                if place.clause not in (site.kernel, site.kernel.rsplit("::", 1)[-1]):
                    continue
                if not narrowed(collector, source, site.opening.start, site.closing.end, place):
                    continue
                if declarations is None:
                    declarations = declared[source.path] = dim3_declarations(tokens)
                pieces = tuple(
                    _piece(source, tokens, declarations, site, piece) for piece in template.pieces
                )
                sites.append((source, site, pieces))
        if not sites:
            raise AnnotuneError(
                f"no launch of {place.described().removeprefix('the  of a launch of ')} that "
                f"the compiler sees in {collector.parsed.main.path} or its local headers",
                place.location,
                hint="name the kernel as the launch writes it (`ns::k` or `k`), and check "
                "`line` and `function`",
            )
        found.append(FoundLaunch(template, tuple(sites), declared))
    return found


def template_defaults(found: list[FoundLaunch]) -> dict[str, tuple[Number, Location]]:
    """Knobs a template names alone where every launch writes the same number: that number,
    and where the config names it. (`block = "BS"` over `256` makes 256 BS's default.)"""
    seen: dict[str, set[Number]] = {}
    where: dict[str, Location] = {}
    for launch in found:
        for _, _, pieces in launch.sites:
            for piece in pieces:
                name = piece.template.strip()
                if not re.fullmatch(r"[A-Za-z_]\w*", name) or len(piece.written) != 1:
                    continue
                number = _number(piece.written[0])
                if number is not None:
                    seen.setdefault(name, set()).add(number)
                    where.setdefault(name, piece.at)
    return {name: (next(iter(v)), where[name]) for name, v in seen.items() if len(v) == 1}


def add_rewrites(collector: Collector, found: list[FoundLaunch]) -> None:
    """Each launch's pieces as `Rewrite`s of the problem, once each agrees with the code at
    the knobs' defaults; the numbers the rewrites leave behind become the knobs' couplings."""
    knobs = collector.params
    defaults = {name: param.literal(param.default) for name, param in knobs.items()}
    taken = _literal_spans(collector)
    for launch in found:
        for source, site, pieces in launch.sites:
            for piece in pieces:
                names = tuple(
                    n for n in dict.fromkeys(template_names(piece.template)) if n in knobs
                )
                what = _what(piece, site, source)
                if not names and _same(piece.template, piece.written[0]):
                    continue  # `template = ["float", "B"]`: `float` stays as written
                if not names:
                    raise AnnotuneError(
                        f"{piece.argument} names no knob: rewriting {what} with "
                        f"`{piece.template}` would make every variant the same program",
                        piece.at,
                        hint='name a knob of [file.params] in it ("(n + BS - 1) / BS")',
                    )
                span = _span(source, piece)
                for taken_span, name in taken:
                    if (
                        taken_span.file == span.file
                        and taken_span.start < span.end
                        and (span.start < taken_span.end)
                    ):
                        raise AnnotuneError(
                            f"{what} is rewritten twice: by this [[file.launch]] and as the "
                            f"literal of {name}",
                            piece.at,
                            hint=f"drop the place (launch, dim3) of {name}: the launch's "
                            "expression sets it",
                        )
                written = source.data[span.start : span.end].decode(errors="replace")
                rewrite = Rewrite(span, piece.template, names, what, written)
                _check_at_defaults(piece, rewrite, defaults)
                collector.rewrites.append(dataclasses.replace(rewrite, template=_inserted(piece)))
    _add_couplings(collector, found)


def _piece(
    source: SourceFile,
    tokens: list[Token],
    declarations: list[Dim3Declaration],
    site: LaunchSite,
    piece: tuple[str, int, str, Location],
) -> _Piece:
    argument, index, text, at = piece
    if argument == "template":
        if site.template is None:
            raise AnnotuneError(
                f"the launch of {site.kernel} at {site_at(source, site.opening.start)} writes "
                "no template arguments to rewrite",
                at,
            )
        if index >= len(site.template):
            raise AnnotuneError(
                f"the launch of {site.kernel} at {site_at(source, site.opening.start)} has "
                f"{len(site.template)} template argument(s), and the config gives more",
                at,
            )
        group = site.template[index]
        return _Piece(argument, index, text, at, group, (group.text,))
    position = _ARGUMENT_INDEX[argument]
    if position < len(site.config):
        group = site.config[position]
        return _Piece(argument, 0, text, at, group, _resolved(tokens, declarations, site, group))
    end = site.config[-1].end  # `shared` absent: added after the block, where it would go
    return _Piece(argument, 0, text, at, Group((), end, end), ("0",))


def _resolved(
    tokens: list[Token], declarations: list[Dim3Declaration], site: LaunchSite, group: Group
) -> tuple[str, ...]:
    """What a launch argument computes, as components: `dim3(4, 4)` by component, a name of
    a `dim3` declaration (the last before the launch) by that declaration's, a name with one
    declaration of a literal initializer by its value, a name no initializer sets by what the
    statements before the launch set it to (`_assigned`), anything else as written."""
    inline = _dim3_components(group.tokens)
    if inline is not None:
        return inline
    if len(group.tokens) == 1 and group.tokens[0].kind == "identifier":
        name = group.tokens[0].text
        before = [
            d for d in declarations if d.name.text == name and d.name.start < site.opening.start
        ]
        if before and before[-1].components:
            return tuple(c.text for c in before[-1].components)
        values = [
            initializer_tokens(tokens, i)
            for i, t in enumerate(tokens)
            if t.text == name and t.kind == "identifier" and declaration_kind(tokens, i)
        ]
        values = [v for v in values if v is not None]
        if len(values) == 1:
            return (" ".join(t.text for t in values[0]),)
        if not values:
            assigned = _assigned(tokens, name, site.opening.start)
            if assigned is not None:
                return (assigned,)
    return (group.text,)


def _assigned(tokens: list[Token], name: str, before: int) -> str | None:
    """What a name declared without an initializer is set to by statements before `before`
    (`threadsPerBlock = order < 256 ? order : 256;`), when they all say the same: the value
    the launch reads, as an initializer would give it. None when no statement sets it, or
    two set it otherwise (the value then depends on the path taken)."""
    said: set[str] = set()
    for i, token in enumerate(tokens[:-1]):
        if token.start >= before:
            break
        if token.kind != "identifier" or token.text != name or tokens[i + 1].text != "=":
            continue
        if i and tokens[i - 1].text in (".", "->", "::", "="):
            continue  # `x.name = ...`, `a = name = ...`: another thing, or not alone
        end = next((j for j in range(i + 2, len(tokens)) if tokens[j].text == ";"), None)
        if end is None or end == i + 2:
            return None
        said.add(" ".join(t.text for t in tokens[i + 2 : end]))
    return said.pop() if len(said) == 1 else None


def _dim3_components(tokens: tuple[Token, ...]) -> tuple[str, ...] | None:
    if len(tokens) >= 3 and tokens[0].text == "dim3" and tokens[1].text in ("(", "{"):
        inside = split_top(tokens[2:-1], tokens[1].end, tokens[-1].start)
        return tuple(g.text for g in inside)
    return None


def _template_components(text: str) -> tuple[str, ...]:
    """A template's components: those of `dim3(a, b)`, or the one expression."""
    match = re.fullmatch(r"\s*dim3\s*[({](.*)[)}]\s*", text, re.S)
    if match is None:
        return (text,)
    parts, depth, piece = [], 0, ""
    for char in match.group(1):
        depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(piece)
            piece = ""
        else:
            piece += char
    return (*parts, piece)


def _check_at_defaults(piece: _Piece, rewrite: Rewrite, defaults: Mapping[str, str]) -> None:
    """AnnotuneError at the config's piece when, with every knob at its default, it does
    not compute what the code computes there."""
    filled = _template_components(rewrite.text(defaults))
    written = piece.written
    width = max(len(filled), len(written))
    filled = (*filled, *["1"] * (width - len(filled)))
    written = (*written, *["1"] * (width - len(written)))
    for mine, theirs in zip(filled, written, strict=True):
        if not _same(mine, theirs):
            values = ", ".join(f"{n} = {defaults[n]}" for n in rewrite.names)
            raise AnnotuneError(
                f"at the defaults ({values}), {piece.argument} is `{' '.join(mine.split())}`, "
                f"but the code computes `{theirs or 'nothing'}` for {rewrite.what}: the "
                "baseline would not be the program as written",
                piece.at,
                hint="write the expression so that at the knobs' defaults it is what the code "
                "has there (the code may have changed since the config was written)",
            )


def _same(mine: str, theirs: str) -> bool:
    """Whether two C expressions compute the same: the same tokens, or the same value for
    every value tried of the names they use (none of them a knob any more)."""
    if re.sub(r"\s+", "", mine) == re.sub(r"\s+", "", theirs):
        return True
    try:
        left, right = parse_c(mine, ANY_NAME), parse_c(theirs, ANY_NAME)
    except ExpressionError:
        return False
    names = sorted(set(left.names) | set(right.names))
    rng = random.Random(0)
    columns = {
        name: np.array(
            [rng.choice((1, 2, 3, 7, 31, 32, 33, 255, 256, 1000)) for _ in range(_SAMPLES // 2)]
            + [rng.randint(1, 1 << 20) for _ in range(_SAMPLES // 2)],
            dtype=np.int64,
        )
        for name in names
    }
    try:
        a, a_undefined = evaluate_with_undefined(left, columns, rows=_SAMPLES)
        b, b_undefined = evaluate_with_undefined(right, columns, rows=_SAMPLES)
    except ExpressionError:
        return False
    defined = ~(np.asarray(a_undefined) | np.asarray(b_undefined))
    return bool(defined.any()) and bool(np.all(np.asarray(a)[defined] == np.asarray(b)[defined]))


def _add_couplings(collector: Collector, found: list[FoundLaunch]) -> None:
    """A knob's default written again where no rewrite reaches: the kernel's
    `__launch_bounds__` and array bounds, a launch argument or template argument the config
    leaves as it is."""
    rewritten = {(r.span.file, r.span.start) for r in collector.rewrites}
    for name, param in list(collector.params.items()):
        numbers = {param.default, param.default - 1}  # `(n + 255) / 256` repeats a block of 256
        couplings: list[tuple[Location, str]] = list(param.couplings)
        kernels = set()
        for launch in found:
            if not re.search(rf"\b{re.escape(name)}\b", launch.template.names()):
                continue
            for source, site, _ in launch.sites:
                kernels.add(site.kernel.rsplit("::", 1)[-1])
                groups = [("the launch's argument", g) for g in site.config]
                groups += [("a template argument of the launch", g) for g in site.template or ()]
                groups += [
                    (f"`dim3 {d.name.text}` of the launch", component)
                    for g in site.config
                    if len(g.tokens) == 1 and (source.path, g.start) not in rewritten
                    for d in launch.declarations.get(source.path, [])
                    if d.name.text == g.tokens[0].text
                    for component in d.components
                ]
                for what, group in groups:
                    if (source.path, group.start) in rewritten:
                        continue
                    for token in group.tokens:
                        if _number(token.text) in numbers:
                            couplings.append(
                                (source.location(token.start), f"{what} `{group.text}`")
                            )
                            break
        if not kernels:
            continue
        for function in collector.parsed.functions:
            if function.name in kernels:
                source = collector.parsed.file(function.file)
                couplings += kernel_couplings(
                    source, function.start, function.end, {param.default}, set()
                )
        unique = tuple(dict.fromkeys(couplings))
        if unique != param.couplings:
            collector.params[name] = dataclasses.replace(param, couplings=unique)


def _literal_spans(collector: Collector) -> list[tuple[TextSpan, str]]:
    return [
        (span, p.name)
        for p in collector.params.values()
        for span in (p.value_span, *p.more_spans)
        if span is not None
    ]


def _span(source: SourceFile, piece: _Piece) -> TextSpan:
    return TextSpan(source.path, piece.group.start, piece.group.end)


def _inserted(piece: _Piece) -> str:
    """The template as written over the piece: an absent `shared` is added after the block."""
    return f", {piece.template}" if not piece.group.tokens else piece.template


def _what(piece: _Piece, site: LaunchSite, source: SourceFile) -> str:
    argument = (
        piece.argument if piece.argument != "template" else f"template argument {piece.index + 1}"
    )
    return f"the {argument} of the launch of {site.kernel} at {site_at(source, site.opening.start)}"


def _number(text: str) -> Number | None:
    try:
        return parse_number(text)
    except ValueError:
        return None
