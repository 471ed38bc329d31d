"""Knobs in pragmas: `#pragma annotune param`, `constraint` and `args`, and `@tune(NAME)` on a
pragma's number literal (`@tune(NAME: clause)` when it has several), each mistake located."""

from __future__ import annotations

import re

from annotune.annotate.grammar import (
    GrammarError,
    ParamPragma,
    TuneComment,
    parse_number,
    parse_param_pragma,
)
from annotune.annotate.grammar.pragma_clauses import clause_literals, clause_of, number_literals
from annotune.annotate.knobs.state import Collector, check_default
from annotune.annotate.macros import define_value
from annotune.annotate.problem import ConstraintDecl, TunableParam
from annotune.annotate.source import Directive, SourceFile, TextSpan, Token, join_continuations
from annotune.core.diagnostics import AnnotuneError

_ANNOTUNE_PRAGMAS = ("param", "constraint", "args", "kernel")


def read_pragma(
    collector: Collector,
    source: SourceFile,
    directive: Directive,
    annotations: list[tuple[Token, TuneComment]],
) -> None:
    words = directive.words
    if words and words[0].text == "annotune":
        if annotations:
            comment, annotation = annotations[0]
            raise AnnotuneError(
                "@tune does not apply to '#pragma annotune' lines",
                source.location_in(comment.start, comment.text, annotation.offset),
            )
        _annotune_pragma(collector, source, directive)
        return
    for comment, annotation in annotations:
        _add_literal_param(collector, source, directive, comment, annotation)


def _annotune_pragma(collector: Collector, source: SourceFile, directive: Directive) -> None:
    words = directive.words
    if len(words) < 2 or words[1].text not in _ANNOTUNE_PRAGMAS:
        at = words[1] if len(words) > 1 else words[0]
        found = f"'{words[1].text}'" if len(words) > 1 else "nothing"
        raise AnnotuneError(
            f"unknown annotune pragma {found} (expected: {', '.join(_ANNOTUNE_PRAGMAS)})",
            source.location(at.start if len(words) > 1 else at.end),
        )
    if len(words) < 3:
        raise AnnotuneError(
            f"'#pragma annotune {words[1].text}' needs an argument", source.location(words[1].end)
        )
    if words[1].text == "kernel":
        return  # read with the kernel's signature by annotate.kernels
    start, end = words[2].start, words[-1].end
    body = join_continuations(source.slice(start, end))
    if words[1].text == "args":
        if collector.program_args is not None:
            raise AnnotuneError(
                "duplicate '#pragma annotune args'", source.location(words[1].start)
            )
        collector.program_args = _program_args(source, words[2:])
        return
    if words[1].text == "constraint":
        body = _without_comments(source, directive.comments, start, end, body)
        collector.constraints.append(ConstraintDecl(body, source.location(start)))
        return
    try:
        pragma = parse_param_pragma(body)
    except GrammarError as error:
        raise AnnotuneError(error.message, source.location_in(start, body, error.offset)) from None
    # Resolved after every file is read: its default may come from a #define seen later.
    collector.pending_pragma_params.append((source, start, body, pragma))


def _program_args(source: SourceFile, words: tuple[Token, ...]) -> list[str]:
    """Arguments as written, split at whitespace; a C string literal is one, without quotes.
    A quote left open (`"abc` to the end of the line) is an error at the quote."""
    args: list[str] = []
    previous_end = -1
    for word in words:
        text = word.text
        if text and text[0] in "\"'" and (len(text) < 2 or text[-1] != text[0]):
            kind = "string" if text[0] == '"' else "character"
            raise AnnotuneError(
                f"unterminated {kind} literal in '#pragma annotune args'",
                source.location(word.start),
                hint="close the quote on the same line",
            )
        if len(text) >= 2 and text[0] == text[-1] == '"':
            text = text[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        if word.start == previous_end and args:
            args[-1] += text
        else:
            args.append(text)
        previous_end = word.end
    return args


def _without_comments(
    source: SourceFile, comments: tuple[Token, ...], start: int, end: int, body: str
) -> str:
    """`body` (the text from byte `start` to `end`) with each comment in it blanked: a space
    per character, its newlines kept, so every other character keeps its offset."""
    inside = [c for c in comments if start <= c.start and c.end <= end]
    if not inside:
        return body
    pieces, at = [], start
    for comment in sorted(inside, key=lambda c: c.start):
        pieces.append(join_continuations(source.slice(at, comment.start)))
        pieces.append(re.sub(r"[^\n]", " ", source.slice(comment.start, comment.end)))
        at = comment.end
    pieces.append(join_continuations(source.slice(at, end)))
    return "".join(pieces)


def add_pragma_param(
    collector: Collector, source: SourceFile, start: int, body: str, pragma: ParamPragma
) -> None:
    location = source.location_in(start, body, pragma.name_offset)
    define = collector.defines.get(pragma.name)
    if pragma.default is not None:
        default = pragma.default
        default_at = source.location_in(start, body, pragma.default_offset)
    elif define is not None and define_value(define) is not None:
        default = define_value(define)
        default_at = define.file.location(define.value_span.start)
    else:
        default = pragma.domain.values[0]
        default_at = location
    check_default(pragma.name, pragma.domain, default, default_at)
    collector.add(
        TunableParam(
            name=pragma.name,
            values=pragma.domain.values,
            default=default,
            origin="pragma",
            guarded=define.guarded if define is not None else True,
            location=location,
            domain=pragma.domain.text,
            value_span=define.value_span if define is not None else None,
        )
    )


def _add_literal_param(
    collector: Collector,
    source: SourceFile,
    directive: Directive,
    comment: Token,
    annotation: TuneComment,
) -> None:
    at = source.location_in(comment.start, comment.text, annotation.offset)
    if annotation.name is None:
        raise AnnotuneError("on a pragma, name the tunable literal: '@tune(NAME) DOMAIN'", at)
    literals = number_literals(directive.words)
    if annotation.clause is not None:
        literals = clause_literals(directive.words, literals, annotation.clause)
        if not literals:
            raise AnnotuneError(f"no number literal after '{annotation.clause}' in this pragma", at)
    if not literals:
        raise AnnotuneError("this pragma has no number literal to tune", at)
    if len(literals) > 1:
        clauses = ", ".join(clause_of(directive.words, i) for i, _ in literals)
        raise AnnotuneError(
            f"this pragma has {len(literals)} number literals ({clauses}); "
            f"say which with '@tune({annotation.name}: clause)'",
            at,
        )
    _, literal = literals[0]
    default = parse_number(literal.text)
    literal_at = source.location(literal.start)
    check_default(annotation.name, annotation.domain, default, literal_at)
    collector.add(
        TunableParam(
            name=annotation.name,
            values=annotation.domain.values,
            default=default,
            origin="literal",
            guarded=False,
            location=literal_at,
            domain=annotation.domain.text,
            value_span=TextSpan(source.path, literal.start, literal.end),
        )
    )
