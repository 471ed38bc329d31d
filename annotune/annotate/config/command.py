"""The compile command a config gives (`compile`), and what it tells the preprocessor.

libclang reads the source as `compile` has the compiler read it, or scan and tune would
disagree on which `#if` branch is taken: in the language it names (`-x cu` makes a .cpp CUDA; a
C++ driver such as g++ reads a .c as C++), with its `-D`/`-U` flags in order, its include
directories (`-I`, `-iquote`, `-isystem`, `-idirafter`, nvcc's long spellings) and its forced
includes (`-include`, `-imacros`). `defines` become `-D` flags of the compile command itself,
before `{source}`, so they reach every variant's compile: hence they need a template, and a
macro the template already sets may not be set again to another value."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from annotune.annotate.config.values import resolved, string_list
from annotune.annotate.source import language_of
from annotune.core.command import (
    PATH_KINDS,
    PRESET_NAMES,
    arguments,
    compiles_c_as_cxx,
    expand_responses,
    is_nvcc,
    template_mistake,
)
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.inputs import SOURCE, check_input, read_input
from annotune.core.toml import Positions

# `-x` values: nvcc's (c, c++, cu) and gcc's or clang's; "none" and any other: by extension.
_LANGUAGES = {
    "c": "c",
    "c-header": "c",
    "c++": "c++",
    "c++-header": "c++",
    "cu": "cuda",
    "cuda": "cuda",
}
# The include flags libclang is given as the command spells them, by kind.
_FLAG_SPELLINGS = {
    "quote_dir": "-iquote",
    "system_dir": "-isystem",
    "after_dir": "-idirafter",
    "forced_include": "-include",
    "forced_macros": "-imacros",
}
_DEFINE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\([^()\n\r]*\))?(=[^\n\r]*)?")


def compile_command(entry: dict, base: Path, where: Positions, at: tuple) -> tuple[str, ...] | None:
    """`compile`: a preset name, or a command (a string, or a list of arguments) whose relative
    paths are made absolute from the config's directory, as a Makefile beside it means them."""
    value = entry.get("compile")
    if value is None:
        return None
    argv = [value] if isinstance(value, str) else string_list(entry, "compile", where, at)
    if len(argv) == 1 and argv[0] not in PRESET_NAMES:
        try:
            argv = shlex.split(argv[0])
        except ValueError as error:
            raise AnnotuneError(
                f"cannot split the compile command: {error}", where.value((*at, "compile"))
            ) from None
    if not argv or not argv[0]:
        raise AnnotuneError(
            "the compile command is empty: give a preset name (nvcc, gcc, ...) or a command "
            "with {source} and {output}, or leave `compile` out for the default",
            where.value((*at, "compile")),
        )
    if len(argv) > 1 or argv[0] not in PRESET_NAMES:
        _check_template(value, argv, where, at)
    return tuple(_absolute_args(argv, base))


def _check_template(value: object, argv: list[str], where: Positions, at: tuple) -> None:
    """`template_mistake` located: at the argument at fault, in the string or the list that
    `compile` is (a string's column is where the argument is first written in it)."""
    mistake = template_mistake(argv)
    if mistake is None:
        return
    index, message = mistake
    location = where.value((*at, "compile"))
    if index is not None and isinstance(value, list):
        location = where.value((*at, "compile", index))
    elif index is not None and isinstance(value, str):
        before = argv[:index].count(argv[index])
        location = location.shifted(_nth_offset(value, argv[index], before))
    raise AnnotuneError(message, location)


def _absolute_args(argv: list[str], base: Path) -> list[str]:
    """The path arguments made absolute: the values of `-I`-like options, and any other
    argument that names an existing file beside the config (a compiler's bare name is looked up
    on PATH)."""
    compiler = argv[0]
    named = "/" in compiler and _names_file(compiler, base)
    absolute = [resolved(base, compiler) if named else compiler]
    for argument in arguments(argv):
        value, args = argument.value, argument.args
        if argument.kind is None and value.startswith("@") and _names_file(value[1:], base):
            absolute.append("@" + resolved(base, value[1:]))  # a response file beside the config
        elif argument.kind is None and _names_file(value, base):
            absolute.append(resolved(base, value))
        elif argument.kind in PATH_KINDS and "{" not in value:  # a placeholder: annotune's
            path = resolved(base, value)
            absolute += [args[0], path] if len(args) == 2 else [args[0][: -len(value)] + path]
        elif len(args) == 2 and _names_file(value, base):  # `-o prog`, `-Xlinker map.ld`
            absolute += [args[0], resolved(base, value)]
        else:
            absolute += args
    return absolute


def _nth_offset(text: str, word: str, before: int) -> int:
    """Where `word` is written in `text` the time after `before` others (0 when not found):
    the column of an argument of a command string, which `shlex` split without positions."""
    offset = -1
    for _ in range(before + 1):
        offset = text.find(word, offset + 1)
        if offset < 0:
            return 0
    return offset


def _names_file(arg: str, base: Path) -> bool:
    if "{" in arg or arg.startswith("-"):
        return False
    try:
        return (base / arg).exists()
    except OSError:  # a name too long for one (a script given with `python -c`)
        return False


@dataclass(frozen=True)
class CommandView:
    """What a compile command tells the preprocessor (see `FileConfig`)."""

    compiler: str
    language: str
    include_dirs: tuple[str, ...]
    flags: tuple[tuple[str, str], ...]
    defines: tuple[str, ...]
    undefined: tuple[str, ...]
    responses: tuple[str, ...] = ()  # the response files named, absolute, read or not


def command_view(argv: tuple[str, ...], source: Path) -> CommandView:
    """What `argv` (a preset's name, or a command with absolute paths) tells the preprocessor
    about `source`: gcc's and clang's `-x` name the language of the files after it, nvcc's of
    every file; a macro is as its last `-D` or `-U` left it."""
    responses: list[str] = []

    def read(path: str) -> tuple[str, ...] | None:
        responses.append(path)
        return _response(path)

    argv = tuple(expand_responses(argv, read))  # what the compiler reads: their -D too
    compiler = Path(argv[0]).name
    source_at = argv.index("{source}") if "{source}" in argv else len(argv)
    language = None
    include_dirs: list[str] = []
    flags: list[tuple[str, str]] = []
    macros: dict[str, str | None] = {}  # name -> its -D value, None when undefined
    for argument in arguments(argv):
        kind, value = argument.kind, argument.value
        if kind == "language" and (is_nvcc(compiler) or argument.index < source_at):
            if value in _LANGUAGES or value == "none":
                language = _LANGUAGES.get(value)
        elif kind == "include_dir":
            include_dirs.append(value)
        elif kind in _FLAG_SPELLINGS:
            flags.append((_FLAG_SPELLINGS[kind], value))
        elif kind in ("define", "undefine") and (macro := _DEFINE.fullmatch(value)):
            macros.pop(macro.group(1), None)  # a later flag: last in order
            macros[macro.group(1)] = value if kind == "define" else None
    if language is None:
        language = language_of(source)
        if language == "c" and compiles_c_as_cxx(compiler):
            language = "c++"
    return CommandView(
        compiler,
        language,
        tuple(include_dirs),
        tuple(flags),
        tuple(value for value in macros.values() if value is not None),
        tuple(name for name, value in macros.items() if value is None),
        tuple(dict.fromkeys(responses)),
    )


def _response(path: str) -> tuple[str, ...] | None:
    """A response file's arguments, split as gcc reads them; None when it cannot be read."""
    try:
        return tuple(shlex.split(read_input(Path(path), SOURCE).decode(errors="surrogateescape")))
    except (AnnotuneError, ValueError):
        return None


def with_defines(
    argv: tuple[str, ...] | None, entry: dict, where: Positions, at: tuple
) -> tuple[str, ...] | None:
    """`compile` with a `-D` flag for each of `defines` before `{source}`, so that every
    variant is compiled with them, as libclang reads the source with them. One the command
    already sets alike is not repeated; one it sets otherwise is an error (which would win?)."""
    defines = string_list(entry, "defines", where, at)
    if not defines:
        return argv
    if argv is None or len(argv) == 1:
        raise AnnotuneError(
            "'defines' become -D flags of the compile command, so 'compile' must be a command "
            "template, not a preset's name or left out",
            where.key((*at, "defines")),
            hint='e.g. compile = "nvcc -O3 {source} -o {output}"',
        )
    set_by_command = {
        macro.group(1): ("-D" if argument.kind == "define" else "-U", argument.value)
        for argument in arguments(argv)
        if argument.kind in ("define", "undefine") and (macro := _DEFINE.fullmatch(argument.value))
    }
    flags = []
    for index, define in enumerate(defines):
        location = where.value((*at, "defines", index))
        macro = _DEFINE.fullmatch(define)
        if macro is None:
            raise AnnotuneError(
                f"{define!r} is not a macro definition: NAME, NAME=VALUE or NAME(ARGS)=BODY",
                location,
            )
        name = macro.group(1)
        carried = set_by_command.get(name)
        if carried is None:
            flags.append(f"-D{define}")
        elif carried[0] == "-U" or _defined_as(carried[1]) != _defined_as(define):
            raise AnnotuneError(
                f"{name} is set here and by the compile command ({carried[0]} {carried[1]}): "
                "set it in one place",
                location,
            )
    source_at = argv.index("{source}") if "{source}" in argv else len(argv)
    return (*argv[:source_at], *flags, *argv[source_at:])


def _defined_as(define: str) -> str:
    """A `-D` value as the preprocessor takes it: `NAME` is `NAME=1`."""
    return define if "=" in define else f"{define}=1"


def check_forced(option: str, path: str, location: Location) -> None:
    """A forced include of the compile command, which libclang reads too: a regular file of a
    source's size (a FIFO would hang both), else an error at `compile`."""
    try:
        check_input(Path(path), SOURCE)
    except AnnotuneError as error:
        raise AnnotuneError(f"{option} {path}: {error.message}", location) from None
