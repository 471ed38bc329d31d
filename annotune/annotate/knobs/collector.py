"""From the front end's directives and tokens to a checked `Problem` (`collect`).

Every mistake becomes an AnnotuneError located at the token that caused it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from annotune.annotate.config import FileConfig
from annotune.annotate.knobs.config_knobs import add_config, command_value
from annotune.annotate.knobs.pragmas import add_pragma_param
from annotune.annotate.knobs.scan import add_define_param, scan_file
from annotune.annotate.knobs.state import Collector
from annotune.annotate.knobs.uses import find_uses
from annotune.annotate.problem import REWRITTEN, Problem, Rewrite, RunSettings, TunableParam, Use
from annotune.annotate.source import ParsedSource
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.literals import c_literal
from annotune.core.records import Number

_PRAGMA_FAMILIES = ("omp", "acc")
_RUNTIME_HEADERS = {"omp.h": "omp", "openacc.h": "acc"}


def collect(
    parsed: ParsedSource,
    config: FileConfig | None = None,
    fixed: Mapping[str, Number] | None = None,
) -> Problem:
    """Read every annotation of the parsed files into a Problem (parameter uses included).

    `fixed` are problem sizes set for this tune (`annotune tune --sizes`): each becomes a
    parameter of one value, so that it reaches the compiler as a tunable does (`-D`, or the
    rewritten copy when its #define is unguarded) and is part of the study's space."""
    collector = Collector(parsed)
    scan_file(collector, parsed.main, visited=set())
    for define, found in collector.pending_define_params:
        known = collector.params.get(define.name)
        if known is None or known.origin != "define":  # else annotated in the kept branch too
            add_define_param(collector, define, found)
    for args in collector.pending_pragma_params:
        add_pragma_param(collector, *args)
    if config is not None:
        add_config(collector, config)
        _command_defaults(collector, config)
    for name, value in (fixed or {}).items():
        _add_fixed(collector, name, value)
    uses = find_uses(parsed, set(collector.params))
    params = tuple(
        _with_uses(parsed, p, uses[p.name], collector.rewrites) for p in collector.params.values()
    )
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
        rewrites=tuple(collector.rewrites),
    )


def _command_defaults(collector: Collector, config: FileConfig) -> None:
    """A `@tune` macro the compile command sets itself (`-DB=8`, the source's `#ifndef B`
    skipped): its default is the command's value, what every build of the program has."""
    for name, param in list(collector.params.items()):
        if param.origin not in ("define", "pragma") or not param.guarded:
            continue
        found = command_value(config, name)
        if found is not None and found[0] != param.default:
            value, flag = found
            if value not in param.values:
                raise AnnotuneError(
                    f"the compile command sets {flag}, the default every build of the program "
                    f"has, and {c_literal(value)} is not in the domain of {name}, "
                    f"{param.domain}",
                    param.location,
                    hint=f"add {c_literal(value)} to the domain, or drop {flag}",
                )
            collector.params[name] = dataclasses.replace(param, default=value)


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


def _settings(collector: Collector, config: FileConfig | None) -> RunSettings:
    """The config's settings; program arguments from the config win over the pragma's."""
    settings = config.settings if config is not None else RunSettings()
    if not settings.args and collector.program_args:
        settings = dataclasses.replace(settings, args=tuple(collector.program_args))
    return settings


def _with_uses(
    parsed: ParsedSource, param: TunableParam, found: list[Use], rewrites: list[Rewrite]
) -> TunableParam:
    uses = tuple(found)
    for rewrite in rewrites:  # a launch `[[file.launch]]` rewrites with it
        if param.name in rewrite.names:
            source = parsed.file(rewrite.span.file)
            function = parsed.function_at(rewrite.span.file, rewrite.span.start)
            uses += (
                Use(
                    "launch",
                    source.location(rewrite.span.start),
                    function.name if function else None,
                    function.is_kernel if function else False,
                    REWRITTEN,
                ),
            )
    if param.origin == "literal" and param.value_span is not None:
        function = parsed.function_at(param.location.file, param.value_span.start)
        in_launch = param.declaration in ("launch argument", "dim3 component")
        literal_use = Use(
            "launch" if in_launch else "pragma",
            param.location,
            function.name if function else None,
            function.is_kernel if function else False,
        )
        uses = (literal_use, *uses)
    return dataclasses.replace(param, uses=uses)


def _add_fixed(collector: Collector, name: str, value: Number) -> None:
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
