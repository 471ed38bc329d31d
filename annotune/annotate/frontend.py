"""The libclang front end: the translation unit's tokens, directives and functions.

libclang parses the file (CUDA as CUDA, C as C, C++ as C++: by its extension, or as the
configured compile command compiles it) with `-nostdinc` and a small shim for the CUDA
keywords, so that no CUDA toolkit or system header is needed; missing system headers are
expected and ignored. The macros the compiler predefines that decide CUDA code's `#if`
branches (`compiler_macros`) are defined for it. It parses in a forked child process under an
address-space and a CPU-time limit (`PARSE_MEMORY`, `PARSE_SECONDS`), so that a source whose
macros expand exponentially is a located error, not annotune killed for memory; file names
pass through it as bytes (`os.fsencode`), UTF-8 or not. From the translation unit we take:

- the raw tokens (comments included) of the main file and of every local header it includes
  with `#include "..."` (or with `<...>` from a configured include directory), through clang's
  own lexer;
- which of their text the preprocessor skipped (`#if` branches not taken under the flags in
  use), from libclang's skipped ranges and its record of macro expansions;
- the preprocessor directives, rebuilt from those tokens (libclang exposes no cursor for
  `#ifndef` or `#pragma`), with the comments that sit on or just above them;
- the function definitions, to say in which function (or kernel) a parameter is used.
"""

from __future__ import annotations

import bisect
import codecs
import contextlib
import ctypes
import functools
import os
import pickle
import re
import resource
import signal
import stat
import subprocess
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import clang.cindex as ci

from annotune.core import limits
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.inputs import SOURCE, argument_path, check_input, read_input

SHIM_PATH = "/__annotune__/cuda_shim.h"
ANNOTUNE_INCLUDE_DIR = Path(__file__).resolve().parent.parent / "include"
"""annotune's own headers (annotune_timing.h): on every include path, never the user's files."""
TIMING_HEADER = "annotune_timing.h"

# Just enough of CUDA for libclang to build an AST of a .cu file without the toolkit.
CUDA_SHIM = """
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __managed__ __attribute__((managed))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define __forceinline__ inline
#define __restrict__ __restrict
struct dim3 {
  unsigned x, y, z;
  dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};
struct uint3 { unsigned x, y, z; };
extern const uint3 threadIdx, blockIdx;
extern const dim3 blockDim, gridDim;
extern const int warpSize;
typedef struct CUstream_st *cudaStream_t;
extern "C" unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block,
                                                 unsigned long shared = 0, void *stream = 0);
"""

LANGUAGES = {
    ".cu": "cuda",
    ".cuh": "cuda",
    ".c": "c",
    ".h": "c++",
    ".hpp": "c++",
    ".hh": "c++",
    ".cc": "c++",
    ".cpp": "c++",
    ".cxx": "c++",
}

_FORCED = ("-include", "-imacros")  # compile-command options naming a file, not a directory

# CXTranslationUnit_KeepGoing: keep parsing after a fatal error such as a missing header.
_KEEP_GOING = 0x200
_PARSE_OPTIONS = (
    ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD
    | ci.TranslationUnit.PARSE_INCOMPLETE
    | _KEEP_GOING
)


@dataclass(frozen=True)
class Token:
    kind: str  # "comment", "identifier", "keyword", "literal", "punctuation"
    text: str
    start: int  # byte offsets into the file
    end: int


@dataclass(frozen=True)
class Directive:
    """One preprocessor line (`#define`, `#pragma`, `#ifndef`, ...), continuation lines joined.

    `words` are its tokens after the directive name, comments excluded; `comments` are the
    comments on its lines plus a comment standing alone on the line just above it.
    """

    name: str
    hash_token: Token
    words: tuple[Token, ...]
    comments: tuple[Token, ...]
    end: int


@dataclass
class SourceFile:
    """A file of the translation unit that belongs to the user (the main file or a local header)."""

    path: str  # as shown to the user
    data: bytes
    tokens: list[Token]
    directives: list[Directive] = field(default_factory=list)
    skipped: list[tuple[int, int]] = field(default_factory=list)  # skipped #if branches, sorted
    expanded: frozenset[int] = frozenset()  # offsets of the macro names the preprocessor expanded
    _line_starts: list[int] = field(default_factory=list, repr=False)
    _last: tuple[int, int, int] = field(default=(0, 0, 0), repr=False)  # line, offset, column

    def location(self, offset: int) -> Location:
        """1-based line and column of a byte offset. The column counts characters, as every
        Location's does (what an editor shows and the caret lines up under), not bytes."""
        line = bisect.bisect_right(self.line_starts, offset)
        start = self.line_starts[line - 1]
        if self.is_ascii:
            return Location(self.path, line, offset - start + 1)
        column = 1
        if self._last[0] == line and start <= self._last[1] <= offset:  # uses come in order:
            start, column = self._last[1:]  # a long line is decoded once, not once per use
        before = self.data[start:offset]
        if start == 0:
            before = before.removeprefix(codecs.BOM_UTF8)
        column += len(before.decode("utf-8", errors="replace"))
        if offset == len(self.data) or not 0x80 <= self.data[offset] < 0xC0:
            self._last = (line, offset, column)  # decoding may restart here: not mid-character
        return Location(self.path, line, column)

    def location_in(self, start: int, text: str, offset: int) -> Location:
        """Where character `offset` of `text` is, `text` being this file's bytes from byte
        `start` decoded (a comment, a pragma's body): the grammar's offsets count characters."""
        before = text[:offset]
        newlines = before.count("\n")
        at = self.location(start)
        if not newlines:
            return at.shifted(offset)
        return Location(self.path, at.line + newlines, offset - before.rfind("\n"))

    def offset(self, location: Location) -> int:
        """The byte offset of a location in this file (`location`'s inverse): the last byte
        whose column is the location's, so a character's first byte."""
        low = self.line_starts[location.line - 1]
        lines = len(self.line_starts)
        high = self.line_starts[location.line] - 1 if location.line < lines else len(self.data)
        while low < high:
            middle = (low + high + 1) // 2
            if self.location(middle).column <= location.column:
                low = middle
            else:
                high = middle - 1
        return low

    @functools.cached_property
    def is_ascii(self) -> bool:
        return self.data.isascii()

    @property
    def line_starts(self) -> list[int]:
        if not self._line_starts:
            self._line_starts = [0] + [i + 1 for i, ch in enumerate(self.data) if ch == 0x0A]
        return self._line_starts

    def is_active(self, offset: int) -> bool:
        """Whether the compiler sees the text at `offset` under the flags in use.

        Not when it lies in an `#if` branch the preprocessor skipped. A skipped range begins
        with the `#if`/`#elif` whose condition failed, yet that condition was evaluated: a
        macro expanded there is active.
        """
        if offset in self.expanded:
            return True
        index = bisect.bisect_right(self.skipped, (offset, float("inf"))) - 1
        return index < 0 or offset >= self.skipped[index][1]

    def slice(self, start: int, end: int) -> str:
        return self.data[start:end].decode("utf-8", errors="replace")


@dataclass(frozen=True)
class FunctionDef:
    file: str
    name: str
    start: int
    end: int
    is_kernel: bool


@dataclass
class ParsedSource:
    """What the front end hands on: the user's files, their functions, what was not found."""

    main: SourceFile
    files: list[SourceFile]
    functions: list[FunctionDef]
    missing_local_includes: list[tuple[Location, str]]
    language: str
    includes: dict[tuple[str, int], str]  # (file, line of #include "...") -> the local header
    timing_header: bool = False  # whether annotune_timing.h is included
    _by_file: dict[str, list[FunctionDef]] | None = field(default=None, repr=False)

    def file(self, path: str) -> SourceFile:
        return next(f for f in self.files if f.path == path)

    def is_active(self, location: Location) -> bool:
        """Whether the compiler sees this place in one of the user's files (`SourceFile`'s)."""
        source = self.file(location.file)
        return source.is_active(source.offset(location))

    def function_at(self, file: str, offset: int) -> FunctionDef | None:
        """The innermost function definition around `offset` (bisect over sorted starts)."""
        if self._by_file is None:
            self._by_file = {}
            for function in sorted(self.functions, key=lambda f: f.start):
                self._by_file.setdefault(function.file, []).append(function)
        functions = self._by_file.get(file, [])
        index = bisect.bisect_right([f.start for f in functions], offset)
        for function in reversed(functions[:index]):
            if offset < function.end:
                return function
        return None


def check_readable(path: Path) -> None:
    """A located error for a path that is missing, unreadable, not a regular file (a
    directory, a FIFO, a device) or too large to be a source."""
    check_input(path, SOURCE)


def language_of(path: Path) -> str:
    return LANGUAGES.get(path.suffix.lower(), "c++")


def compiler_macros(language: str, compiler: str | None) -> list[str]:
    """The macros a compiler predefines that CUDA code tests and libclang leaves undefined:
    `__CUDACC__` where CUDA is compiled (by nvcc, NVRTC or clang), `__NVCC__` wherever nvcc
    compiles, a .cpp too. `compiler`: the compile command's file name or preset; None, the
    default one: nvcc for CUDA."""
    cuda = ["__CUDACC__"] if language == "cuda" else []
    nvcc = compiler == "nvcc" or (compiler is None and language == "cuda")
    return cuda + (["__NVCC__"] if nvcc else [])


RUNTIME_GUARDS = (
    *("__COMMON_FUNCTIONS_H__", "__CUDA_RUNTIME_API_H__", "__CUDA_RUNTIME_H__"),
    *("__DEVICE_ATOMIC_FUNCTIONS_H__", "__DEVICE_DOUBLE_FUNCTIONS_H__"),
    *("__DEVICE_FUNCTIONS_H__", "__DEVICE_LAUNCH_PARAMETERS_H__", "__DEVICE_TYPES_H__"),
    *("__DRIVER_TYPES_H__", "__HOST_CONFIG_H__", "__HOST_DEFINES_H__"),
    *("__LIBRARY_TYPES_H__", "__MATH_FUNCTIONS_H__", "__SURFACE_TYPES_H__"),
    *("__SURFACE_INDIRECT_FUNCTIONS_H__", "__TEXTURE_TYPES_H__"),
    *("__TEXTURE_INDIRECT_FUNCTIONS_H__", "__VECTOR_FUNCTIONS_H__", "__VECTOR_TYPES_H__"),
)
"""The include guards of the runtime headers nvcc and NVRTC include before a CUDA file's first
line (`cuda_runtime.h` and what it includes), defined empty for libclang's parse as they are
there: a `#ifdef __DRIVER_TYPES_H__` branch of the user's (cuda-samples' `helper_cuda.h`: host
helpers) is taken as the compiler takes it. Probed through NVRTC 13 itself (`#ifdef G` after an
empty program), leaving out its `__SM_*_H__` ones, which no corpus program tests. A guard only a
header the user includes defines (`__CUDA_FP16_H__`) is not: a test of it after that `#include`
still takes another branch here than under the compiler."""


def clang_args(
    language: str,
    include_dirs: list[str],
    defines: list[str],
    flags: Sequence[tuple[str, str]] = (),
) -> list[str]:
    """libclang's arguments; `flags` are the compile command's other search directories and
    forced includes, (option, path): `-iquote`, `-isystem`, `-idirafter`, `-include`,
    `-imacros`."""
    if language == "cuda":
        args = ["-x", "cuda", "--cuda-host-only", "-nocudainc", "-nocudalib", "-std=c++17"]
        args += ["-include", SHIM_PATH, *(f"-D{guard}=" for guard in RUNTIME_GUARDS)]
    elif language == "c":
        args = ["-x", "c", "-std=c11"]
    else:
        args = ["-x", "c++", "-std=c++17"]
    args += ["-nostdinc", "-fopenacc", "-fopenmp", "-Wno-everything"]
    args += [f"-I{d}" for d in include_dirs] + [f"-I{ANNOTUNE_INCLUDE_DIR}"]
    args += [arg for option, path in flags for arg in (option, path)]
    args += [f"-D{d}" for d in defines]
    return args


def parse_source(
    path: Path,
    *,
    include_dirs: list[str] | None = None,
    defines: list[str] | None = None,
    language: str | None = None,
    flags: Sequence[tuple[str, str]] = (),
) -> ParsedSource:
    """Parse `path` and collect its own and its local headers' tokens and directives.

    As the compiler reads it: in `language` (by default the extension's), with `include_dirs`
    (their headers are the project's, however included), `defines` and `flags` (`clang_args`).
    """
    data = read_input(path, SOURCE)
    dirs = [p for option, p in flags if option not in _FORCED]
    search = [*(include_dirs or []), *dirs, str(ANNOTUNE_INCLUDE_DIR)]
    _check_headers(path, data, search, [Path(p) for option, p in flags if option in _FORCED])
    language = language or language_of(path)
    args = clang_args(language, include_dirs or [], defines or [], flags)
    return _bounded(
        functools.partial(_parse, path, data, args, include_dirs or [], language),
        Location(str(path), 1, 1),
    )


PARSE_MEMORY = 4 << 30
"""The address space libclang may take beyond what the process holds when it parses, in bytes:
a source whose macros expand exponentially (`#define L1 L0 L0`, 40 levels) would take every
byte of the machine's memory."""
PARSE_SECONDS = 300
"""The CPU seconds libclang may take to parse one source (its wall time: twice that)."""


def _bounded(parse: Callable[[], ParsedSource], where: Location) -> ParsedSource:
    """`parse()` in a child process with an address-space and a time limit, its result sent
    back pickled. A parser bomb ends that child, not annotune: a located error. An
    AnnotuneError in the child is raised here as it was; a bug, as a RuntimeError with the
    child's traceback. The child is forked (it inherits libclang, loaded, and costs a few
    milliseconds) when that is safe (`_fork_unsafe`: under Ray, gRPC's fork handlers abort a
    forked child), else a fresh interpreter is spawned (a few tenths of a second)."""
    payload, status = _spawned(parse, where) if _fork_unsafe() else _forked(parse, where)
    try:
        kind, value = pickle.loads(payload)
    except Exception:  # nothing, or half of it: the child died
        kind, value = "died", status
    if kind == "ok":
        return value
    if kind == "error":
        message, location, hint = value
        raise AnnotuneError(message, location, hint=hint)
    if kind == "bug":
        raise RuntimeError(f"the parser failed:\n{value}")
    if value in (signal.SIGXCPU, signal.SIGALRM):
        seconds = _cpu_ceiling()
        if seconds.inherited:
            raise AnnotuneError(
                f"libclang was stopped by the CPU-time limit annotune inherited ({seconds.granted}"
                f" s, less than the {PARSE_SECONDS} s it allows a parse)",
                where,
                hint=_INHERITED_HINT,
            )
        raise AnnotuneError(
            f"libclang took more than {PARSE_SECONDS} s of CPU time parsing this file, and was "
            "stopped",
            where,
            hint=_BOMB_HINT,
        )
    raise _out_of_memory(where)


def _fork_unsafe() -> bool:
    """Whether gRPC may be running in this process, whose fork handlers abort a forked child:
    Ray's, once it is initialized (the tune of several devices), or the `grpc` package's."""
    ray = sys.modules.get("ray")
    initialized = getattr(ray, "is_initialized", None)
    return "grpc" in sys.modules or (callable(initialized) and bool(initialized()))


def _forked(parse: Callable[[], ParsedSource], where: Location) -> tuple[bytes, int]:
    """The child's pickled outcome and the signal that ended it (0: none), forked."""
    ci.conf.lib  # noqa: B018  (loaded once, here, rather than in every child)
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError as error:
        os.close(read_end)
        os.close(write_end)
        raise AnnotuneError(f"cannot start the parser: {error.strerror}", where) from None
    if pid == 0:  # the child: never returns
        os.close(read_end)
        code = 70
        try:
            outcome = _outcome(parse)
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(outcome)
            code = 0
        finally:
            os._exit(code)  # nothing of the parent's runs: no atexit handler, no flush twice
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as pipe:
            payload = pipe.read()
        _, status = os.waitpid(pid, 0)
    except BaseException:  # Ctrl-C: the child goes too
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        raise
    return payload, os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0


def _spawned(parse: Callable[[], ParsedSource], where: Location) -> tuple[bytes, int]:
    """The same as `_forked`, in a fresh interpreter that reads `parse`, pickled, on its
    standard input and writes the outcome on its standard output (`serve_parse`)."""
    command = [sys.executable, "-c", "from annotune.annotate.frontend import serve_parse as s; s()"]
    try:
        done = subprocess.run(command, input=pickle.dumps(parse), capture_output=True, check=False)
    except OSError as error:
        raise AnnotuneError(f"cannot start the parser: {error.strerror}", where) from None
    return done.stdout, -done.returncode if done.returncode < 0 else 0


def serve_parse() -> None:
    """A spawned parser's body (`_spawned`)."""
    parse = pickle.loads(sys.stdin.buffer.read())
    try:
        outcome = _outcome(parse)
    except BaseException:
        os._exit(70)
    sys.stdout.buffer.write(outcome)
    sys.stdout.buffer.flush()


def _outcome(parse: Callable[[], ParsedSource]) -> bytes:
    """In the child: limit itself, parse, and the pickled outcome ("ok", "error" or "bug");
    running out of memory raises (the child then dies with nothing sent)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C ends it at once
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    limits.set_limit(resource.RLIMIT_AS, _memory_ceiling().wanted)
    limits.set_limit(resource.RLIMIT_CPU, PARSE_SECONDS, PARSE_SECONDS + 5)
    signal.alarm(2 * PARSE_SECONDS)
    quiet = os.open(os.devnull, os.O_WRONLY)  # libclang's "LLVM ERROR: out of memory"
    os.dup2(quiet, 2)
    try:
        outcome: tuple = ("ok", parse())
    except AnnotuneError as error:
        outcome = ("error", (error.message, error.location, error.hint))
    except MemoryError:
        raise
    except Exception:
        outcome = ("bug", traceback.format_exc())
    return pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)


_BOMB_HINT = (
    "a macro whose expansion doubles at each level (#define L1 L0 L0, L2 L1 L1, ...) expands "
    "exponentially: no compiler can preprocess it"
)


_INHERITED_HINT = (
    "the limit is the machine's or the job's (ulimit -v, ulimit -t, a batch system's memory "
    "request), not annotune's: raise it, or run annotune where more is allowed"
)


def _memory_ceiling() -> limits.Ceiling:
    """The address space a parse may use: `PARSE_MEMORY` more than this process holds, or
    less where the limit this process inherited is lower."""
    wanted = limits.held_address_space() + PARSE_MEMORY
    return limits.Ceiling(wanted, limits.clamp(resource.RLIMIT_AS, wanted))


def _cpu_ceiling() -> limits.Ceiling:
    return limits.Ceiling(PARSE_SECONDS, limits.clamp(resource.RLIMIT_CPU, PARSE_SECONDS))


def _out_of_memory(where: Location) -> AnnotuneError:
    """One error whether libclang gave up on its own or its process died: under the limit it
    does either, by where the allocation that failed was. Where the limit in force is the one
    annotune inherited, smaller than its own, the error says so: the file need not be at
    fault."""
    ceiling = _memory_ceiling()
    if ceiling.inherited:
        held = limits.held_address_space()
        return AnnotuneError(
            f"libclang ran out of memory parsing this file under the address-space limit "
            f"annotune inherited ({limits.gib(ceiling.granted)} GiB, of which annotune holds "
            f"{limits.gib(held)} GiB; a parse may take {limits.gib(PARSE_MEMORY)} GiB)",
            where,
            hint=_INHERITED_HINT,
        )
    return AnnotuneError(
        f"libclang ran out of memory or failed parsing this file (its limit: "
        f"{PARSE_MEMORY / (1 << 30):g} GiB more than annotune holds)",
        where,
        hint=_BOMB_HINT,
    )


def _parse(
    path: Path, data: bytes, args: list[str], include_dirs: list[str], language: str
) -> ParsedSource:
    """libclang's translation unit of `path` (whose bytes are `data`), and what the front end
    takes from it (`parse_source`); run in a child process (`_bounded`)."""
    index = ci.Index.create()
    # The bytes just read, not the file again: what the front end saw is what it reports on.
    name = argument_path(path)  # `-x.c` is no option
    # Bytes, not text: a name that is not UTF-8 (`k\xff.c`, legal on Linux) is passed as it is.
    unsaved = [(SHIM_PATH, CUDA_SHIM), (os.fsencode(name), data)]
    arguments = [os.fsencode(arg) for arg in args]
    try:
        tu = index.parse(
            os.fsencode(name), args=arguments, unsaved_files=unsaved, options=_PARSE_OPTIONS
        )
    except ci.TranslationUnitLoadError:  # libclang's own answer to running out of memory
        raise _out_of_memory(Location(str(path), 1, 1)) from None

    display = {os.path.realpath(str(path)): str(path)}
    user_dirs = [os.path.realpath(d) for d in include_dirs]
    inclusions, timing_header = _collect_local_includes(tu, display, user_dirs)

    expanded = _expansions(tu, display)
    main = next(iter(display))
    loaded = {
        key: _load_file(tu, key, shown, data if key == main else None, expanded[key])
        for key, shown in display.items()
    }
    missing: list[tuple[Location, str]] = []
    includes: dict[tuple[str, int], str] = {}
    for includer, offset, spelling, header in inclusions:
        where = loaded[includer].location(offset)  # the lines and columns of our Locations
        if header is None:
            missing.append((where, spelling))
        else:
            includes[(where.file, where.line)] = display[header]
    files = list(loaded.values())
    functions = _functions(tu, display)
    return ParsedSource(
        files[0], files, functions, missing, language, includes, timing_header=timing_header
    )


_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*(["<])([^">\r\n]+)[">]', re.MULTILINE)


def _check_headers(path: Path, data: bytes, search: list[str], forced: list[Path]) -> None:
    """Refuse a header clang would hang on or read without end, before clang opens it: a FIFO
    blocks it forever, `/dev/zero` fills memory, and libclang cannot be told not to open them.

    The `#include` lines of the source, of the `forced` includes and, recursively, of each
    header they find are followed as written (in every `#if` branch, no macro expanded),
    looked up as clang does: a quoted name beside its includer first, then in `search`. Each
    header found must be a regular file within the size of a source; one not found is clang's
    to report.
    """
    pending = [(path, data), *((header, read_input(header, SOURCE)) for header in forced)]
    seen = {os.path.realpath(path), *(os.path.realpath(header) for header in forced)}
    while pending:
        includer, text = pending.pop()
        for match in _INCLUDE.finditer(text):
            name = os.fsdecode(match.group(2))
            directories = [str(includer.parent)] if match.group(1) == b'"' else []
            header = _first_existing([Path(d) / name for d in [*directories, *search]])
            if header is None or os.path.realpath(header) in seen:
                continue
            try:
                contents = read_input(header, SOURCE)
            except AnnotuneError as error:
                where = SourceFile(str(includer), text, []).location(match.start(2))
                raise AnnotuneError(f"header '{name}' {error.message}", where) from None
            seen.add(os.path.realpath(header))
            pending.append((header, contents))


def _first_existing(candidates: list[Path]) -> Path | None:
    """The header clang's lookup stops at: the first candidate that exists and is not a
    directory (a missing one, a loop of links or a NUL byte in the name: clang's to report)."""
    for candidate in candidates:
        try:
            if not stat.S_ISDIR(os.stat(candidate).st_mode):
                return candidate
        except (OSError, ValueError):
            continue
    return None


def _collect_local_includes(
    tu: ci.TranslationUnit, display: dict[str, str], user_dirs: list[str]
) -> tuple[list[tuple[str, int, str, str | None]], bool]:
    """Follow `#include "..."` from the main file through local headers, and `#include <...>`
    where it finds a header in one of `user_dirs` (the configured include directories: their
    headers are the project's, however included). Return each inclusion in a user's file (the
    includer's real path, the byte offset of the directive, the name written, the real path
    of the local header or None when a quoted one was not found), and whether one of the
    headers is annotune's timing header (then every run must print its time).

    The preprocessing record lists inclusions in translation order, and a header's own
    inclusions follow the line that includes it, so one pass reaches every depth.
    """
    timing_header = False
    inclusions: list[tuple[str, int, str, str | None]] = []
    for cursor in tu.cursor.get_children():
        if cursor.kind != ci.CursorKind.INCLUSION_DIRECTIVE or cursor.location.file is None:
            continue
        includer = os.path.realpath(file_name(cursor.location.file))
        if includer not in display:
            continue
        quoted = any(_spelling(t).startswith('"') for t in cursor.get_tokens())
        try:
            included = cursor.get_included_file()
        except AssertionError:  # libclang returns a null file when the header was not found
            included = None
        offset = cursor.location.offset
        if included is None:
            if quoted:
                inclusions.append((includer, offset, _spelling(cursor), None))
            continue
        key = os.path.realpath(file_name(included))
        if Path(key).parent == ANNOTUNE_INCLUDE_DIR:
            timing_header = timing_header or Path(key).name == TIMING_HEADER
            continue
        if key == SHIM_PATH or not (quoted or _inside(key, user_dirs)):
            continue
        if key not in display:
            display[key] = os.path.normpath(file_name(included))
        inclusions.append((includer, offset, _spelling(cursor), key))
    return inclusions, timing_header


@functools.cache
def _string_functions() -> dict:
    """libclang's functions that return a string, made to give its bytes: the bindings decode
    every string as strict UTF-8, and a file name need not be UTF-8 (`k\xff.c`)."""
    lib = ci.conf.lib

    def fresh(name: str, argtypes: list, restype: object):
        function = lib._FuncPtr((name, lib))  # not the bindings' own, whose result is decoded
        function.argtypes, function.restype = argtypes, restype
        return function

    return {
        "file": fresh("clang_getFileName", [ci.File], ci._CXString),
        "cursor": fresh("clang_getCursorSpelling", [ci.Cursor], ci._CXString),
        "token": fresh("clang_getTokenSpelling", [ci.TranslationUnit, ci.Token], ci._CXString),
        "bytes": fresh("clang_getCString", [ci._CXString], ctypes.c_char_p),
    }


def _string(kind: str, *args: object) -> str:
    """A string libclang returns, decoded as a file name is (`os.fsdecode`: a byte that is not
    UTF-8 kept as a surrogate, so that the name still opens the file). The string is freed
    with its `_CXString`, whose finalizer disposes of it."""
    functions = _string_functions()
    result = functions[kind](*args)
    return os.fsdecode(functions["bytes"](result) or b"")


def file_name(clang_file: ci.File) -> str:
    """The name of a file of a translation unit, `os.fsdecode`d (`_string`)."""
    return _string("file", clang_file)


def _spelling(item: ci.Cursor | ci.Token) -> str:
    if isinstance(item, ci.Token):
        return _string("token", item._tu, item)
    return _string("cursor", item)


def _inside(path: str, directories: list[str]) -> bool:
    return any(os.path.commonpath([path, d]) == d for d in directories)


def _expansions(tu: ci.TranslationUnit, display: dict[str, str]) -> dict[str, frozenset[int]]:
    """Where the preprocessor expanded a macro in each user file (the detailed processing
    record lists every expansion, those in `#if` conditions included)."""
    found: dict[str, set[int]] = {key: set() for key in display}
    real: dict[str, str] = {}  # the path libclang names -> its real path, looked up once
    for cursor in tu.cursor.get_children():
        if cursor.kind != ci.CursorKind.MACRO_INSTANTIATION or cursor.location.file is None:
            continue
        name = file_name(cursor.location.file)
        key = real.setdefault(name, os.path.realpath(name))
        if key in found:
            found[key].add(cursor.location.offset)
    return {key: frozenset(offsets) for key, offsets in found.items()}


class _SourceRangeList(ctypes.Structure):
    _fields_ = [("count", ctypes.c_uint), ("ranges", ctypes.POINTER(ci.SourceRange))]


@functools.cache
def _skipped_ranges_functions() -> tuple:
    """clang_getSkippedRanges and its free function, which the Python bindings do not wrap."""
    get, dispose = ci.conf.lib.clang_getSkippedRanges, ci.conf.lib.clang_disposeSourceRangeList
    get.argtypes = [ci.TranslationUnit, ci.File]
    get.restype = ctypes.POINTER(_SourceRangeList)
    dispose.argtypes = [ctypes.POINTER(_SourceRangeList)]
    return get, dispose


def _skipped_ranges(tu: ci.TranslationUnit, clang_file: ci.File) -> list[tuple[int, int]]:
    """The byte ranges of `clang_file` in `#if` branches the preprocessor skipped, sorted."""
    get, dispose = _skipped_ranges_functions()
    ranges = get(tu, clang_file)
    if not ranges:
        return []
    try:
        listed = ranges.contents
        return sorted((r.start.offset, r.end.offset) for r in listed.ranges[: listed.count])
    finally:
        dispose(ranges)


def _token_kind(token: ci.Token) -> str:
    return {
        ci.TokenKind.COMMENT: "comment",
        ci.TokenKind.IDENTIFIER: "identifier",
        ci.TokenKind.KEYWORD: "keyword",
        ci.TokenKind.LITERAL: "literal",
        ci.TokenKind.PUNCTUATION: "punctuation",
    }[token.kind]


def _load_file(
    tu: ci.TranslationUnit, key: str, shown: str, data: bytes | None, expanded: frozenset[int]
) -> SourceFile:
    """A user's file: its bytes (`data`, else read: a local header) and clang's tokens of it."""
    if data is None:
        data = read_input(Path(shown), SOURCE)
    clang_file = tu.get_file(os.fsencode(key))
    extent = ci.SourceRange.from_locations(
        ci.SourceLocation.from_offset(tu, clang_file, 0),
        ci.SourceLocation.from_offset(tu, clang_file, len(data)),
    )
    tokens = []
    for clang_token in tu.get_tokens(extent=extent):
        span = clang_token.extent
        start, end = span.start.offset, span.end.offset
        # Spelled from the bytes: libclang's own spelling fails on invalid UTF-8.
        text = data[start:end].decode("utf-8", errors="replace")
        tokens.append(Token(_token_kind(clang_token), text, start, end))
    source = SourceFile(shown, data, tokens, [], _skipped_ranges(tu, clang_file), expanded)
    source.directives = _directives(source)
    return source


def _logical_line_end(data: bytes, offset: int) -> int:
    """Offset of the newline that ends the (backslash-continued) line holding `offset`."""
    while True:
        newline = data.find(b"\n", offset)
        if newline < 0:
            return len(data)
        if data[:newline].rstrip(b"\r").endswith(b"\\"):
            offset = newline + 1
            continue
        return newline


def _line_start(data: bytes, offset: int) -> int:
    return data.rfind(b"\n", 0, offset) + 1


def _blank(text: bytes) -> bool:
    """Whether the text before a token on its line is only blanks (a file's byte order mark
    too: an editor's, and the compiler skips it)."""
    return text.removeprefix(codecs.BOM_UTF8).strip() == b""


def _directives(source: SourceFile) -> list[Directive]:
    data = source.data
    tokens = source.tokens
    directives: list[Directive] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        # Whether "#" starts its line only for a "#": the text before every token of a long
        # line (a generated table) would be copied once per token.
        if not (
            token.kind == "punctuation"
            and token.text == "#"
            and _blank(data[_line_start(data, token.start) : token.start])
        ):
            i += 1
            continue
        end = _logical_line_end(data, token.start)
        j = i + 1
        while j < len(tokens) and tokens[j].start < end:
            j += 1
        body = tokens[i + 1 : j]
        words = tuple(t for t in body if t.kind != "comment")
        comments = [t for t in body if t.kind == "comment"]
        above = _comment_alone_on_line_above(source, tokens, i)
        if above is not None:
            comments.insert(0, above)
        name = words[0].text if words else ""
        directives.append(Directive(name, token, words[1:], tuple(comments), end))
        i = j
    return directives


def _comment_alone_on_line_above(
    source: SourceFile, tokens: list[Token], hash_index: int
) -> Token | None:
    """A comment that fills the line(s) just above a directive documents it."""
    if hash_index == 0:
        return None
    previous = tokens[hash_index - 1]
    if previous.kind != "comment":
        return None
    data = source.data
    between = data[previous.end : tokens[hash_index].start]
    if between.count(b"\n") != 1 or between.strip() != b"":
        return None
    if not _blank(data[_line_start(data, previous.start) : previous.start]):
        return None
    return previous


def _functions(tu: ci.TranslationUnit, display: dict[str, str]) -> list[FunctionDef]:
    kinds = {
        ci.CursorKind.FUNCTION_DECL,
        ci.CursorKind.CXX_METHOD,
        ci.CursorKind.FUNCTION_TEMPLATE,
        ci.CursorKind.CONSTRUCTOR,
    }
    found: list[FunctionDef] = []
    stack = list(tu.cursor.get_children())
    while stack:
        cursor = stack.pop()
        location = cursor.location
        if location.file is None:
            continue
        key = os.path.realpath(file_name(location.file))
        if key not in display:
            continue
        if cursor.kind in kinds and cursor.is_definition():
            is_kernel = any(c.kind == ci.CursorKind.CUDAGLOBAL_ATTR for c in cursor.get_children())
            found.append(
                FunctionDef(
                    display[key],
                    cursor.spelling,
                    cursor.extent.start.offset,
                    cursor.extent.end.offset,
                    is_kernel,
                )
            )
        elif cursor.kind in (
            ci.CursorKind.NAMESPACE,
            ci.CursorKind.LINKAGE_SPEC,
        ) or cursor.kind in (ci.CursorKind.STRUCT_DECL, ci.CursorKind.CLASS_DECL):
            stack.extend(cursor.get_children())
    return found
