"""Knobs a config names in the pragma clauses of code that must not be edited.

`TL = { domain = "...", clause = "thread_limit" }` is every `thread_limit(N)` literal of the
source and its local headers that the compiler sees (`line` or `function` narrow it to one
pragma's): each is rewritten in a copy, as an annotated pragma literal is, and its number is
the knob's default, since it is what every build of the program has. Every place the knob
stands for must say the same number, or which one the baseline is would be a guess; a clause
written with a name (`thread_limit(nthreads)`) is no literal, and is said as such.
"""

from __future__ import annotations

import os

from annotune.annotate.config import ClausePlace, ConfigParam
from annotune.annotate.grammar import clause_literals, number_literals, parse_number
from annotune.annotate.knobs.state import Collector, check_default
from annotune.annotate.problem import TunableParam
from annotune.annotate.source import Directive, SourceFile, TextSpan, Token
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.literals import c_literal


def add_clause_knob(collector: Collector, spec: ConfigParam, place: ClausePlace) -> None:
    """The config's knob `spec` as the literals of `place`'s clause (AnnotuneError, at the
    config's `clause`, when there is none, one is no literal, or they differ)."""
    found, unnamed, skipped = _places(collector, place)
    if unnamed and (not found or place.line is None):
        source, directive = unnamed[0]
        written = _written(directive.words, place.clause)
        raise AnnotuneError(
            f"{spec.name}: the `{place.clause}` clause at {_at(source, directive)} is "
            f"`{written}`, no number literal to rewrite",
            place.location,
            hint="a name there is a knob of its own: tune that constant or variable by its "
            "name, or narrow this one to a pragma with a literal with `line` or `function`",
        )
    if not found:
        also = ""
        if skipped:
            also = f" (the one at {skipped[0]} is in an #if branch the compiler skips)"
        raise AnnotuneError(
            f"{spec.name}: no pragma in {collector.parsed.main.path} or its local headers has "
            f"{place.described()} with a number literal{also}",
            place.location,
        )
    add_literal_knob(collector, spec, place, found)


def add_literal_knob(
    collector: Collector,
    spec: ConfigParam,
    place: ClausePlace,
    found: list[tuple[SourceFile, Token]],
    couplings: tuple[tuple[Location, str], ...] = (),
) -> None:
    """The config's knob `spec` as the number literals `found` (at least one): their number
    is its default, and they must all say the same."""
    values = {(source.path, literal.start): parse_number(literal.text) for source, literal in found}
    first_source, first = found[0]
    default = values[(first_source.path, first.start)]
    for source, literal in found[1:]:
        value = values[(source.path, literal.start)]
        if value != default:
            raise AnnotuneError(
                f"{spec.name} stands for {len(found)} literals that differ: "
                f"{c_literal(default)} at {_literal_at(first_source, first)}, {c_literal(value)} "
                f"at {_literal_at(source, literal)}: which is the baseline?",
                place.location,
                hint="name one pragma with `line` (or `function`), and another knob for the other",
            )
    literal_at = first_source.location(first.start)
    if spec.default is not None and spec.default != default:
        raise AnnotuneError(
            f"the config's default of {spec.name} is {c_literal(spec.default)}, but the "
            f"program has {c_literal(default)}: the literal at "
            f"{_literal_at(first_source, first)}, which every build of it gets",
            spec.default_location or spec.location,
            hint=f"drop `default` (the default of {spec.name} is the literal's value)",
        )
    check_default(spec.name, spec.domain, default, literal_at)
    spans = [TextSpan(source.path, literal.start, literal.end) for source, literal in found]
    collector.add(
        TunableParam(
            name=spec.name,
            values=spec.domain.values,
            default=default,
            origin="literal",
            guarded=False,
            location=literal_at,
            domain=spec.domain.text,
            value_span=spans[0],
            declaration=_declaration(place),
            more_spans=tuple(spans[1:]),
            couplings=couplings,
        )
    )


def _declaration(place: ClausePlace) -> str:
    """What the literal is, as the header and `scan` say it: "thread_limit clause", "launch
    argument", "dim3 component"."""
    return {"clause": f"{place.clause} clause", "launch": "launch argument"}.get(
        place.kind, "dim3 component"
    )


def _places(
    collector: Collector, place: ClausePlace
) -> tuple[list[tuple[SourceFile, Token]], list[tuple[SourceFile, Directive]], list[str]]:
    """The literals of `place`'s clause in the pragmas the compiler sees (narrowed by its line
    and function), the pragmas whose clause holds no literal, and where the clause is in a
    skipped `#if` branch."""
    found: list[tuple[SourceFile, Token]] = []
    unnamed: list[tuple[SourceFile, Directive]] = []
    skipped: list[str] = []
    parsed = collector.parsed
    for source in parsed.files:
        for directive in source.directives:
            words = directive.words
            if directive.name != "pragma" or not words or words[0].text == "annotune":
                continue
            if _clause_index(words, place.clause) is None or not narrowed(
                collector, source, directive.hash_token.start, directive.end, place
            ):
                continue
            if not source.is_active(directive.hash_token.start):
                skipped.append(_at(source, directive))
                continue
            literals = clause_literals(words, number_literals(words), place.clause)
            if literals:
                found += [(source, token) for _, token in literals[:1]]
            else:
                unnamed.append((source, directive))
    return found, unnamed, skipped


def narrowed(
    collector: Collector, source: SourceFile, start: int, end: int, place: ClausePlace
) -> bool:
    """Whether the code at bytes [start, end) of `source` is on `place`'s line (of its file)
    and in its function."""
    if place.line is not None:
        wanted = place.file or collector.parsed.main.path
        if os.path.realpath(source.path) != os.path.realpath(wanted):
            return False
        first = source.location(start).line
        last = source.location(max(start, end - 1)).line
        if not first <= place.line <= last:
            return False
    if place.function is not None:
        function = collector.parsed.function_at(source.path, start)
        if function is None or function.name != place.function:
            return False
    return True


def _clause_index(words: tuple[Token, ...], clause: str) -> int | None:
    """The index of the clause's name among the pragma's words (`GCC unroll` too)."""
    return next((i for i, word in enumerate(words) if word.text == clause), None)


def _written(words: tuple[Token, ...], clause: str) -> str:
    """The clause as written, its parentheses included (`thread_limit(nthreads)`)."""
    start = _clause_index(words, clause) or 0
    depth, end = 0, start
    for end in range(start + 1, len(words)):
        depth += {"(": 1, ")": -1}.get(words[end].text, 0)
        if depth <= 0:
            break
    if end == start + 1 and words[end].text != "(":
        return " ".join(w.text for w in words[start : end + 1])
    return "".join(w.text for w in words[start : end + 1])


def _at(source: SourceFile, directive: Directive) -> str:
    location = source.location(directive.hash_token.start)
    return f"{location.file}:{location.line}"


def _literal_at(source: SourceFile, literal: Token) -> str:
    location: Location = source.location(literal.start)
    return f"{location.file}:{location.line}:{location.column}"
