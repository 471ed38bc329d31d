"""A compile command's arguments, read one way by every stage.

The front end reads a command for what its preprocessor is told (`-D`, `-I`, `-x`); the builder
for the files it reads (to key its cache), the sources it compiles (to check each one's macros)
and the architectures it compiles for; compile-only for ptxas's report. Read with separate
tables, they disagreed on what is an input, which options take a value and which program is
nvcc, and each disagreement hashed, verified or rebuilt another program than the one compiled.
So there is one table of options (`OPTIONS`), one list of input kinds (`input_kind`), one answer
to "which compiler is this" (`is_nvcc`, `is_gnu_driver`, `compiles_c_as_cxx`) and one walk
(`arguments`) over gcc's, clang's and nvcc's spellings.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

# --- which compiler ------------------------------------------------------------------------

PRESET_NAMES = ("nvcc", "gcc", "g++", "nvc", "nvc++", "cc", "c++")
"""The compilers a command may name alone, for the builder's template of each."""

_NVCC = re.compile(r"nvcc(?:-[\d.]+)?")
# Drivers that take gcc's options (-E -dM, -MD -MF): gcc, g++, cc, c++, clang, clang++, nvc,
# nvc++, with a target prefix or a version suffix (x86_64-linux-gnu-gcc-12). A wrapper (ccache,
# a script) is not assumed to take them.
_GNU_DRIVER = re.compile(
    r"(?:[\w.+-]+-)?(?:g?cc|g\+\+|c\+\+|clang(?:\+\+)?|nvc(?:\+\+)?)(?:-[\d.]+)?"
)
# Drivers that compile a .c file as C++ (g++-12, clang++, nvc++, MPI's and Intel's).
_CXX_DRIVER = re.compile(
    r"(?:[\w.+-]+-)?(?:g\+\+|c\+\+|clang\+\+|nvc\+\+|mpicxx|mpic\+\+|icpx|icpc|CC)(?:-[\d.]+)?"
)


def is_nvcc(executable: str) -> bool:
    """Whether `executable` (a path or a name) runs nvcc, a versioned one too (`nvcc-12.4`)."""
    return _NVCC.fullmatch(os.path.basename(executable)) is not None


def is_gnu_driver(executable: str) -> bool:
    """Whether `executable` is a driver taking gcc's preprocessor and dependency options."""
    return _GNU_DRIVER.fullmatch(os.path.basename(executable)) is not None


def knows_options(executable: str) -> bool:
    """Whether annotune may add preprocess-only and dependency options to a command of this
    compiler: nvcc or a gcc-like driver, never an unknown wrapper."""
    return is_nvcc(executable) or is_gnu_driver(executable)


def compiles_c_as_cxx(executable: str) -> bool:
    """Whether the driver reads a `.c` file as C++ (g++ does, gcc does not)."""
    return _CXX_DRIVER.fullmatch(os.path.basename(executable)) is not None


# --- input kinds ---------------------------------------------------------------------------

HEADER_SUFFIXES = frozenset(
    (".h", ".hh", ".hpp", ".hxx", ".h++", ".cuh", ".inc", ".inl", ".ipp", ".tcc", ".def")
)
UNIT_SUFFIXES = frozenset((".c", ".cc", ".cp", ".cpp", ".cxx", ".c++", ".cu"))
"""Translation units: what a driver compiles by its name."""
_OBJECT_SUFFIXES = frozenset((".o", ".obj"))
_LIBRARY_SUFFIXES = frozenset((".a", ".so", ".lib", ".dylib"))
_DEVICE_SUFFIXES = frozenset((".ptx", ".cubin", ".fatbin"))  # nvcc links device code
_VERSIONED_LIBRARY = re.compile(r"\.so(?:\.\d+)+$")


def input_kind(arg: str) -> str | None:
    """What a driver takes `arg`, a bare argument, for by its name: "unit" (a source it
    compiles), "object", "library", "device" (nvcc's PTX, cubins and fatbins), or None (not an
    input: a header, or a wrapper's own argument such as its log file)."""
    suffix = os.path.splitext(arg)[1].lower()
    if suffix in UNIT_SUFFIXES:
        return "unit"
    if suffix in _OBJECT_SUFFIXES:
        return "object"
    if suffix in _LIBRARY_SUFFIXES or _VERSIONED_LIBRARY.search(arg):
        return "library"
    if suffix in _DEVICE_SUFFIXES:
        return "device"
    return None


def is_source_text(name: str) -> bool:
    """Whether a file of this name is C, C++ or CUDA text (a unit or a header): what a
    directory on the include path contributes to a build's key."""
    suffix = os.path.splitext(name)[1].lower()
    return suffix in UNIT_SUFFIXES or suffix in HEADER_SUFFIXES


# --- the option table ----------------------------------------------------------------------


@dataclass(frozen=True)
class Option:
    """An option that takes a value: its one name (`kind`), and how its value may be written
    besides the next argument: `joined` to it (`-Idir`, `-DNAME`), after `=` (`--x=cu`, nvcc's
    `-arch=sm_80`)."""

    kind: str
    joined: bool = False
    equals: bool = False


_I = Option("include_dir", joined=True)
_LONG_I = Option("include_dir", equals=True)
OPTIONS: dict[str, Option] = {
    "-I": _I,
    "--include-path": _LONG_I,
    "-iquote": Option("quote_dir", joined=True),
    "-isystem": Option("system_dir", joined=True),
    "--system-include": Option("system_dir", equals=True),
    "-idirafter": Option("after_dir", joined=True),
    "-include": Option("forced_include", joined=True),
    "--pre-include": Option("forced_include", equals=True),
    "-imacros": Option("forced_macros", joined=True),
    "-D": Option("define", joined=True),
    "--define-macro": Option("define", equals=True),
    "-U": Option("undefine", joined=True),
    "--undefine-macro": Option("undefine", equals=True),
    "-x": Option("language", joined=True),
    "--x": Option("language", equals=True),
    "-L": Option("library_dir", joined=True),
    "--library-path": Option("library_dir", equals=True),
    "-l": Option("library", joined=True),
    "--library": Option("library", equals=True),
    "-o": Option("output"),
    "--output-file": Option("output", equals=True),
    "-odir": Option("output_dir", equals=True),
    "--output-directory": Option("output_dir", equals=True),
    "-MF": Option("dependency_output"),
    "-MT": Option("dependency_target"),
    "-MQ": Option("dependency_target"),
    "--dependency-output": Option("dependency_output", equals=True),
    "-optf": Option("options_file", equals=True),
    "--options-file": Option("options_file", equals=True),
    "-arch": Option("architecture", equals=True),
    "--gpu-architecture": Option("architecture", equals=True),
    "-gencode": Option("architecture", equals=True),
    "--generate-code": Option("architecture", equals=True),
    "-code": Option("architecture", equals=True),
    "--gpu-code": Option("architecture", equals=True),
    "-ccbin": Option("host_compiler", equals=True),
    "--compiler-bindir": Option("host_compiler", equals=True),
    "-Xcompiler": Option("pass_host", equals=True),
    "--compiler-options": Option("pass_host", equals=True),
    "-Xptxas": Option("pass_ptxas", equals=True),
    "--ptxas-options": Option("pass_ptxas", equals=True),
    "-Xlinker": Option("pass_linker", equals=True),
    "--linker-options": Option("pass_linker", equals=True),
    "-Xnvlink": Option("pass_nvlink", equals=True),
    "--nvlink-options": Option("pass_nvlink", equals=True),
    "-Xpreprocessor": Option("pass_preprocessor"),
}
"""Every option whose value annotune reads or must not take for an input, gcc's, clang's and
nvcc's spellings of each mapped to one kind."""

PATH_KINDS = frozenset(
    ("include_dir", "quote_dir", "system_dir", "after_dir", "forced_include", "forced_macros",
     "library_dir")
)  # fmt: skip
"""Kinds whose value is a path the preprocessor or linker reads (made absolute from a
config's directory)."""

_JOINED = sorted((name for name, option in OPTIONS.items() if option.joined), key=len)[::-1]
# Flags that begin like a joined option and are none: gcc's -undef defines no macro "ndef",
# nvcc's -lineinfo, -lib and -link link no library "ineinfo", "ib" or "ink".
_WHOLE_FLAGS = frozenset(("-undef", "-lineinfo", "-lib", "-link"))
# Flags without a value that ask for dependency output: dropped from a preprocess-only run
# (nvcc refuses them with -E, and the list is no concern of the macros).
DEPENDENCY_FLAGS = frozenset(
    ("-MD", "-MMD", "-MP", "--generate-dependencies-with-compile",
     "--generate-nonsystem-dependencies-with-compile")
)  # fmt: skip


@dataclass(frozen=True)
class Argument:
    """One argument of a command with its value: `index` in argv, `kind` in `OPTIONS` (None:
    no such option, `value` the argument itself), and `args`, the one or two arguments it
    spans (`-I dir` is two, `-Idir` one)."""

    index: int
    kind: str | None
    value: str
    args: tuple[str, ...]

    @property
    def bare(self) -> bool:
        """An argument that is no option: a file name, or a wrapper's own word."""
        return self.kind is None and not self.value.startswith("-")


def arguments(argv: Sequence[str], start: int = 1) -> Iterator[Argument]:
    """Each argument from `start` (after the compiler's name), an option's value with it."""
    index = start
    while index < len(argv):
        arg = argv[index]
        following = argv[index + 1] if index + 1 < len(argv) else None
        kind, value, separate = read_option(arg, following)
        args = tuple(argv[index : index + 2 if separate else index + 1])
        yield Argument(index, kind, value, args)
        index += len(args)


def read_option(arg: str, following: str | None) -> tuple[str | None, str, bool]:
    """`arg` as (its kind in `OPTIONS`, its value, whether the value is `following`), or
    (None, arg, False) when it is no option that takes a value (or the value is missing)."""
    option = OPTIONS.get(arg)
    if option is not None and following is not None:
        return option.kind, following, True
    spelling, equals, value = arg.partition("=")
    option = OPTIONS.get(spelling)
    if equals and value and option is not None and option.equals:
        return option.kind, value, False
    for spelling in _JOINED if arg not in _WHOLE_FLAGS else ():
        value = arg[len(spelling) :]
        if arg.startswith(spelling) and value:
            if OPTIONS[spelling].kind in PATH_KINDS and value.startswith("-"):  # -include-pch
                break
            return OPTIONS[spelling].kind, value, False
    return None, arg, False


def inputs(argv: Sequence[str], kinds: frozenset[str] | None = None) -> list[Argument]:
    """The bare arguments a driver takes for inputs (of `kinds`, default all), in order;
    placeholders (`{source}`) are not among them."""
    return [
        argument
        for argument in arguments(argv)
        if argument.bare
        and "{" not in argument.value
        and (kind := input_kind(argument.value)) is not None
        and (kinds is None or kind in kinds)
    ]


def units(argv: Sequence[str]) -> list[str]:
    """The translation units a (rendered) command compiles, in order."""
    return [argument.value for argument in inputs(argv, frozenset(("unit",)))]


def values(argv: Sequence[str], kind: str) -> list[str]:
    """The values of every option of `kind`, in order."""
    return [argument.value for argument in arguments(argv) if argument.kind == kind]


# --- what nvcc is told -------------------------------------------------------------------

_ARCH_NUMBER = re.compile(r"(?:compute|sm|lto)_(\d+)[a-z]?")
_UNNAMED_ARCHS = re.compile(r"\b(?:all|all-major|native)\b")


def names_architecture(argv: Sequence[str]) -> bool:
    """Whether an nvcc command names the architectures it compiles for itself."""
    return any(argument.kind == "architecture" for argument in arguments(argv))


def architectures(argv: Sequence[str]) -> list[str] | None:
    """The virtual architectures an nvcc command compiles device code for ("80", "90", in
    order: nvcc's preprocessing pass uses the first); None for `all`, `all-major` or `native`,
    which name no list."""
    found: list[str] = []
    for value in values(argv, "architecture"):
        if _UNNAMED_ARCHS.search(value):
            return None
        found += _ARCH_NUMBER.findall(value)
    return list(dict.fromkeys(found))


def reports_resources(argv: Sequence[str]) -> bool:
    """Whether an nvcc command makes ptxas print each kernel's resources: `-Xptxas -v` (or
    `--verbose`, alone or in a comma list), `--resource-usage`."""
    for argument in arguments(argv):
        if argument.value in ("--resource-usage", "-res-usage") and argument.kind is None:
            return True
        if argument.kind == "pass_ptxas" and {"-v", "--verbose"} & set(argument.value.split(",")):
            return True
    return False


def resource_report_flags(argv: Sequence[str]) -> tuple[str, ...]:
    """What an nvcc command needs added for ptxas's report of each kernel's resources:
    `-Xptxas -v`, or nothing when it asks for the report already."""
    return () if reports_resources(argv) else ("-Xptxas", "-v")


# --- a compile command template ----------------------------------------------------------

TEMPLATE_PLACEHOLDERS = ("defines", "includes", "output", "source")
"""What annotune fills in a compile command: the variant's source and program, its `-D` flags
and include directories."""

_TEMPLATE_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def template_mistake(argv: Sequence[str]) -> tuple[int | None, str] | None:
    """What is wrong with a compile command template (not a preset's name), as the index of
    the argument at fault (None: the command as a whole) and a message; None when nothing is.
    One reading for the config, which locates it (FILE:LINE:COL of `compile`), and for
    `--compile` and the builder, which cannot. A `{source}` and an `{output}` are needed, no
    other placeholder is known, and the program must be written where the last `-o` says (a
    compiler that takes gcc's or nvcc's options keeps the last of several): `-o {output}
    -o prog` writes `prog`, where annotune would find no program."""
    for index, arg in enumerate(argv):
        for name in _TEMPLATE_PLACEHOLDER.findall(arg):
            if name not in TEMPLATE_PLACEHOLDERS:
                known = ", ".join("{" + k + "}" for k in TEMPLATE_PLACEHOLDERS)
                return index, (
                    f"unknown placeholder {{{name}}} in the compile command (known: {known})"
                )
    for required in ("{source}", "{output}"):
        if required not in argv:
            return None, f"the compile command needs a {required} argument"
    if knows_options(argv[0]):
        outputs = [argument for argument in arguments(argv) if argument.kind == "output"]
        if outputs and "{output}" in values(argv, "output") and outputs[-1].value != "{output}":
            return outputs[-1].index, (
                f"the compiler writes its program where the last -o says ({outputs[-1].value}), "
                "not to {output}, where annotune reads it: make `-o {output}` the last -o"
            )
    return None


def last_output_only(argv: Sequence[str]) -> list[str]:
    """`argv` with every output option (`-o FILE`, `--output-file=FILE`) but the last left
    out: what gcc's, clang's and nvcc's drivers do with several (the last wins). Run as
    written, a second `-o` breaks what annotune adds: cc1 refuses it with `-E` ("output
    filename specified twice") and with `-MD` ("too many filenames given")."""
    outputs = [argument for argument in arguments(argv) if argument.kind == "output"]
    if len(outputs) < 2:
        return list(argv)
    dropped = {argument.index for argument in outputs[:-1]}
    kept = [argv[0]]
    for argument in arguments(argv):
        if argument.index not in dropped:
            kept += argument.args
    return kept


# --- response files ------------------------------------------------------------------------


def expand_responses(
    argv: Sequence[str],
    read: Callable[[str], tuple[str, ...] | None],
    seen: frozenset[str] = frozenset(),
) -> list[str]:
    """`argv` with each response file (`@FILE`, nvcc's `--options-file A,B`) that `read`
    (given its absolute path) can read replaced by its arguments, themselves expanded; one that
    cannot be read, or names itself directly or not, is left as written."""
    expanded: list[str] = []
    index = 0
    while index < len(argv):
        arg = argv[index]
        following = argv[index + 1] if index + 1 < len(argv) else None
        kind, value, separate = read_option(arg, following)
        span = 2 if separate else 1
        if kind == "options_file":
            names = value.split(",")
        elif arg.startswith("@") and len(arg) > 1 and "{" not in arg:
            names = [arg[1:]]
        else:
            expanded.append(arg)
            index += 1
            continue
        words: list[str] | None = []
        for name in names:
            path = os.path.join(os.getcwd(), name)
            held = None if path in seen else read(path)
            if held is None or words is None:
                words = None
                continue
            words += expand_responses(held, read, seen | {path})
        expanded += argv[index : index + span] if words is None else words
        index += span
    return expanded
