"""The scan of a file's directives, and of each local header where it is included: `#if` guards
followed (`#ifndef NAME` guards NAME), each `#define` remembered (the one the preprocessor keeps
is a knob's default and place), `@tune` on a `#define` made a knob, and `@tune` anywhere else
an error at it."""

from __future__ import annotations

from annotune.annotate.grammar import GrammarError, TuneComment, find_tune_comments
from annotune.annotate.knobs.pragmas import read_pragma
from annotune.annotate.knobs.state import Collector, check_default
from annotune.annotate.macros import Define, define_value, function_like
from annotune.annotate.problem import TunableParam
from annotune.annotate.source import Directive, ParsedSource, SourceFile, TextSpan, Token
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.records import Number

_CONDITIONALS = {"if", "ifdef", "ifndef"}


def scan_file(collector: Collector, source: SourceFile, visited: set[str]) -> None:
    """Read one file's annotations, and each local header where it is included."""
    visited.add(source.path)
    consumed: set[int] = set()
    open_conditions: list[tuple[str, str]] = []  # (kind, guarded name or "")
    for directive in source.directives:
        name = directive.name
        if name in _CONDITIONALS:
            open_conditions.append(_condition(directive))
        elif name in ("elif", "else", "elifdef", "elifndef"):
            if open_conditions:
                open_conditions[-1] = (name, "")
        elif name == "endif":
            if open_conditions:
                open_conditions.pop()
        elif name == "include":
            line = source.location(directive.hash_token.start).line
            header = collector.parsed.includes.get((source.path, line))
            if header is not None and header not in visited:
                scan_file(collector, collector.parsed.file(header), visited)
        elif name == "undef" and directive.words and source.is_active(directive.hash_token.start):
            _forget(collector, directive.words[0].text, source.location(directive.words[0].start))
        elif name == "define":
            define = _define(source, directive, open_conditions)
            if define is not None:
                if define.active and collector.undefined.pop(define.name, None) is not None:
                    collector.defines.pop(define.name, None)  # redefined after an #undef
                _remember(collector, define)
                annotations = _annotations(source, directive, consumed)
                if annotations and define.active:
                    add_define_param(collector, define, annotations)
                elif annotations:  # the preprocessor skips it: resolved once every file is read
                    collector.pending_define_params.append((define, annotations))
            continue
        elif name == "pragma":
            annotations = _annotations(source, directive, consumed)
            read_pragma(collector, source, directive, annotations)
            continue
        _reject_annotations(source, directive, consumed)
    for token in source.tokens:
        if token.kind == "comment" and token.start not in consumed and is_annotation(token):
            raise AnnotuneError(
                "@tune must be on (or on the line just above) a #define or #pragma line",
                source.location_in(token.start, token.text, token.text.index("@tune")),
            )


def _remember(collector: Collector, define: Define) -> None:
    """Keep the definition a tunable's default, place and guard come from: the first one the
    preprocessor keeps, or, until one is seen, the first one written. Third-party code defines
    one macro in several `#if` branches, and only one of them reaches the compiler."""
    known = collector.defines.get(define.name)
    if known is None or (define.active and not known.active):
        collector.defines[define.name] = define


def _forget(collector: Collector, name: str, location: Location) -> None:
    """An `#undef` the preprocessor keeps: a definition after it is the knob's
    (`#define B 4 / #undef B / #define B 8` is 8, as the compiler's read-back judges a macro by
    its last definition); with none after it (a hygienic header's), the one before stays."""
    collector.undefined[name] = location


def _condition(directive: Directive) -> tuple[str, str]:
    """`#ifndef NAME` and `#if !defined(NAME)` guard NAME; other conditions guard nothing."""
    words = [w.text for w in directive.words]
    if directive.name == "ifndef" and words:
        return ("ifndef", words[0])
    if directive.name == "if" and words[:2] == ["!", "defined"]:
        rest = [w for w in words[2:] if w not in ("(", ")")]
        if len(rest) == 1:
            return ("ifndef", rest[0])
    return (directive.name, "")


def is_annotation(token: Token) -> bool:
    body = token.text[2:] if token.text.startswith(("//", "/*")) else token.text
    return body.lstrip(" \t*!/").startswith("@tune")


def _annotations(
    source: SourceFile, directive: Directive, consumed: set[int]
) -> list[tuple[Token, TuneComment]]:
    found = []
    for comment in directive.comments:
        if not is_annotation(comment) or comment.start in consumed:
            continue
        consumed.add(comment.start)
        try:
            parsed = find_tune_comments(comment.text)
        except GrammarError as error:
            raise AnnotuneError(
                error.message, source.location_in(comment.start, comment.text, error.offset)
            ) from None
        found.extend((comment, annotation) for annotation in parsed)
    return found


def _reject_annotations(source: SourceFile, directive: Directive, consumed: set[int]) -> None:
    for comment in directive.comments:
        if is_annotation(comment) and comment.start not in consumed:
            raise AnnotuneError(
                f"@tune on a #{directive.name} line: it belongs on a #define or #pragma line",
                source.location_in(comment.start, comment.text, comment.text.index("@tune")),
            )


def _define(
    source: SourceFile, directive: Directive, open_conditions: list[tuple[str, str]]
) -> Define | None:
    if not directive.words:
        return None
    name_token = directive.words[0]
    values = directive.words[1:]
    span = TextSpan(source.path, values[0].start, values[-1].end) if values else None
    guarded = any(kind == "ifndef" and guard == name_token.text for kind, guard in open_conditions)
    return Define(
        name=name_token.text,
        name_location=source.location(name_token.start),
        value_tokens=values,
        value_span=span,
        guarded=guarded,
        function_like=function_like(directive.words),
        file=source,
        active=source.is_active(name_token.start),
    )


def add_define_param(
    collector: Collector, annotated: Define, annotations: list[tuple[Token, TuneComment]]
) -> None:
    """The annotation gives the domain; the definition the compiler sees (the annotated one
    unless the preprocessor skips it) gives the default, the place and the guard."""
    comment, annotation = annotations[0]
    if annotation.name is not None or len(annotations) > 1:
        at = annotations[1] if annotation.name is None else annotations[0]
        raise AnnotuneError(
            "a #define takes one plain '@tune DOMAIN' (its name is the macro's); "
            "'@tune(NAME)' is for literals inside a pragma",
            annotated.file.location_in(at[0].start, at[0].text, at[1].offset),
        )
    kept = collector.defines[annotated.name]
    define = annotated if annotated.active or not kept.active else kept
    source = define.file
    if define.function_like:
        raise AnnotuneError(
            f"function-like macro '{define.name}' cannot be tuned", define.name_location
        )
    default = define_value(define)
    value_at = (
        source.location(define.value_span.start) if define.value_span else define.name_location
    )
    if default is None:
        raise AnnotuneError(
            f"the value of '{define.name}' must be a number literal to be tuned",
            value_at,
        )
    check_default(define.name, annotation.domain, default, value_at)
    collector.add(
        TunableParam(
            name=define.name,
            values=annotation.domain.values,
            default=default,
            origin="define",
            guarded=define.guarded,
            location=define.name_location,
            domain=annotation.domain.text,
            value_span=define.value_span,
        )
    )


def defined_number(parsed: ParsedSource, name: str) -> Number | None:
    """The number `name` is #defined to in the user's files (the definition the preprocessor
    keeps), None when it is not defined to a number literal: a size's default."""
    collector = Collector(parsed)
    scan_file(collector, parsed.main, visited=set())
    define = collector.defines.get(name)
    return define_value(define) if define is not None and define.active else None
