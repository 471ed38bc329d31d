"""Declarations for files that must not be edited: `annotune.toml` or `[tool.annotune]`.

    # annotune.toml, beside the sources or in a parent directory
    [[file]]
    path = "polybench/2mm.cu"          # relative to this config file, as are the paths below
    include = ["common"]               # extra include directories (libclang's and the compiler's)
    compile = "nvcc -O3 -Icommon {source} -o {output}"   # optional: a preset name or a template
    defines = ["LARGE_DATASET", "ALPHA=2"]   # optional: -D flags added to compile (a template)
    run_dir = "data"                   # optional: where the program runs
    time_regex = 'took ([0-9.]+) s'    # optional: the time, read from the output
    time_unit = "s"                    # of what time_regex captures (default "ms")
    constraints = ["DIM_THREAD_BLOCK_X * DIM_THREAD_BLOCK_Y <= 1024"]
    [file.params]
    DIM_THREAD_BLOCK_X = "pow2(1, 1024)"                       # default: the #define's value
    DIM_THREAD_BLOCK_Y = { domain = "range(1, 32)", default = 8 }
    THREADS = { domain = "values(1, 2, 4)", default = 1 }     # no #define: used in env alone
    [file.env]                         # optional: set for every run
    OMP_PROC_BIND = "close"
    OMP_NUM_THREADS = "{THREADS}"      # a parameter's value: the variable is tuned
    [[file.kernel]]                    # optional: kernel mode's launch (annotate.kernels)
    name = "mm2_kernel1"
    grid = "NJ / DIM_THREAD_BLOCK_X, NI / DIM_THREAD_BLOCK_Y"
    block = "DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y"
    args = ["in(NI * NK)", "in(NK * NJ)", "out(NI * NJ)"]

libclang reads the source as `compile` has the compiler read it, or scan and tune would
disagree on which `#if` branch is taken: in the language it names (`-x cu` makes a .cpp CUDA; a
C++ driver such as g++ reads a .c as C++), with its `-D`/`-U` flags in order, its include
directories (`-I`, `-iquote`, `-isystem`, `-idirafter`, nvcc's long spellings) and its forced
includes (`-include`, `-imacros`). `defines` become `-D` flags of the compile command itself,
before `{source}`, so they reach every variant's compile: hence they need a template, and a
macro the template already sets may not be set again to another value.

A `[[gpu]]` entry, in the format of annotune's GPU table (`annotune/transfer/gpus.toml`),
describes a GPU that table lacks; `annotune.transfer.resolve` reads and checks those entries.
The same tables go under `[tool.annotune]` in a pyproject.toml. The nearest config file
above the source that mentions it wins, looked for up to the repository's root or the user's
home, and used only when the user owns it and no one else may write it (`find_config`). Every
key is checked, in every `[[file]]`: a misspelt one would otherwise be ignored without a word.
"""

from __future__ import annotations

import bisect
import difflib
import grp
import math
import os
import pwd
import re
import shlex
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from annotune.annotate.grammar import (
    DeclaredClause,
    DeclaredKernel,
    Domain,
    GrammarError,
    parse_domain,
)
from annotune.annotate.problem import EnvSetting, RunSettings
from annotune.annotate.source import language_of
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.inputs import CONFIG, SOURCE, check_input, read_text
from annotune.core.records import Number

PRESETS = ("nvcc", "gcc", "g++", "nvc", "nvc++", "cc", "c++")  # names build.compiler knows

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CONFIG_NAMES = ("annotune.toml", "pyproject.toml")
_TOP_KEYS = {"file", "gpu"}
_FILE_KEYS = {
    "path",
    "include",
    "constraints",
    "params",
    "defines",
    "compile",
    "run_dir",
    "args",
    "time_regex",
    "time_unit",
    "env",
    "timeout",
    "repeats",
    "warmup",
    "kernel",
}
_PARAM_KEYS = {"domain", "default"}
_KERNEL_KEYS = {"name", "grid", "block", "shared", "args", "tolerance", "constants"}  # clauses
_TIME_UNITS = ("s", "ms", "us", "ns")  # those run.program knows
_C_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a macro's, or an environment variable's
_ENV_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
# The compile command's options that tell its preprocessor something (and `-L`, a path too),
# each spelling of gcc, clang and nvcc mapped to one name.
_OPTIONS = {
    "-I": "-I",
    "--include-path": "-I",
    "-iquote": "-iquote",
    "-isystem": "-isystem",
    "--system-include": "-isystem",
    "-idirafter": "-idirafter",
    "-include": "-include",
    "--pre-include": "-include",
    "-imacros": "-imacros",
    "-D": "-D",
    "--define-macro": "-D",
    "-U": "-U",
    "--undefine-macro": "-U",
    "-x": "-x",
    "--x": "-x",
    "-L": "-L",
    "--library-path": "-L",
}
_PATH_OPTIONS = {"-I", "-iquote", "-isystem", "-idirafter", "-include", "-imacros", "-L"}
# Those whose value may be joined to them (`-Idir`, `-DNAME`, `-xc++`), longest first.
_JOINED = ("-idirafter", "-isystem", "-iquote", "-imacros", "-include")
_JOINED += ("-I", "-D", "-U", "-L", "-x")
# `-x` values: nvcc's (c, c++, cu) and gcc's or clang's; "none" and any other: by extension.
_LANGUAGES = {
    "c": "c",
    "c-header": "c",
    "c++": "c++",
    "c++-header": "c++",
    "cu": "cuda",
    "cuda": "cuda",
}
# Compiler drivers that compile a .c file as C++ (g++-12, clang++, nvc++, MPI and Intel ones).
_CXX_DRIVER = re.compile(r"(g\+\+|c\+\+|clang\+\+|nvc\+\+|mpicxx|mpic\+\+|icpx|icpc|CC)(-[\d.]+)?")
_DEFINE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\([^()\n\r]*\))?(=[^\n\r]*)?")


@dataclass(frozen=True)
class ConfigParam:
    name: str
    domain: Domain
    default: Number | None
    location: Location  # the parameter's key
    default_location: Location | None = None  # where `default = ...` is written


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
    (clang's option, path).
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
    kernels: tuple[DeclaredKernel, ...] = ()  # `[[file.kernel]]`, checked by annotate.kernels


_TOML_TOKEN = re.compile(
    r'(?P<string>"""(?:\\[\s\S]|[^\\])*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:\\.|[^"\\\n])*"|\'[^\'\n]*\')'
    r"|(?P<comment>#[^\n]*)|(?P<newline>\n)|(?P<space>[ \t\r]+)"
    r"|(?P<word>[A-Za-z0-9_+\-:]+)|(?P<mark>.)"
)


class _Positions:
    """Where each key and value of a TOML document is written (tomllib reports no positions).

    Paths are the data's: `("file", 0, "params", "X")` is the key X of the first `[[file]]`'s
    params, whether written under `[file.params]`, as `params.X = ...` or in an inline table.
    The document is valid TOML (tomllib read it first), so a token scan is enough.
    """

    def __init__(self, path: Path, text: str):
        self.file = str(path)
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self._keys: dict[tuple, int] = {}
        self._values: dict[tuple, int] = {}
        tokens = [
            (m.lastgroup, m.group(), m.start())
            for m in _TOML_TOKEN.finditer(text)
            if m.lastgroup not in ("space", "comment")
        ]
        self._scan(tokens)

    def key(self, path: tuple) -> Location:
        """Where the key at `path` is written (else its nearest written parent)."""
        return self._find(path, self._keys, self._values)

    def value(self, path: tuple) -> Location:
        """Where the value at `path` starts: a string's first character inside its quotes."""
        return self._find(path, self._values, self._keys)

    def _find(self, path: tuple, first: dict, then: dict) -> Location:
        for end in range(len(path), 0, -1):
            for table in (first, then):
                if path[:end] in table:
                    return self._location(table[path[:end]])
        return Location(self.file, 1, 1)

    def _location(self, offset: int) -> Location:
        line = bisect.bisect_right(self._line_starts, offset)
        return Location(self.file, line, offset - self._line_starts[line - 1] + 1)

    def _scan(self, tokens: list[tuple[str, str, int]]) -> None:
        arrays: dict[tuple[str, ...], int] = {}  # [[name]] -> how many seen so far
        table: tuple = ()  # the path of the current [table]
        stack: list[list] = []  # open inline tables [path, None] and arrays [path, index]
        expect_key = True
        i = 0
        while i < len(tokens):
            kind, text, start = tokens[i]
            if kind == "newline":
                expect_key = expect_key or not stack
                i += 1
            elif expect_key and not stack and text == "[" and i + 1 < len(tokens):  # [table]
                double = tokens[i + 1][1] == "[" and tokens[i + 1][2] == start + 1  # [[table]]
                names, offsets, i = _dotted_key(tokens, i + 1 + double)
                if double:
                    arrays[names] = arrays.get(names, 0) + 1
                table = ()
                for n, (name, offset) in enumerate(zip(names, offsets, strict=True), 1):
                    table += (name,)
                    self._keys.setdefault(table, offset)
                    if names[:n] in arrays:
                        table += (arrays[names[:n]] - 1,)
                        self._keys.setdefault(table, offset)
                expect_key = False
            elif expect_key and kind in ("word", "string"):  # key = value
                names, offsets, i = _dotted_key(tokens, i)
                path = stack[-1][0] if stack else table
                for name, offset in zip(names, offsets, strict=True):
                    path += (name,)
                    self._keys.setdefault(path, offset)
                i = self._value(tokens, i + 1, path, stack)  # i + 1: past the "="
                expect_key = tokens[i - 1][1] == "{"
            elif stack and text in ("]", "}"):
                stack.pop()
                expect_key = False  # a value ended: a "," or a newline comes before a key
                i += 1
            elif stack and text == ",":
                if stack[-1][1] is None:
                    expect_key = True
                else:
                    stack[-1][1] += 1
                i += 1
            elif stack and stack[-1][1] is not None:  # an element of an array
                i = self._value(tokens, i, (*stack[-1][0], stack[-1][1]), stack)
                expect_key = tokens[i - 1][1] == "{"
            else:
                i += 1

    def _value(self, tokens: list, i: int, path: tuple, stack: list[list]) -> int:
        """Record where the value at `path` starts; open it if it is an inline table or array."""
        if i >= len(tokens):
            return len(tokens)
        kind, text, start = tokens[i]
        quotes = 3 if text[:3] in ('"""', "'''") else 1 if kind == "string" else 0
        if quotes == 3 and text[3:4] == "\n":  # TOML trims a newline right after the quotes
            quotes += 1
        self._values.setdefault(path, start + quotes)
        if text in ("{", "["):
            stack.append([path, None if text == "{" else 0])
        return i + 1


def _dotted_key(tokens: list, i: int) -> tuple[tuple[str, ...], list[int], int]:
    """The parts of the key starting at token `i`, their offsets, and the index past it."""
    names: list[str] = []
    offsets: list[int] = []
    while i < len(tokens) and tokens[i][1] not in ("=", "]"):
        kind, text, start = tokens[i]
        if kind in ("word", "string"):
            names.append(_key_name(kind, text))
            offsets.append(start)
        i += 1
    while i < len(tokens) and tokens[i][1] == "]":
        i += 1
    return tuple(names), offsets, i


def _key_name(kind: str, text: str) -> str:
    """A bare key as written; a quoted one decoded by tomllib itself (escapes and all)."""
    if kind != "string":
        return text
    try:
        return tomllib.loads(f"k = {text}")["k"]
    except tomllib.TOMLDecodeError:  # a token the scan split oddly: its position still helps
        return text.strip("\"'")


def find_config(source: Path) -> Path | None:
    """The nearest annotune.toml, or pyproject.toml with [tool.annotune], above `source`.

    Looked for as git looks for a repository: from the source's directory up to the first
    that holds `.git` (the repository's root) or is the user's home, `/` at the latest, so
    that a config planted in /tmp or a shared parent does not reach the sources below it. The
    config found must be the user's own (`_check_trusted`): it names the compile command run
    for every build.
    """
    home = _home()
    start = Path(os.path.realpath(source)).parent
    for directory in [start, *start.parents]:
        for name in CONFIG_NAMES:
            candidate = directory / name
            if os.path.lexists(candidate) and (
                name == "annotune.toml" or _has_tool_table(candidate)
            ):
                _check_trusted(candidate)
                return candidate
        if directory == home or os.path.lexists(directory / ".git"):
            return None
    return None


def _home() -> Path | None:
    home = os.path.expanduser("~")
    return Path(os.path.realpath(home)) if os.path.isabs(home) else None


def _has_tool_table(pyproject: Path) -> bool:
    """Whether a pyproject.toml on the way up holds [tool.annotune]. One that cannot be read
    is an error, not skipped: it is inside the user's repository or home, every other tool
    fails on it too, and skipping it would drop the table it may hold for a config above."""
    try:
        data = _parse_toml(read_text(pyproject, CONFIG), pyproject)
    except AnnotuneError as error:
        raise AnnotuneError(
            error.message,
            error.location,
            hint="annotune reads every pyproject.toml above the source for [tool.annotune]; "
            "fix this one, or pass --config PATH",
        ) from None
    return isinstance(data.get("tool"), dict) and "annotune" in data["tool"]


def _check_trusted(config: Path) -> None:
    """Refuse a config found above the source that another user could have written: one not
    owned by the user (nor by root, who could change anything anyway), or writable by others,
    or by a group other than the user's private one (Debian and Ubuntu give each user a group
    of their own and umask 002, so every new file is group-writable). Git refuses a repository
    of another owner for the same reason. A config named with --config is not checked."""
    status = check_input(config, CONFIG)
    mode = status.st_mode & 0o777
    if status.st_uid not in (os.geteuid(), 0):
        why = f"owned by {_user_name(status.st_uid)}, not by you"
    elif mode & 0o002:
        why = f"writable by every user (mode {mode:o})"
    elif mode & 0o020 and not _private_group(status.st_gid):
        why = f"writable by group {_group_name(status.st_gid)} (mode {mode:o})"
    else:
        return
    raise AnnotuneError(
        f"not using this config: it is {why}, and it names the commands annotune runs",
        Location(str(config), 1, 1),
        hint=f"pass --config {config} to use it anyway",
    )


def _private_group(gid: int) -> bool:
    """Whether group `gid` is the user's own: named as the user, their primary group, with
    no other member."""
    try:
        group, user = grp.getgrgid(gid), pwd.getpwuid(os.geteuid())
    except KeyError:
        return False
    return (
        group.gr_name == user.pw_name and user.pw_gid == gid and set(group.gr_mem) <= {user.pw_name}
    )


def _user_name(uid: int) -> str:
    try:
        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _group_name(gid: int) -> str:
    try:
        return f"{grp.getgrgid(gid).gr_name} (gid {gid})"
    except KeyError:
        return f"gid {gid}"


def _parse_toml(text: str, path: Path) -> dict:
    """The TOML document; a mistake located in it."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        # Python < 3.14 keeps the position only in the message: "... (at line 2, column 12)".
        where = re.search(r"\(at line (\d+), column (\d+)\)", str(error))
        line, column = (int(where.group(1)), int(where.group(2))) if where else (1, 1)
        message = str(error).split(" (at ")[0]
        raise AnnotuneError(f"invalid TOML: {message}", Location(str(path), line, column)) from None
    except RecursionError:  # tomllib reads nested arrays and tables recursively
        raise AnnotuneError(
            "invalid TOML: arrays or tables nested too deeply", Location(str(path), 1, 1)
        ) from None


def load_file_config(config_path: Path, source: Path) -> FileConfig | None:
    """The `[[file]]` entry of `config_path` naming `source`, or None if there is none."""
    text = read_text(config_path, CONFIG)
    data = _parse_toml(text, config_path)
    where = _Positions(config_path, text)
    _reject_nul(data, where, ())
    top: tuple = ()
    if config_path.name == "pyproject.toml":
        top = ("tool", "annotune")
        tool = data.get("tool")
        data = tool.get("annotune", {}) if isinstance(tool, dict) else {}
        if not isinstance(data, dict):
            raise AnnotuneError("[tool.annotune] must be a table", where.key(top))
    entries = _checked_entries(data, where, top)
    target = os.path.realpath(source)  # realpath: a loop of links is no error here
    for index, entry in enumerate(entries):
        at = (*top, "file", index)
        path = entry.get("path")
        if not isinstance(path, str):
            raise AnnotuneError('each [[file]] needs a path = "..."', where.value((*at, "path")))
        if os.path.realpath(config_path.parent / path) == target:
            return _file_config(entry, config_path.parent, where, at, str(config_path), source)
    return None


def _reject_nul(value: object, where: _Positions, at: tuple) -> None:
    """A NUL character (TOML's "\\u0000") in any key or string: no path, argument or
    environment variable can hold one, and the operating system would refuse it later."""
    if isinstance(value, dict):
        for key, item in value.items():
            if "\0" in key:
                raise AnnotuneError("a key cannot hold a NUL character", where.key((*at, key)))
            _reject_nul(item, where, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _reject_nul(item, where, (*at, index))
    elif isinstance(value, str) and "\0" in value:
        raise AnnotuneError("a string cannot hold a NUL character", where.value(at))


def _checked_entries(data: dict, where: _Positions, top: tuple) -> list[dict]:
    """The `[[file]]` tables, once every key in the document is known to annotune."""
    _known_keys(data, _TOP_KEYS, where, top, "[tool.annotune]" if top else "annotune.toml")
    entries = data.get("file", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise AnnotuneError(
            "'file' must be an array of tables ([[file]])", where.key((*top, "file"))
        )
    for index, entry in enumerate(entries):
        at = (*top, "file", index)
        _known_keys(entry, _FILE_KEYS, where, at, "[[file]]")
        params = entry.get("params")
        for name, spec in params.items() if isinstance(params, dict) else ():
            if isinstance(spec, dict):
                _known_keys(spec, _PARAM_KEYS, where, (*at, "params", name), f"parameter {name}")
        kernels = entry.get("kernel", [])
        for number, kernel in enumerate(kernels if isinstance(kernels, list) else ()):
            if isinstance(kernel, dict):
                _known_keys(kernel, _KERNEL_KEYS, where, (*at, "kernel", number), "[[file.kernel]]")
    return entries


def _known_keys(table: dict, known: set[str], where: _Positions, at: tuple, what: str) -> None:
    for key in table:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = (
                f"did you mean '{close[0]}'?" if close else f"expected: {', '.join(sorted(known))}"
            )
            raise AnnotuneError(
                f"unknown key {_quoted(key)} in {what} ({hint})", where.key((*at, key))
            )


def _quoted(key: str) -> str:
    """A key as a message shows it: quoted, escapes for control characters, cut if long."""
    return repr(key if len(key) <= 40 else key[:40] + "...")


def _file_config(
    entry: dict, base: Path, where: _Positions, at: tuple, config_file: str, source: Path
) -> FileConfig:
    params = tuple(
        _config_param(name, spec, where, (*at, "params", name))
        for name, spec in _table(entry, "params", where, at).items()
    )
    constraints = tuple(
        (expr, where.value((*at, "constraints", index)))
        for index, expr in enumerate(_string_list(entry, "constraints", where, at))
    )
    include_dirs = tuple(_from(base, d) for d in _string_list(entry, "include", where, at))
    compile_argv = _with_defines(_compile(entry, base, where, at), entry, where, at)
    settings = _settings(entry, compile_argv, base, where, at)
    kernels = _kernels(entry, where, at)
    if compile_argv is None:
        return FileConfig(
            config_file, params, constraints, include_dirs, settings=settings, kernels=kernels
        )
    view = _command_view(compile_argv, source)
    for option, path in view.flags:
        if option in ("-include", "-imacros"):
            _check_forced(option, path, where.value((*at, "compile")))
    return FileConfig(
        config_file,
        params,
        constraints,
        include_dirs,
        view.defines,
        settings,
        undefined=view.undefined,
        language=view.language,
        compiler=view.compiler,
        command_include_dirs=view.include_dirs,
        command_flags=view.flags,
        kernels=kernels,
    )


def _kernels(entry: dict, where: _Positions, at: tuple) -> tuple[DeclaredKernel, ...]:
    """`[[file.kernel]]`: each clause's text where it is written, for `annotate.kernels` to read
    with the pragma's grammar; here only the table's shape is checked."""
    tables = entry.get("kernel", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise AnnotuneError(
            "'kernel' must be an array of tables ([[file.kernel]])", where.key((*at, "kernel"))
        )
    kernels = []
    for number, table in enumerate(tables):
        here = (*at, "kernel", number)
        name = table.get("name")
        if not isinstance(name, str) or not _C_NAME.fullmatch(name.split("<", 1)[0].strip()):
            raise AnnotuneError(
                'each [[file.kernel]] needs name = "KERNEL" (the __global__ function\'s name, '
                'with its template arguments for a template: "KERNEL<float, BLOCK>")',
                where.value((*here, "name")) if "name" in table else where.key(here),
            )
        clauses = []
        for clause in ("grid", "block", "shared", "args", "tolerance", "constants"):
            value = table.get(clause)
            if value is None:
                continue
            if clause == "tolerance" and type(value) in (int, float):
                value = repr(value)  # a TOML number as the pragma would write it
            if isinstance(value, str):
                pieces = ((value, where.value((*here, clause))),)
            elif clause in ("args", "constants") and isinstance(value, list):
                if not all(isinstance(v, str) for v in value):
                    raise AnnotuneError(
                        f"'{clause}' must be a string or a list of strings",
                        where.key((*here, clause)),
                    )
                pieces = tuple(
                    (v, where.value((*here, clause, index))) for index, v in enumerate(value)
                )
            else:
                listed = clause in ("args", "constants")
                kind = "a string or a list of strings" if listed else "a string"
                raise AnnotuneError(f"'{clause}' must be {kind}", where.value((*here, clause)))
            clauses.append(DeclaredClause(clause, pieces))
        kernels.append(DeclaredKernel(name, where.value((*here, "name")), tuple(clauses)))
    return tuple(kernels)


def _from(base: Path, path: str) -> str:
    """A path written in the config: relative to the config file's directory."""
    return path if Path(path).is_absolute() else os.path.realpath(base / path)


def _compile(entry: dict, base: Path, where: _Positions, at: tuple) -> tuple[str, ...] | None:
    """`compile`: a preset name, or a command (a string, or a list of arguments) whose relative
    paths are made absolute from the config's directory, as a Makefile beside it means them."""
    value = entry.get("compile")
    if value is None:
        return None
    argv = [value] if isinstance(value, str) else _string_list(entry, "compile", where, at)
    if len(argv) == 1 and argv[0] not in PRESETS:
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
    return tuple(_absolute_args(argv, base))


def _absolute_args(argv: list[str], base: Path) -> list[str]:
    """The path arguments made absolute: the values of `-I`-like options, and any other
    argument that names an existing file beside the config (a compiler's bare name is looked up
    on PATH)."""
    compiler = argv[0]
    named = "/" in compiler and _names_file(compiler, base)
    absolute = [_from(base, compiler) if named else compiler]
    for _, name, value, args in _arguments(argv):
        if name is None and _names_file(value, base):
            absolute.append(_from(base, value))
        elif name in _PATH_OPTIONS and "{" not in value:  # a placeholder: annotune fills it in
            path = _from(base, value)
            absolute += [args[0], path] if len(args) == 2 else [args[0][: -len(value)] + path]
        else:
            absolute += args
    return absolute


def _names_file(arg: str, base: Path) -> bool:
    if "{" in arg or arg.startswith("-"):
        return False
    try:
        return (base / arg).exists()
    except OSError:  # a name too long for one (a script given with `python -c`)
        return False


def _arguments(argv: Sequence[str]) -> Iterator[tuple[int, str | None, str, list[str]]]:
    """Each argument after the compiler's name, an option's value with it: its index, the
    option's name in `_OPTIONS` (None: another argument), its value (or the argument itself),
    and the arguments it spans (two when the value is the next one: `-I dir`)."""
    index = 1
    while index < len(argv):
        arg = argv[index]
        following = argv[index + 1] if index + 1 < len(argv) else None
        name, value, separate = _option(arg, following)
        args = list(argv[index : index + 2 if separate else index + 1])
        yield index, name, value, args
        index += len(args)


def _option(arg: str, following: str | None) -> tuple[str | None, str, bool]:
    """`arg` as (its name in `_OPTIONS`, its value, whether the value is `following`), or
    (None, arg, False) when it is no such option."""
    if arg in _OPTIONS and following is not None:
        return _OPTIONS[arg], following, True
    spelling, equals, value = arg.partition("=")
    if equals and value and spelling.startswith("--") and spelling in _OPTIONS:
        return _OPTIONS[spelling], value, False
    for spelling in _JOINED if arg != "-undef" else ():  # gcc's -undef defines no macro "ndef"
        value = arg[len(spelling) :]
        if arg.startswith(spelling) and value:
            if spelling in _PATH_OPTIONS and value.startswith("-"):  # -include-pch, -I-
                break
            return spelling, value, False
    return None, arg, False


@dataclass(frozen=True)
class _CommandView:
    """What a compile command tells the preprocessor (see `FileConfig`)."""

    compiler: str
    language: str
    include_dirs: tuple[str, ...]
    flags: tuple[tuple[str, str], ...]
    defines: tuple[str, ...]
    undefined: tuple[str, ...]


def _command_view(argv: tuple[str, ...], source: Path) -> _CommandView:
    """What `argv` (a preset's name, or a command with absolute paths) tells the preprocessor
    about `source`: gcc's and clang's `-x` name the language of the files after it, nvcc's of
    every file; a macro is as its last `-D` or `-U` left it."""
    compiler = Path(argv[0]).name
    source_at = argv.index("{source}") if "{source}" in argv else len(argv)
    language = None
    include_dirs: list[str] = []
    flags: list[tuple[str, str]] = []
    macros: dict[str, str | None] = {}  # name -> its -D value, None when undefined
    for index, name, value, _ in _arguments(argv):
        if name == "-x" and (compiler == "nvcc" or index < source_at):
            if value in _LANGUAGES or value == "none":
                language = _LANGUAGES.get(value)
        elif name == "-I":
            include_dirs.append(value)
        elif name in ("-iquote", "-isystem", "-idirafter", "-include", "-imacros"):
            flags.append((name, value))
        elif name in ("-D", "-U") and (macro := _DEFINE.fullmatch(value)):
            macros.pop(macro.group(1), None)  # a later flag: last in order
            macros[macro.group(1)] = value if name == "-D" else None
    if language is None:
        language = language_of(source)
        if language == "c" and _CXX_DRIVER.fullmatch(compiler):
            language = "c++"
    return _CommandView(
        compiler,
        language,
        tuple(include_dirs),
        tuple(flags),
        tuple(value for value in macros.values() if value is not None),
        tuple(name for name, value in macros.items() if value is None),
    )


def _with_defines(
    argv: tuple[str, ...] | None, entry: dict, where: _Positions, at: tuple
) -> tuple[str, ...] | None:
    """`compile` with a `-D` flag for each of `defines` before `{source}`, so that every
    variant is compiled with them, as libclang reads the source with them. One the command
    already sets alike is not repeated; one it sets otherwise is an error (which would win?)."""
    defines = _string_list(entry, "defines", where, at)
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
        macro.group(1): (name, value)
        for _, name, value, _ in _arguments(argv)
        if name in ("-D", "-U") and (macro := _DEFINE.fullmatch(value))
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


def _check_forced(option: str, path: str, location: Location) -> None:
    """A forced include of the compile command, which libclang reads too: a regular file of a
    source's size (a FIFO would hang both), else an error at `compile`."""
    try:
        check_input(Path(path), SOURCE)
    except AnnotuneError as error:
        raise AnnotuneError(f"{option} {path}: {error.message}", location) from None


def _settings(
    entry: dict, compile_argv: tuple[str, ...] | None, base: Path, where: _Positions, at: tuple
) -> RunSettings:
    """The program's arguments, where it runs and in what environment, how its time is read,
    and run limits."""
    numbers = {}
    for key, kind in (("timeout", float), ("repeats", int), ("warmup", int)):
        value = entry.get(key)
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise AnnotuneError(f"'{key}' must be a finite number", where.value((*at, key)))
        if value is not None and (value < 0 or (kind is int and int(value) != value)):
            raise AnnotuneError(
                f"'{key}' must be a non-negative {kind.__name__}", where.value((*at, key))
            )
        if key == "repeats" and value is not None and value < 1:
            raise AnnotuneError(
                "'repeats' must be at least 1: it is the least number of timed runs",
                where.value((*at, key)),
            )
        numbers[key] = kind(value) if value is not None else None
    regex = entry.get("time_regex")
    if regex is not None:
        if not isinstance(regex, str):
            raise AnnotuneError("'time_regex' must be a string", where.value((*at, "time_regex")))
        try:
            groups = re.compile(regex).groups
        except re.error as error:
            raise AnnotuneError(
                f"invalid time_regex: {error}", where.value((*at, "time_regex"))
            ) from None
        if groups < 1:
            raise AnnotuneError(
                "time_regex needs a group capturing the time, e.g. 'took ([0-9.]+) ms'",
                where.value((*at, "time_regex")),
            )
    unit = entry.get("time_unit")
    if unit is not None and unit not in _TIME_UNITS:
        raise AnnotuneError(
            f"time_unit must be one of {', '.join(_TIME_UNITS)}, not {unit!r}",
            where.value((*at, "time_unit")),
        )
    return RunSettings(
        compile=compile_argv,
        args=tuple(_string_list(entry, "args", where, at)),
        time_regex=regex,
        time_unit=unit,
        run_dir=_run_dir(entry, base, where, at),
        env=_env(entry, where, at),
        **numbers,
    )


def _env(entry: dict, where: _Positions, at: tuple) -> tuple[EnvSetting, ...]:
    """`[file.env]`: variable names as a shell takes them, string values (nothing is run
    through a shell), each `{...}` in a value a parameter's name."""
    settings = []
    for name, value in _table(entry, "env", where, at).items():
        if not _C_NAME.fullmatch(name):
            raise AnnotuneError(
                f"{name!r} is not an environment variable's name (letters, digits, '_')",
                where.key((*at, "env", name)),
            )
        location = where.value((*at, "env", name))
        if not isinstance(value, str):
            raise AnnotuneError(f'env {name} must be a string, e.g. {name} = "{value}"', location)
        for found in _ENV_PLACEHOLDER.finditer(value):
            if not found.group(1).isidentifier():
                raise AnnotuneError(
                    f"{found.group()} in env {name} names no parameter (write {{NAME}})",
                    location.shifted(found.start()),
                )
        settings.append(EnvSetting(name, value, location))
    return tuple(settings)


def _run_dir(entry: dict, base: Path, where: _Positions, at: tuple) -> str | None:
    value = entry.get("run_dir")
    if value is None:
        return None
    if not isinstance(value, str):
        raise AnnotuneError("'run_dir' must be a string", where.value((*at, "run_dir")))
    run_dir = _from(base, value)
    if not Path(run_dir).is_dir():
        raise AnnotuneError(f"run_dir: no such directory {run_dir}", where.value((*at, "run_dir")))
    return run_dir


def _table(entry: dict, key: str, where: _Positions, at: tuple) -> dict:
    value = entry.get(key, {})
    if not isinstance(value, dict):
        raise AnnotuneError(f"'{key}' must be a table", where.key((*at, key)))
    return value


def _string_list(entry: dict, key: str, where: _Positions, at: tuple) -> list[str]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise AnnotuneError(f"'{key}' must be a list of strings", where.key((*at, key)))
    return value


def _config_param(name: str, spec: object, where: _Positions, at: tuple) -> ConfigParam:
    location = where.key(at)
    if not _C_NAME.fullmatch(name):  # it becomes a -D flag and a macro in the header
        raise AnnotuneError(f"{_quoted(name)} is not a macro name (letters, digits, '_')", location)
    if isinstance(spec, str):
        domain_text, default, domain_at = spec, None, where.value(at)
    elif isinstance(spec, dict):
        domain_text, default = spec.get("domain"), spec.get("default")
        domain_at = where.value((*at, "domain"))
        if not isinstance(domain_text, str):
            raise AnnotuneError(f'parameter {name} needs domain = "..."', location)
        if default is not None and (
            isinstance(default, bool) or not isinstance(default, int | float)
        ):
            raise AnnotuneError(
                f"default of {name} must be a number", where.value((*at, "default"))
            )
    else:
        raise AnnotuneError(f"parameter {name} must be a domain string or a table", location)
    try:
        domain = parse_domain(domain_text)
    except GrammarError as error:
        raise AnnotuneError(error.message, domain_at.shifted(error.offset)) from None
    default_at = where.value((*at, "default")) if default is not None else None
    return ConfigParam(name, domain, default, location, default_at)
