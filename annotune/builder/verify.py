"""The values the compiler sees: each compiled variant's tuned macros, read back with the
compiler's own preprocessor.

A `-D` flag or a rewritten copy is what annotune asks for; what the program gets is the
compiler's decision. A definition annotune did not read (in a header found through a flag it
does not know, a second unguarded `#define`, the compile command's own `-D`) wins without a
word, and the variant measured would not be the configuration recorded. So once a variant has
compiled, the same command is run preprocess-only (`-E -dM`: every flag, define and include
kept, `{output}` becoming the macro list; nvcc's preprocessor is its host compiler's, so
`-Xcompiler -dM`), and every tuned macro must have its value there. Only on a mismatch (or a
macro `#undef`'d by the end) does one more run (`-dD`: each definition in place, with line
markers) find the definition the compiler used, for the message.

A command may compile other translation units with the tuned source (`{source} file.c`): a
value is the program's only when every unit that reads it has it, so each is checked too (for
the `-D` macros, which reach every unit, and those set in a file the unit read), and a failure
names the unit.

Pragma literals are not macros: their rewritten text is what the compiler reads.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from annotune.annotate.grammar import parse_number
from annotune.annotate.problem import Problem, TunableParam
from annotune.builder.compiler import CompilerCommand, CompileResult, run_compiler
from annotune.core.command import (
    DEPENDENCY_FLAGS,
    arguments,
    input_kind,
    is_nvcc,
    knows_options,
    units,
)
from annotune.core.diagnostics import Location
from annotune.core.records import Number

_MARKER = re.compile(r'# (\d+) "((?:[^"\\]|\\.)*)"')


class Tuned(NamedTuple):
    """A macro annotune set: its name, its value in this variant, and where annotune set it."""

    name: str
    value: Number
    location: Location


def checks_values(executable: str) -> bool:
    """Whether annotune knows how to run this compiler preprocess-only (`preprocess_command`);
    a command of another compiler is compiled unchecked."""
    return knows_options(executable)


_DEPENDENCY_VALUES = frozenset(("dependency_output", "dependency_target"))


def preprocess_command(argv: Sequence[str], source: str, letter: str = "") -> list[str]:
    """`argv`, a rendered compile of `source` by a compiler that `checks_values`, turned into a
    preprocess-only run that writes where the compile wrote its program: the same flags,
    defines and includes; no other input file and no dependency output (irrelevant to the
    macros, and refused by nvcc with -E). `letter` asks for the macros instead of the text
    (`M`: the list; `D`: each definition in place)."""
    kept: list[str] = [argv[0], "-E"]
    if letter:
        kept += [*(("-Xcompiler",) if is_nvcc(argv[0]) else ()), f"-d{letter}"]
    for argument in arguments(argv):
        if argument.kind in _DEPENDENCY_VALUES or (
            argument.kind is None and argument.value in DEPENDENCY_FLAGS
        ):
            continue
        if argument.bare and argument.value != source and input_kind(argument.value):
            continue
        kept += argument.args
    return kept


def dependency_command(argv: Sequence[str], source: str) -> list[str]:
    """`preprocess_command` asking for the make rule of the files `source` reads (`-M`) in
    place of its text: gcc, clang, nvcc and nvc write it to `-o`, one unit at a time (with
    `-MD -MF` on a command of several units, each unit's list overwrites the one before)."""
    command = preprocess_command(argv, source)
    return [command[0], "-M", *command[2:]]


def source_inputs(argv: Sequence[str]) -> list[str]:
    """The source files a rendered compile command compiles (`.c`, `.cu`, ...): annotune's
    variant and any other the user's command names, which the same `-D` flags reach."""
    return units(argv)


def check_values(
    argv: Sequence[str],
    source: str,
    dump: Path,
    tuned: Sequence[Tuned],
    timeout: float,
    unit: str = "",
) -> CompileResult:
    """Whether every `tuned` macro has its value for the compiler; `argv` is the compile of
    `source` with `{output}` rendered as `dump`. A failure names each macro, the value the
    compiler sees, the tuned one and the definition that won (FILE:LINE); `unit` names the
    translation unit checked when it is not the tuned source, one of the command's others."""
    done = _run(preprocess_command(argv, source, "M"), dump, timeout)
    if isinstance(done, CompileResult):
        return done
    seconds, text = done
    seen = _macro_values(text, {t.name for t in tuned})
    doubtful = [t for t in tuned if not _agrees(seen.get(t.name), t.value)]
    if not doubtful:
        return CompileResult(True, seconds)
    located = _run(preprocess_command(argv, source, "D"), dump, timeout)
    definitions: dict[str, tuple[str, str, int]] = {}
    if not isinstance(located, CompileResult):
        seconds += located[0]
        definitions = _last_definitions(located[1], {t.name for t in doubtful})
    problems = []
    for macro in doubtful:
        found = definitions.get(macro.name)
        value = seen.get(macro.name)
        if value is None:  # undefined by the end: what counts is the last definition
            if found is None or _agrees(found[0], macro.value):
                continue
            value = found[0]
        problems.append(_mismatch(macro, value, found))
    if not problems:
        return CompileResult(True, seconds)
    where = f" in {unit}" if unit else ""
    said = f"tuned value not seen by the compiler{where}: " + "; ".join(problems)
    return CompileResult(False, seconds, said)


def _run(command: list[str], dump: Path, timeout: float) -> CompileResult | tuple[float, str]:
    """The preprocessor's output and its time, or why there is none (`transient` kept)."""
    done = run_compiler(command, timeout)
    if done.ok:
        try:
            return done.seconds, dump.read_text(errors="replace")
        except OSError as error:
            return CompileResult(False, done.seconds, f"no macro list written: {error.strerror}")
    said = done.error.removeprefix("compile failed: ")
    return replace(done, error=f"cannot check the tuned values (preprocessing failed): {said}")


def _macro_values(text: str, names: set[str]) -> dict[str, str]:
    """The value of each of `names` in a `-dM` listing (one `#define NAME VALUE` a line)."""
    values = {}
    for line in text.splitlines():
        if line.startswith("#define "):
            name, _, value = line[8:].partition(" ")
            if name in names:
                values[name] = value.strip()
    return values


def _last_definitions(text: str, names: set[str]) -> dict[str, tuple[str, str, int]]:
    """Each of `names`' last definition in a `-dD` listing: (value, file, line), read from the
    line markers (`# LINE "FILE" FLAGS`) and the lines that follow each."""
    found: dict[str, tuple[str, str, int]] = {}
    file, line = "", 0
    for text_line in text.splitlines():
        if text_line.startswith("# ") and (marker := _MARKER.match(text_line)):
            file = re.sub(r"\\(.)", r"\1", marker.group(2))
            line = int(marker.group(1))
            continue
        if text_line.startswith("#define "):
            name, _, value = text_line[8:].partition(" ")
            if name in names:
                found[name] = (value.strip(), file, line)
        line += 1
    return found


def _mismatch(macro: Tuned, value: str, found: tuple[str, str, int] | None) -> str:
    set_at = f"{macro.location.file}:{macro.location.line}"
    said = f"the compiler sees {macro.name} = {value or '(empty)'}, not the tuned {macro.value}"
    if found is None:
        return f"{set_at}: error: {said} annotune set here"
    where = found[1] if found[2] == 0 else f"{found[1]}:{found[2]}"
    if (os.path.abspath(found[1]), found[2]) == (
        os.path.abspath(macro.location.file),
        macro.location.line,
    ):
        return f"{where}: error: {said}: the compiler read the original of this file, not its copy"
    return f"{where}: error: {said}: this definition wins over annotune's ({set_at})"


def _agrees(text: str | None, value: Number) -> bool:
    return text is not None and macro_number(text) == value


def macro_number(text: str) -> Number | None:
    """The number a macro's replacement text is, if it is a (signed, parenthesized) literal,
    as the front end reads a `#define`'s default; None otherwise."""
    text = text.strip()
    while text.startswith("(") and text.endswith(")"):
        text = text[1:-1].strip()
    if text in ("true", "false"):
        return int(text == "true")
    sign = text[:1] if text[:1] in ("+", "-") else ""
    try:
        return parse_number(sign + text[len(sign) :].strip())
    except ValueError:
        return None


def tuned_macros(params: Sequence[TunableParam], values: Mapping[str, Number]) -> list[Tuned]:
    """The macros of a configuration: every parameter but a pragma literal or a C declaration,
    neither of which is a macro, and an `unread` config parameter, which the program cannot
    read (one set only through the environment gets no `-D` at all), or one only rewritten
    launches name (`[[file.launch]]`), which the copy's text sets."""
    return [
        Tuned(p.name, values[p.name], p.location)
        for p in params
        if p.origin != "literal" and not p.unread and not p.declaration and not p.rewritten_only
    ]


def check_header(
    problem: Problem,
    header: Path,
    values: Mapping[str, Number | None],
    command: CompilerCommand,
    workdir: Path,
    timeout: float = 120.0,
) -> CompileResult | None:
    """Whether the compiler, given `header` with `-include` as `annotune build`'s users compile
    the source, sees each tuned macro at the header's value (`values`, by name; None: not a
    number). The same `-E -dM` read-back a variant gets, on the user's own files. None when
    this command's compiler cannot be run preprocess-only here, so nothing was checked."""
    executable = command.argv[0]
    if not checks_values(executable) or shutil.which(executable) is None:
        return None
    numbers = {name: value for name, value in values.items() if value is not None}
    tuned = tuned_macros([p for p in problem.params if p.name in numbers], numbers)
    if not tuned:
        return CompileResult(True, 0.0)
    dump = workdir / "macros.txt"
    argv = command.render(problem.source, dump, [], list(problem.include_dirs))
    argv[1:1] = ["-include", str(header)]
    return check_values(argv, str(problem.source), dump, tuned, timeout)
