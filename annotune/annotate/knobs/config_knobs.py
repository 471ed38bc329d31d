"""Knobs a config declares for code that must not be edited: each found as the compiler sees it
(a `#define`, a C constant's initializer, or nothing: `-D` reaches a guarded or absent one),
its default the value every build of the program gets."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass

from annotune.annotate.config import ConfigParam, FileConfig
from annotune.annotate.grammar import parse_number
from annotune.annotate.knobs.added_clauses import add_clause
from annotune.annotate.knobs.c_declarations import (
    code_tokens,
    declaration_kind,
    initializer_tokens,
    name_role,
)
from annotune.annotate.knobs.clause_knobs import add_clause_knob
from annotune.annotate.knobs.launch_knobs import add_launch_knob
from annotune.annotate.knobs.launch_templates import add_rewrites, find_launches, template_defaults
from annotune.annotate.knobs.state import Collector, check_default
from annotune.annotate.macros import Define, compiler_value, define_value
from annotune.annotate.problem import ConstraintDecl, TunableParam
from annotune.annotate.source import SourceFile, TextSpan, Token
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.literals import c_literal, placeholders
from annotune.core.records import Number


def add_config(collector: Collector, config: FileConfig) -> None:
    launches = find_launches(collector, config)
    inferred = template_defaults(launches)
    for spec in config.params:
        if _defaults_from_launch(collector, spec, inferred):
            value, at = inferred[spec.name]  # `block = "BS"` over `256`: the code's number
            spec = dataclasses.replace(spec, default=value, default_location=at)
        if spec.clause is not None:
            if spec.add:
                add_clause(collector, spec, spec.clause)
            elif spec.clause.kind == "clause":
                add_clause_knob(collector, spec, spec.clause)
            else:
                add_launch_knob(collector, spec, spec.clause)
            continue
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
        if fixed is None and (define is None or not define.active):
            _refuse_declared(collector, spec)  # what it would be given: -D, on every use
        default = _config_default(collector, spec, define, fixed, command_value(config, spec.name))
        if fixed is None:  # a fixed definition's value was checked against the domain there
            check_default(spec.name, spec.domain, default, spec.default_location or spec.location)
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
    add_rewrites(collector, launches)
    for expr, location in config.constraints:
        collector.constraints.append(ConstraintDecl(expr, location, origin="config"))


def _defaults_from_launch(
    collector: Collector, spec: ConfigParam, inferred: dict[str, tuple[Number, Location]]
) -> bool:
    """Whether `spec`'s default is the number a `[[file.launch]]` rewrites with it alone: no
    place, no default of the config's, and no definition of the code's to take it from."""
    return (
        spec.clause is None
        and spec.default is None
        and spec.name in inferred
        and spec.name not in collector.defines
        and _constant(collector, spec) is None
    )


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


def command_value(config: FileConfig, name: str) -> tuple[Number, str] | None:
    """The value the compile command's own `-D` gives `name` (the last `-D` or `-U` of it
    decides; a bare `-DNAME` is 1) and the flag, or None when it sets none. AnnotuneError
    when it sets one that is no number."""
    for define in config.defines:
        macro, equals, value = define.partition("=")
        if macro != name:
            continue
        text = value.strip() if equals else "1"
        try:
            return parse_number(text), f"-D{define}"
        except ValueError:
            raise AnnotuneError(
                f"the compile command sets {name} with -D{define}, which is no number: the "
                f"default the program has is unknown",
                hint=f"give -D{name} a number, or leave it to annotune",
            ) from None
    return None


def _config_default(
    collector: Collector,
    spec: ConfigParam,
    define: Define | None,
    fixed: _Fixed | None,
    command: tuple[Number, str] | None = None,
) -> Number:
    """A config parameter's default: the value the compiler sees when annotune passes nothing.

    An unguarded `#define` the preprocessor keeps, or a constant, is what every build of the
    program gets, and no `-D` or forced-include header can change it; a config `default` that
    differs would make the baseline (and the header `build` writes) a program the user never
    builds, so it is an error. A guarded or absent definition takes the config's default,
    since `-D` reaches it.
    """
    if fixed is None and command is not None:  # a guarded or absent #define: -D reaches it
        value, flag = command
        if spec.default is not None and spec.default != value:
            raise AnnotuneError(
                f"the config's default of {spec.name} is {c_literal(spec.default)}, but the "
                f"compile command sets {flag}: every build of the program has "
                f"{c_literal(value)}",
                spec.default_location or spec.location,
                hint=f"drop `default`, or {flag} from the compile command",
            )
        return value
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


def _constant(collector: Collector, spec: ConfigParam) -> _Fixed | None:
    """The declaration the config's parameter names, if the code declares it with an
    initializer: a `const`, `constexpr` or `static const` variable, an enumerator with a value,
    or a plain variable (`const int block_size = 256;`, `enum { TILE = 16 };`,
    `unsigned int threads = 256;`, `dim3 blocks (256);`). Real code writes its knobs so, and
    `-D` would replace the name itself; a copy with the initializer rewritten sets it.
    Several declarations of the name are an error: which one is the knob is not clear."""
    found: list[_Fixed] = []
    for source, tokens, index in _named(collector, spec.name):
        token = tokens[index]
        value = initializer_tokens(tokens, index)
        kind = declaration_kind(tokens, index) if value is not None else None
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
    if not found:
        found = _assignments(collector, spec)
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


def _assignments(collector: Collector, spec: ConfigParam) -> list[_Fixed]:
    """Statements that set the name to a number, where no declaration initializes it
    (`int threads; ... threads = 256;`): each is the knob's place, as an initializer is. Only a
    whole statement of one literal counts (`x = 256;`, not `x = n / 4;` or `x += 256;`)."""
    found = []
    for source, tokens, index in _named(collector, spec.name):
        if 1 <= index < len(tokens) - 3:
            name, equals, value, end = tokens[index : index + 4]
            if (
                tokens[index - 1].text not in (";", "{", "}", ")", ":")
                or equals.text != "="
                or value.kind != "literal"
                or end.text != ";"
            ):
                continue
            found.append(
                _Fixed(
                    "assignment",
                    (value,),
                    TextSpan(source.path, value.start, value.end),
                    source.location(value.start),
                    source.location(name.start),
                )
            )
    return found


def _named(collector: Collector, name: str) -> Iterator[tuple[SourceFile, list[Token], int]]:
    """Each place the code the compiler reads names `name`: the file, its code tokens and the
    name's index among them; what a declaration, a statement or a name's role is read from."""
    for source in collector.parsed.files:
        tokens = code_tokens(source)
        for index, token in enumerate(tokens):
            if token.kind == "identifier" and token.text == name:
                yield source, tokens, index


def _refuse_declared(collector: Collector, spec: ConfigParam) -> None:
    """AnnotuneError for a config knob with no macro and no declaration a rewrite can set,
    whose name the code declares or calls as something else (`name_role`): `-D` would
    replace that name everywhere, and every variant would fail to compile at
    `<command-line>`, a message that names nothing of the user's."""
    for source, tokens, index in _named(collector, spec.name):
        token = tokens[index]
        role = name_role(tokens, index)
        if role is None:
            continue
        at = source.location(token.start)
        raise AnnotuneError(
            f"'{spec.name}' is {role} at {at.file}:{at.line}:{at.column}, not a value a "
            f"knob can set: -D{spec.name}=... would replace that name, and no variant "
            "would compile",
            spec.location,
            hint="a knob must name a macro (a #define, or a name only -D defines), or a "
            "constant or variable with a literal initializer that a rewrite can set "
            f"(`const int {spec.name} = 4;`, `enum {{ {spec.name} = 4 }};`)",
        )


def _article(noun: str) -> str:
    return "an" if noun[0] in "aeiou" else "a"


def _text(tokens: tuple[Token, ...]) -> str:
    return " ".join(t.text for t in tokens)


def _mentioned(collector: Collector, name: str) -> bool:
    """Whether any of the user's files names `name`, in code or a directive, kept or skipped."""
    return any(
        token.kind == "identifier" and token.text == name
        for source in collector.parsed.files
        for token in source.tokens
    )


def _not_found(collector: Collector, spec: ConfigParam, config: FileConfig) -> None:
    """AnnotuneError for a config parameter nothing can set: no macro, no constant, no use in
    the user's files and no `{NAME}` in an env value or a program argument. A -D for it would
    change nothing, and every configuration would be the same program."""
    placeholder = f"{{{spec.name}}}"
    named = any(spec.name in placeholders(setting.value) for setting in config.settings.env)
    named = named or any(spec.name in placeholders(arg) for arg in config.settings.args)
    if named or _in_declarations(spec.name, config):
        return
    raise AnnotuneError(
        f"'{spec.name}' is neither a macro, a constant, nor a name the code uses in "
        f"{collector.parsed.main.path} or its local headers, and no [file.env] value or "
        f"program argument names {placeholder}: no configuration would change the program",
        spec.location,
        hint="name a #define, a const/constexpr variable or an enumerator of the source, or "
        f'use it in the environment (OMP_NUM_THREADS = "{placeholder}") or the arguments '
        f'(args = ["-n", "{placeholder}"])',
    )


def _in_declarations(name: str, config: FileConfig) -> bool:
    """Whether a `[[file.kernel]]` or a `[[file.launch]]` of the config names `name`: a knob
    kernel mode gives the kernel only through its declaration (`block_sum<float, BT>`,
    `block(BT)`; `annotate.problem.kernel_only_params`), or that only a rewritten launch sets
    (`annotate.problem.rewrite_only_params`); neither reaches the program through a `-D`."""
    word = re.compile(rf"\b{re.escape(name)}\b")
    texts = [launch.names() for launch in config.launches]
    for kernel in config.kernels:
        texts += [kernel.name, *(piece for c in kernel.clauses for piece, _ in c.pieces)]
    return any(word.search(text) for text in texts)
