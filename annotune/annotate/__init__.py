"""The front end: read a source file's annotations into a `Problem` and its search `Space`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

from annotune.annotate.config import FileConfig, config_naming, find_config, load_file_config
from annotune.annotate.device_code import device_code as _device_code
from annotune.annotate.kernels import declares_kernels, kernel_specs, parse_cuda
from annotune.annotate.knobs import collect
from annotune.annotate.problem import ConstraintDecl, Problem, TunableParam, Use
from annotune.annotate.source import (
    ParsedSource,
    check_readable,
    compiler_macros,
    language_of,
    parse_source,
)
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.records import Number
from annotune.space import Param, Space, SpaceError

__all__ = [
    "ConstraintDecl",
    "Problem",
    "TunableParam",
    "Use",
    "read_problem",
    "read_problem_and_source",
    "problem_space",
]


def read_problem(
    source: Path,
    *,
    config_path: Path | None = None,
    fixed: Mapping[str, Number] | None = None,
    args: Sequence[str] | None = None,
) -> Problem:
    """Parse `source` (and its local headers and config entry) into a checked Problem.

    Without `config_path`, the nearest annotune.toml or [tool.annotune] above the source is used.
    `fixed`: problem sizes set for this tune, each a parameter of one value (`collect`).
    `args`: the program's arguments given on the command line (`tune --arg`), which replace
    the config's and the source's, `{NAME}` in them a knob as in the config's.
    Raises AnnotuneError, located, for every mistake.
    """
    return read_problem_and_source(source, config_path=config_path, fixed=fixed, args=args)[0]


def read_problem_and_source(
    source: Path,
    *,
    config_path: Path | None = None,
    fixed: Mapping[str, Number] | None = None,
    args: Sequence[str] | None = None,
) -> tuple[Problem, ParsedSource]:
    """`read_problem`, and the parsed files it came from, for tools that edit them (`lift`)."""
    check_readable(source)
    config = _file_config(source, config_path)
    if config is not None and args is not None:  # a knob only `--arg` names is no mistake
        settings = dataclasses.replace(config.settings, args=tuple(args))
        config = dataclasses.replace(config, settings=settings)
    command = config or FileConfig("")  # no config: no compile command, the defaults
    language = command.language or language_of(source)
    # The compile command's -I directories are the project's as the `include` key's are; the
    # compiler gets only the latter from annotune (`Problem.include_dirs`): it has the former.
    include_dirs = [*command.command_include_dirs, *command.include_dirs]
    set_by_command = {*command.undefined, *(_macro_name(d) for d in command.defines)}
    predefined = compiler_macros(language, command.compiler)
    defines = [*(m for m in predefined if m not in set_by_command), *command.defines]
    parsed = parse_source(
        source,
        include_dirs=include_dirs,
        defines=defines,
        language=language,
        flags=command.command_flags,
    )
    problem = collect(parsed, config, fixed)
    if not problem.params:
        raise AnnotuneError(
            "no tunable parameters found (mark a #define with '// @tune DOMAIN')",
            Location(str(source), 1, 1),
            hint="for code you must not edit, declare its knobs (a macro, a constant or a "
            "variable of the source) in an annotune.toml: beside it, [[file]] path = "
            f'"{source.name}"; or in the directory you run annotune from, or anywhere with '
            "--config PATH, with path = the source's path from the config; and [file.params] "
            'NAME = "DOMAIN"'
            if config is None
            else f"the config {config.config_file} declares no parameter for {source.name}",
        )
    # Kernel mode parses the main file once more, for the kernels' signatures and the device
    # code NVRTC may compile; a source without kernels pays for neither.
    ast = None
    if parsed.language == "cuda" and (declares_kernels(parsed) or command.kernels):
        ast = parse_cuda(parsed, include_dirs, defines)
    kernels = kernel_specs(
        parsed,
        [p.name for p in problem.params],
        include_dirs=include_dirs,
        defines=defines,
        translation_unit=ast,
        declared=command.kernels,
    )
    device = _device_code(parsed, translation_unit=ast) if kernels and ast is not None else None
    problem = dataclasses.replace(
        problem,
        kernels=kernels,
        include_dirs=command.include_dirs,
        device_code=device,
        looked_at=(*parsed.searched, *command.command_responses),
    )
    if args is not None:
        settings = dataclasses.replace(problem.settings, args=tuple(args))
        problem = dataclasses.replace(problem, settings=settings)
    return problem, parsed


def _macro_name(define: str) -> str:
    """NAME of a `NAME`, `NAME=VALUE` or `NAME(ARGS)=BODY` definition."""
    return define.split("=", 1)[0].split("(", 1)[0]


def _file_config(source: Path, config_path: Path | None) -> FileConfig | None:
    """The config named with --config (trusted: the user chose it), else the nearest above
    the source, else the nearest above the working directory if it names the source
    (`config_naming`: a vendored tree whose config the user keeps outside it)."""
    path = config_path or find_config(source)
    if path is not None:
        return load_file_config(path, source)
    return config_naming(source, Path.cwd())


def problem_space(problem: Problem) -> Space:
    """The problem's search space; constraint and domain mistakes located in the source."""
    params = [Param(p.name, p.values, p.default) for p in problem.params]
    try:
        return Space(params, [c.expr for c in problem.constraints])
    except SpaceError as error:
        if error.constraint is not None:
            decl = problem.constraints[error.constraint]
            raise AnnotuneError(error.message, decl.location_at(error.offset or 0)) from None
        names = [p.name for p in problem.params]
        where = problem.param(error.param).location if error.param in names else None
        raise AnnotuneError(error.message, where) from None
