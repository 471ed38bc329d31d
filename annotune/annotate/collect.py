"""From the front end's directives and tokens to a checked `Problem`.

Every mistake becomes an AnnotuneError located at the token that caused it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from annotune.annotate.config import ConfigParam, FileConfig
from annotune.annotate.grammar import (
    Domain,
    GrammarError,
    ParamPragma,
    TuneComment,
    find_tune_comments,
    parse_number,
    parse_param_pragma,
)
from annotune.annotate.macros import Define, compiler_value, define_value, function_like
from annotune.annotate.problem import (
    ConstraintDecl,
    Problem,
    RunSettings,
    TunableParam,
    Use,
)
from annotune.annotate.source import Directive, ParsedSource, SourceFile, TextSpan, Token
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.literals import c_literal
from annotune.core.records import Number

_CONDITIONALS = {"if", "ifdef", "ifndef"}
_ANNOTUNE_PRAGMAS = ("param", "constraint", "args", "kernel")
_PRAGMA_FAMILIES = ("omp", "acc")
_RUNTIME_HEADERS = {"omp.h": "omp", "openacc.h": "acc"}


@dataclass
class _Collector:
    parsed: ParsedSource
    params: dict[str, TunableParam] = field(default_factory=dict)
    constraints: list[ConstraintDecl] = field(default_factory=list)
    defines: dict[str, Define] = field(default_factory=dict)
    pending_define_params: list[tuple[Define, list[tuple[Token, TuneComment]]]] = field(
        default_factory=list
    )
    pending_pragma_params: list[tuple[SourceFile, int, str, ParamPragma]] = field(
        default_factory=list
    )  # the pragma's file, where its body starts, the body, what it says
    program_args: list[str] | None = None

    def add(self, param: TunableParam) -> None:
        first = self.params.get(param.name)
        if first is not None:
            where = first.location
            raise AnnotuneError(
                f"duplicate parameter '{param.name}'",
                param.location,
                hint=f"first declared at {where.file}:{where.line}:{where.column}",
            )
        self.params[param.name] = param


def collect(
    parsed: ParsedSource,
    config: FileConfig | None = None,
    fixed: Mapping[str, Number] | None = None,
) -> Problem:
    """Read every annotation of the parsed files into a Problem (parameter uses included).

    `fixed` are problem sizes set for this tune (`annotune tune --sizes`): each becomes a
    parameter of one value, so that it reaches the compiler as a tunable does (`-D`, or the
    rewritten copy when its #define is unguarded) and is part of the study's space."""
    collector = _Collector(parsed)
    _scan_file(collector, parsed.main, visited=set())
    for define, found in collector.pending_define_params:
        known = collector.params.get(define.name)
        if known is None or known.origin != "define":  # else annotated in the kept branch too
            _add_define_param(collector, define, found)
    for args in collector.pending_pragma_params:
        _add_pragma_param(collector, *args)
    if config is not None:
        _add_config(collector, config)
    for name, value in (fixed or {}).items():
        _add_fixed(collector, name, value)
    uses = _uses(parsed, set(collector.params))
    params = tuple(_with_uses(parsed, p, uses[p.name]) for p in collector.params.values())
    return Problem(
        source=Path(parsed.main.path),
        language=parsed.language,
        params=params,
        constraints=tuple(collector.constraints),
        files=tuple(f.path for f in parsed.files),
        config_file=config.config_file if config else None,
        missing_includes=tuple(parsed.missing_local_includes),
        settings=_settings(collector, config),
        timing_header=parsed.timing_header,
        pragmas=_pragma_families(parsed),
    )


def _pragma_families(parsed: ParsedSource) -> frozenset[str]:
    """Which of OpenMP ("omp") and OpenACC ("acc") the user's files use: a `#pragma omp` or
    `#pragma acc` line, or an include of the runtime's header (a program that only calls
    `omp_get_wtime` needs the compiler's flag as much, to link the runtime). Only lines the
    preprocessor keeps count: a `#pragma omp` in a skipped `#ifdef USE_OPENMP` asks for nothing."""
    found: set[str] = set()
    for source in parsed.files:
        for directive in source.directives:
            if not source.is_active(directive.hash_token.start):
                continue
            words = [word.text for word in directive.words]
            if directive.name == "pragma" and words and words[0] in _PRAGMA_FAMILIES:
                found.add(words[0])
            elif directive.name == "include":
                family = _RUNTIME_HEADERS.get("".join(words).strip('<>"'))
                if family is not None:
                    found.add(family)
    return frozenset(found)


def _settings(collector: _Collector, config: FileConfig | None) -> RunSettings:
    """The config's settings; program arguments from the config win over the pragma's."""
    settings = config.settings if config is not None else RunSettings()
    if not settings.args and collector.program_args:
        settings = dataclasses.replace(settings, args=tuple(collector.program_args))
    return settings


def _with_uses(parsed: ParsedSource, param: TunableParam, found: list[Use]) -> TunableParam:
    uses = tuple(found)
    if param.origin == "literal" and param.value_span is not None:
        function = parsed.function_at(param.location.file, param.value_span.start)
        literal_use = Use(
            "pragma",
            param.location,
            function.name if function else None,
            function.is_kernel if function else False,
        )
        uses = (literal_use, *uses)
    return dataclasses.replace(param, uses=uses)


# --- one file ---------------------------------------------------------------------------------


def _scan_file(collector: _Collector, source: SourceFile, visited: set[str]) -> None:
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
                _scan_file(collector, collector.parsed.file(header), visited)
        elif name == "define":
            define = _define(source, directive, open_conditions)
            if define is not None:
                _remember(collector, define)
                annotations = _annotations(source, directive, consumed)
                if annotations and define.active:
                    _add_define_param(collector, define, annotations)
                elif annotations:  # the preprocessor skips it: resolved once every file is read
                    collector.pending_define_params.append((define, annotations))
            continue
        elif name == "pragma":
            annotations = _annotations(source, directive, consumed)
            _pragma(collector, source, directive, annotations)
            continue
        _reject_annotations(source, directive, consumed)
    for token in source.tokens:
        if token.kind == "comment" and token.start not in consumed and is_annotation(token):
            raise AnnotuneError(
                "@tune must be on (or on the line just above) a #define or #pragma line",
                source.location_in(token.start, token.text, token.text.index("@tune")),
            )


def _remember(collector: _Collector, define: Define) -> None:
    """Keep the definition a tunable's default, place and guard come from: the first one the
    preprocessor keeps, or, until one is seen, the first one written. Third-party code defines
    one macro in several `#if` branches, and only one of them reaches the compiler."""
    known = collector.defines.get(define.name)
    if known is None or (define.active and not known.active):
        collector.defines[define.name] = define


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


# --- #define ------------------------------------------------------------------------------------


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


def _add_define_param(
    collector: _Collector, annotated: Define, annotations: list[tuple[Token, TuneComment]]
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
    _check_default(define.name, annotation.domain, default, value_at)
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


def _check_default(name: str, domain: Domain, default: Number, at: Location) -> None:
    if default not in domain.values:
        raise AnnotuneError(
            f"default value {default} of '{name}' is not in its domain {domain.text}", at
        )


# --- #pragma ------------------------------------------------------------------------------------


def _pragma(
    collector: _Collector,
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


def _annotune_pragma(collector: _Collector, source: SourceFile, directive: Directive) -> None:
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
    body = _join_continuations(source.slice(start, end))
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
        pieces.append(_join_continuations(source.slice(at, comment.start)))
        pieces.append(re.sub(r"[^\n]", " ", source.slice(comment.start, comment.end)))
        at = comment.end
    pieces.append(_join_continuations(source.slice(at, end)))
    return "".join(pieces)


def _join_continuations(text: str) -> str:
    """Blank out the backslashes of continued lines; every character keeps its offset."""
    return text.replace("\\\r\n", " \r\n").replace("\\\n", " \n")


def _add_pragma_param(
    collector: _Collector, source: SourceFile, start: int, body: str, pragma: ParamPragma
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
    _check_default(pragma.name, pragma.domain, default, default_at)
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


def _number_literals(words: tuple[Token, ...]) -> list[tuple[int, Token]]:
    found = []
    for index, token in enumerate(words):
        if token.kind != "literal":
            continue
        try:
            parse_number(token.text)
        except ValueError:
            continue
        found.append((index, token))
    return found


def _add_literal_param(
    collector: _Collector,
    source: SourceFile,
    directive: Directive,
    comment: Token,
    annotation: TuneComment,
) -> None:
    at = source.location_in(comment.start, comment.text, annotation.offset)
    if annotation.name is None:
        raise AnnotuneError("on a pragma, name the tunable literal: '@tune(NAME) DOMAIN'", at)
    literals = _number_literals(directive.words)
    if annotation.clause is not None:
        literals = _clause_literals(directive.words, literals, annotation.clause)
        if not literals:
            raise AnnotuneError(f"no number literal after '{annotation.clause}' in this pragma", at)
    if not literals:
        raise AnnotuneError("this pragma has no number literal to tune", at)
    if len(literals) > 1:
        clauses = ", ".join(_clause_of(directive.words, i) for i, _ in literals)
        raise AnnotuneError(
            f"this pragma has {len(literals)} number literals ({clauses}); "
            f"say which with '@tune({annotation.name}: clause)'",
            at,
        )
    _, literal = literals[0]
    default = parse_number(literal.text)
    literal_at = source.location(literal.start)
    _check_default(annotation.name, annotation.domain, default, literal_at)
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


def _clause_literals(
    words: tuple[Token, ...], literals: list[tuple[int, Token]], clause: str
) -> list[tuple[int, Token]]:
    """The literals `@tune(NAME: clause)` can mean, whatever the clause's name.

    Inside `clause(...)`: its first argument when that is a literal (`tile(32, 4)` means 32),
    else any argument, as the chunk of `schedule(dynamic, 16)`; without parentheses, the
    literal right after the word (`unroll 4`).
    """
    inside = [
        (i, token)
        for i, token in literals
        if (at := _enclosing_clause(words, i)) is not None and words[at].text == clause
    ]
    first = [(i, token) for i, token in inside if words[i - 1].text == "("]
    after = [(i, token) for i, token in literals if i >= 1 and words[i - 1].text == clause]
    return first or inside or after


def _enclosing_clause(words: tuple[Token, ...], index: int) -> int | None:
    """The index of the clause name whose parentheses hold word `index` (innermost), if any."""
    depth = 0
    for at in range(index - 1, 0, -1):
        if words[at].text == ")":
            depth += 1
        elif words[at].text == "(":
            if depth == 0:
                return at - 1
            depth -= 1
    return None


def _clause_of(words: tuple[Token, ...], index: int) -> str:
    """How a literal shows in messages: its clause as written (`schedule(dynamic, 16)`)."""
    name = _enclosing_clause(words, index)
    if name is None:
        return words[index].text
    depth, end = 0, name + 1
    for end in range(name + 1, len(words)):
        depth += {"(": 1, ")": -1}.get(words[end].text, 0)
        if depth == 0:
            break
    return "".join(w.text + (" " if w.text == "," else "") for w in words[name : end + 1])


# --- config -------------------------------------------------------------------------------------


def _add_config(collector: _Collector, config: FileConfig) -> None:
    for spec in config.params:
        define = collector.defines.get(spec.name)
        constant = None
        if define is None or not define.active:
            constant = _constant(collector, spec)
        if constant is not None:
            fixed = constant
        elif define is not None and define.active and not define.guarded:
            fixed = _Fixed(
                "#define",
                define.value_tokens,
                define.value_span,
                define.file.location(define.value_span.start)
                if define.value_span
                else define.name_location,
                define.name_location,
                define.function_like,
            )
        else:
            fixed = None
        default = _config_default(collector, spec, define, fixed)
        if fixed is None:  # a fixed definition's value was checked against the domain there
            _check_default(spec.name, spec.domain, default, spec.default_location or spec.location)
            if define is None and not _mentioned(collector, spec.name):
                _not_found(collector, spec, config)
        if fixed is not None:
            guarded, location, span = False, fixed.name_location, fixed.span
        elif define is not None:
            guarded, location, span = define.guarded, define.name_location, define.value_span
        else:
            guarded, location, span = True, spec.location, None
        collector.add(
            TunableParam(
                name=spec.name,
                values=spec.domain.values,
                default=default,
                origin="config",
                guarded=guarded,
                location=location,
                domain=spec.domain.text,
                value_span=span,
                declaration=constant.kind if constant is not None else "",
                more_spans=constant.more_spans if constant is not None else (),
            )
        )
    for expr, location in config.constraints:
        collector.constraints.append(ConstraintDecl(expr, location, origin="config"))


@dataclass(frozen=True)
class _Fixed:
    """A definition every build of the program gets and no `-D` reaches: an unguarded
    `#define` the preprocessor keeps, or a constant's initializer. annotune sets it by
    rewriting `span` in a copy; its value there is the parameter's default."""

    kind: str  # "#define", "constant" or "variable", for messages
    value_tokens: tuple[Token, ...]
    span: TextSpan | None
    value_location: Location
    name_location: Location
    function_like: bool = False
    more_spans: tuple[TextSpan, ...] = ()  # other declarations with the same initial value


def _config_default(
    collector: _Collector, spec: ConfigParam, define: Define | None, fixed: _Fixed | None
) -> Number:
    """A config parameter's default: the value the compiler sees when annotune passes nothing.

    An unguarded `#define` the preprocessor keeps, or a constant, is what every build of the
    program gets, and no `-D` or forced-include header can change it; a config `default` that
    differs would make the baseline (and the header `build` writes) a program the user never
    builds, so it is an error. A guarded or absent definition takes the config's default,
    since `-D` reaches it.
    """
    if fixed is None:
        if spec.default is not None:
            return spec.default
        if define is not None and define_value(define) is not None:
            return define_value(define)
        raise AnnotuneError(
            f"'{spec.name}' is not #defined to a number in {collector.parsed.main.path} "
            "or its local headers; give it a default in the config",
            spec.location,
        )
    what = "unguarded #define" if fixed.kind == "#define" else fixed.kind
    value = None if fixed.function_like else compiler_value(fixed.value_tokens, collector.defines)
    where = fixed.value_location
    at = f"{where.file}:{where.line}:{where.column}"
    if value is None:
        text = " ".join(t.text for t in fixed.value_tokens) or "nothing"
        raise AnnotuneError(
            f"'{spec.name}' is {_article(what)} {what} set to '{text}' at {at}, which annotune "
            "cannot read as a "
            "number: the default the compiler uses is unknown, so no baseline can be measured",
            spec.default_location or spec.location,
            hint=f"a knob that is {_article(what)} {what} needs a number (or an expression of "
            "numbers and macros) as its value",
        )
    if spec.default is not None and spec.default != value:
        raise AnnotuneError(
            f"the config's default of {spec.name} is {c_literal(spec.default)}, but the "
            f"compiler uses {c_literal(value)}: the {what} at {at}, which no -D or header "
            "overrides",
            spec.default_location or spec.location,
            hint=f"drop `default` (the default of {spec.name} is the value its {what} gives, "
            f"{c_literal(value)})"
            + (", or guard the #define with #ifndef in code you own" if define else ""),
        )
    if value not in spec.domain.values:
        raise AnnotuneError(
            f"the default of {spec.name}, {c_literal(value)}, is not in its domain "
            f"{spec.domain.text}: it is the value of the {what} at {at}, which every build "
            "of the program gets",
            spec.location,
            hint=f"add {c_literal(value)} to the domain: the default is the baseline every "
            "configuration is measured against",
        )
    return value


_DECLARATION_ENDS = {";", "{", "}"}
_CLOSING = {")": "(", "]": "[", "}": "{"}


def _code_tokens(source: SourceFile) -> list[Token]:
    """The file's tokens the compiler parses as C: no comments, no preprocessor lines, nothing
    in a skipped `#if` branch."""
    spans = sorted((d.hash_token.start, d.end) for d in source.directives)
    tokens, at = [], 0
    for token in source.tokens:
        while at < len(spans) and spans[at][1] < token.start:
            at += 1
        in_directive = at < len(spans) and spans[at][0] <= token.start
        if token.kind != "comment" and not in_directive and source.is_active(token.start):
            tokens.append(token)
    return tokens


def _constant(collector: _Collector, spec: ConfigParam) -> _Fixed | None:
    """The declaration the config's parameter names, if the code declares it with an
    initializer: a `const`, `constexpr` or `static const` variable, an enumerator with a value,
    or a plain variable (`const int block_size = 256;`, `enum { TILE = 16 };`,
    `unsigned int threads = 256;`, `dim3 blocks (256);`). Real code writes its knobs so, and
    `-D` would replace the name itself; a copy with the initializer rewritten sets it.
    Several declarations of the name are an error: which one is the knob is not clear."""
    found: list[_Fixed] = []
    for source in collector.parsed.files:
        tokens = _code_tokens(source)
        for index, token in enumerate(tokens):
            if token.kind != "identifier" or token.text != spec.name:
                continue
            value = _initializer(tokens, index)
            kind = _declaration_kind(tokens, index) if value is not None else None
            if kind is not None:
                found.append(
                    _Fixed(
                        kind,
                        value,
                        TextSpan(source.path, value[0].start, value[-1].end),
                        source.location(value[0].start),
                        source.location(token.start),
                    )
                )
    if len(found) <= 1:
        return found[0] if found else None
    values = [compiler_value(f.value_tokens, collector.defines) for f in found]
    if None not in values and len(set(values)) == 1:  # one knob written in several places
        first = found[0]
        return dataclasses.replace(first, more_spans=tuple(f.span for f in found[1:]))
    places = ", ".join(
        f"{f.name_location.file}:{f.name_location.line} = {_text(f.value_tokens)}" for f in found
    )
    raise AnnotuneError(
        f"'{spec.name}' is declared {len(found)} times with different initial values "
        f"({places}): annotune cannot tell which one is the knob",
        spec.location,
    )


def _article(noun: str) -> str:
    return "an" if noun[0] in "aeiou" else "a"


def _text(tokens: tuple[Token, ...]) -> str:
    return " ".join(t.text for t in tokens)


def _initializer(tokens: list[Token], index: int) -> tuple[Token, ...] | None:
    """The tokens that initialize the name at `index` (`= 256`, `{256}`, `(256)`), up to the
    `;`, `,` or closing bracket that ends them; None when no initializer follows the name."""
    if index + 1 >= len(tokens) or tokens[index + 1].text not in ("=", "{", "("):
        return None
    opening = tokens[index + 1].text
    depth = 1 if opening != "=" else 0
    value: list[Token] = []
    for token in tokens[index + 2 :]:
        if token.text in ("(", "[", "{"):
            depth += 1
        elif token.text in _CLOSING:
            depth -= 1
            if depth < 0 or (depth == 0 and opening != "="):
                break
        elif depth == 0 and token.text in (";", ","):
            break
        value.append(token)
    else:
        return None
    return tuple(value) or None


_STATEMENT_WORDS = frozenset(
    ("return", "case", "goto", "else", "do", "throw", "delete", "new", "sizeof", "typedef",
     "using", "namespace", "co_return", "co_yield", "if", "while", "for", "switch")
)  # fmt: skip


def _declaration_kind(tokens: list[Token], index: int) -> str | None:
    """What the name at `index` is declared as there: "constant" (an enumerator, or a
    declaration that says `const` or `constexpr`), "variable" (a plain declaration, `int n = 4`
    or `dim3 blocks (256)`), or None (an assignment, a pointer, a reference, a typedef, a
    function parameter). The declaration starts after the `;`, `{` or `}` before it."""
    depth, at = 0, index - 1
    while at >= 0:
        text = tokens[at].text
        if text in (")", "]"):  # a group inside the declaration (`int a[4], n = 2`)
            depth += 1
        elif text in ("(", "[") and depth:
            depth -= 1
        elif text in _DECLARATION_ENDS or text in ("(", "["):
            break
        at -= 1
    stop = tokens[at].text if at >= 0 else ";"
    declaration = tokens[at + 1 : index]
    words = [t.text for t in declaration]
    previous = tokens[index - 1].text if index else ""
    if stop == "{" and previous in ("{", ",") and _opens_enum(tokens, at):
        return "constant"  # an enumerator: `enum { A = 1, B = 2 }`
    if stop in ("(", "[") or previous in ("*", "&", "&&", "::", ".", "->"):
        return None
    if not declaration or declaration[0].kind not in ("identifier", "keyword"):
        return None
    if _STATEMENT_WORDS & set(words) or (previous != "," and not _specifiers(declaration)):
        return None
    return "constant" if {"const", "constexpr"} & set(words) else "variable"


def _specifiers(declaration: list[Token]) -> bool:
    """Whether the tokens before a first declarator's name are a type and its specifiers
    (`static const unsigned int`, `dim3`, `std::size_t`): names and keywords, `::` between."""
    return all(t.kind in ("identifier", "keyword") or t.text == "::" for t in declaration)


def _opens_enum(tokens: list[Token], brace: int) -> bool:
    """Whether the `{` at `brace` opens an enum's body (`enum`, `enum class E : int`)."""
    at = brace - 1
    while at >= 0 and tokens[at].text not in _DECLARATION_ENDS | {")"}:
        if tokens[at].text == "enum":
            return True
        at -= 1
    return False


def _mentioned(collector: _Collector, name: str) -> bool:
    """Whether any of the user's files names `name`, in code or a directive, kept or skipped."""
    return any(
        token.kind == "identifier" and token.text == name
        for source in collector.parsed.files
        for token in source.tokens
    )


def _not_found(collector: _Collector, spec: ConfigParam, config: FileConfig) -> None:
    """AnnotuneError for a config parameter nothing can set: no macro, no constant, no use in
    the user's files and no `{NAME}` in an env value. A -D for it would change nothing, and
    every configuration would be the same program."""
    named = any(f"{{{spec.name}}}" in setting.value for setting in config.settings.env)
    if named or _in_kernel_declarations(spec.name, config):
        return
    raise AnnotuneError(
        f"'{spec.name}' is neither a macro, a constant, nor a name the code uses in "
        f"{collector.parsed.main.path} or its local headers, and no [file.env] value names "
        f"{{{spec.name}}}: no configuration would change the program",
        spec.location,
        hint="name a #define, a const/constexpr variable or an enumerator of the source, or "
        f'use it in the environment (OMP_NUM_THREADS = "{{{spec.name}}}")',
    )


def _in_kernel_declarations(name: str, config: FileConfig) -> bool:
    """Whether a `[[file.kernel]]` of the config names `name`: a knob kernel mode gives the
    kernel only through its declaration (`block_sum<float, BT>`, `block(BT)`), which reaches
    no program (`annotate.problem.kernel_only_params`)."""
    word = re.compile(rf"\b{re.escape(name)}\b")
    return any(
        word.search(text)
        for kernel in config.kernels
        for text in (kernel.name, *(piece for c in kernel.clauses for piece, _ in c.pieces))
    )


def defined_number(parsed: ParsedSource, name: str) -> Number | None:
    """The number `name` is #defined to in the user's files (the definition the preprocessor
    keeps), None when it is not defined to a number literal: a size's default."""
    collector = _Collector(parsed)
    _scan_file(collector, parsed.main, visited=set())
    define = collector.defines.get(name)
    return define_value(define) if define is not None and define.active else None


def _add_fixed(collector: _Collector, name: str, value: Number) -> None:
    known = collector.params.get(name)
    if known is not None:
        raise AnnotuneError(
            f"'{name}' is a tuned parameter; a problem size is a macro or program argument "
            "that is not tuned",
            known.location,
        )
    define = collector.defines.get(name)
    if define is not None and not define.active:
        # Only in a skipped branch (PolyBench's dataset sizes once -DNJ is given): the
        # compiler sees no definition, so the size is given as -D, never by rewriting it.
        define = None
    if define is not None and define.function_like:
        raise AnnotuneError(
            f"'{name}' is a function-like macro, not a problem size", define.name_location
        )
    text = c_literal(value)
    collector.add(
        TunableParam(
            name=name,
            values=(value,),
            default=value,
            origin="size",
            guarded=define.guarded if define is not None else True,
            location=define.name_location
            if define is not None
            else Location(collector.parsed.main.path, 1, 1),
            domain=f"values({text})",
            value_span=define.value_span if define is not None else None,
        )
    )


# --- uses ---------------------------------------------------------------------------------------


def _uses(parsed: ParsedSource, names: set[str]) -> dict[str, list[Use]]:
    """Every use of every parameter, in one pass over the tokens of the user's files."""
    uses: dict[str, list[Use]] = {name: [] for name in names}
    for source in parsed.files:
        spans = sorted((d.hash_token.start, d.end, d) for d in source.directives)
        launch_depth = 0
        statement_is_dim3 = False
        span_index = 0
        for token in source.tokens:
            while span_index < len(spans) and spans[span_index][1] < token.start:
                span_index += 1
            in_directive = (
                spans[span_index][2]
                if span_index < len(spans) and spans[span_index][0] <= token.start
                else None
            )
            if in_directive is not None:
                if token.kind == "identifier" and token.text in uses:
                    use = _directive_use(source, in_directive, token)
                    if use is not None:
                        uses[token.text].append(use)
                continue
            if token.kind == "punctuation":
                if token.text == "<<<":
                    launch_depth += 1
                elif token.text == ">>>":
                    launch_depth = max(0, launch_depth - 1)
                elif token.text in (";", "{", "}"):
                    statement_is_dim3 = False
                continue
            if token.kind == "identifier" and token.text == "dim3":
                statement_is_dim3 = True
            if token.kind == "identifier" and token.text in uses:
                function = parsed.function_at(source.path, token.start)
                kind = "launch" if launch_depth or statement_is_dim3 else "code"
                uses[token.text].append(
                    Use(
                        kind,
                        source.location(token.start),
                        function.name if function else None,
                        function.is_kernel if function else False,
                    )
                )
    return uses


def _directive_use(source: SourceFile, directive: Directive, token: Token) -> Use | None:
    words = directive.words
    location = source.location(token.start)
    if directive.name == "define":
        if words and words[0].start == token.start:
            return None  # the definition itself
        return Use("macro", location, detail=words[0].text if words else "")
    if directive.name in ("ifndef", "ifdef", "undef", "include"):
        return None
    if directive.name in ("if", "elif"):
        index = words.index(token)
        previous = [w.text for w in words[max(0, index - 2) : index]]
        if "defined" in previous:
            return None
        return Use("preprocessor", location)
    if directive.name == "pragma":
        if words and words[0].text == "annotune":
            return None
        return Use("pragma", location)
    return None
