"""What a config says about one source: its parameters (`ConfigParam`) and everything else of
its `[[file]]` entry, every path absolute (`FileConfig`)."""

from __future__ import annotations

from dataclasses import dataclass

from annotune.annotate.grammar import DeclaredKernel, Domain
from annotune.annotate.problem import RunSettings
from annotune.core.diagnostics import Location
from annotune.core.records import Number


@dataclass(frozen=True)
class ClausePlace:
    """Where a config knob is a literal of code that must not be edited: a pragma clause's
    (`kind` "clause", `clause` its name), a launch argument's (`kind` "launch", `clause` the
    kernel, `part` "block", "grid.y" or "shared") or a `dim3` declaration's component (`kind`
    "dim3", `clause` the variable, `part` "x", "y" or "z"); optionally narrowed to a line (of
    `file`, absolute; None: the source) and a function. `location` is the config's value that
    names it, where mistakes are said."""

    clause: str
    location: Location
    line: int | None = None
    file: str | None = None
    function: str | None = None
    kind: str = "clause"
    part: str = ""

    def described(self) -> str:
        """How messages name the place: "a `thread_limit` clause on line 42"."""
        if self.kind == "launch":
            where = f"the {self.part} of a launch of {self.clause}"
        elif self.kind == "dim3":
            where = f"the {self.part} component of a `dim3 {self.clause}` declaration"
        else:
            where = f"a `{self.clause}` clause"
        if self.line is not None:
            where += f" on line {self.line}" + (f" of {self.file}" if self.file else "")
        if self.function is not None:
            where += f" in {self.function}()"
        return where


@dataclass(frozen=True)
class LaunchTemplate:
    """`[[file.launch]]`: the launches of a kernel (`place`, kind "launch", narrowed by its
    line and function as a knob's place is) rewritten in every variant's copy with C
    expressions over knobs: `pieces` are (argument, text, where it is written), the argument
    "grid", "block", "shared" or "template" (then `index` says which template argument)."""

    place: ClausePlace
    pieces: tuple[tuple[str, int, str, Location], ...]

    def names(self) -> str:
        """Every piece's text, for the question "does it name this knob"."""
        return " ".join(text for _, _, text, _ in self.pieces)


@dataclass(frozen=True)
class ConfigParam:
    name: str
    domain: Domain
    default: Number | None
    location: Location  # the parameter's key
    default_location: Location | None = None  # where `default = ...` is written
    clause: ClausePlace | None = None  # a pragma clause's literal, for code not to be edited
    independent: bool = False  # the user's word that no other number repeats the literal's
    add: bool = False  # the clause is absent: every variant but the default adds it


@dataclass(frozen=True)
class FileConfig:
    """What a config file says about one source file; every path in it absolute.

    `include_dirs` are the `include` key's, which the compiler gets too (as `-I`); the rest is
    what `compile` (the `defines` key's flags in it) tells its preprocessor, for libclang to be
    told the same, without which its view of which `#if` branch is taken is not the compiler's:
    `defines` (NAME or NAME=VALUE) and `undefined` are its `-D` and `-U` flags, each macro as
    the last one left it; `language` ("c", "c++", "cuda") it compiles the source as (None: no
    command, the extension decides); `compiler` its file name or preset; `command_include_dirs`
    its `-I` directories; `command_flags` its other search directories and forced includes, as
    (clang's option, path); `command_responses` the response files it names, absolute, read or
    not (their `-D` are among `defines`: what depends on those depends on their bytes).
    """

    config_file: str
    params: tuple[ConfigParam, ...] = ()
    constraints: tuple[tuple[str, Location], ...] = ()
    include_dirs: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()
    settings: RunSettings = RunSettings()
    undefined: tuple[str, ...] = ()
    language: str | None = None
    compiler: str | None = None
    command_include_dirs: tuple[str, ...] = ()
    command_flags: tuple[tuple[str, str], ...] = ()
    command_responses: tuple[str, ...] = ()
    kernels: tuple[DeclaredKernel, ...] = ()  # `[[file.kernel]]`, checked by annotate.kernels
    launches: tuple[LaunchTemplate, ...] = ()  # `[[file.launch]]`, found by annotate.knobs
