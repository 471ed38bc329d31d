"""The libclang front end: the translation unit's tokens, directives and functions.

libclang parses the file (CUDA as CUDA, C as C, C++ as C++) with `-nostdinc` and a small shim
for the CUDA keywords, so that no CUDA toolkit or system header is needed; missing system
headers are expected and ignored. From the translation unit we take:

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
import ctypes
import functools
import os
from dataclasses import dataclass, field
from pathlib import Path

import clang.cindex as ci

from annotune.core.diagnostics import AnnotuneError, Location

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

    def location(self, offset: int) -> Location:
        """1-based line and column of a byte offset."""
        line = bisect.bisect_right(self.line_starts, offset)
        return Location(self.path, line, offset - self.line_starts[line - 1] + 1)

    def offset(self, location: Location) -> int:
        """The byte offset of a location in this file (`location`'s inverse)."""
        return self.line_starts[location.line - 1] + location.column - 1

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
    """A located error for a path that is missing, a directory, or unreadable."""
    where = Location(str(path), 1, 1)
    if path.is_dir():
        raise AnnotuneError("is a directory, not a source file", where)
    if not path.exists():
        raise AnnotuneError("no such file", where)
    try:
        with path.open("rb"):
            pass
    except OSError as error:
        raise AnnotuneError(f"cannot read file: {error.strerror}", where) from None


def language_of(path: Path) -> str:
    return LANGUAGES.get(path.suffix.lower(), "c++")


def clang_args(language: str, include_dirs: list[str], defines: list[str]) -> list[str]:
    if language == "cuda":
        args = ["-x", "cuda", "--cuda-host-only", "-nocudainc", "-nocudalib", "-std=c++17"]
        args += ["-include", SHIM_PATH]
    elif language == "c":
        args = ["-x", "c", "-std=c11"]
    else:
        args = ["-x", "c++", "-std=c++17"]
    args += ["-nostdinc", "-fopenacc", "-fopenmp", "-Wno-everything"]
    args += [f"-I{d}" for d in include_dirs] + [f"-I{ANNOTUNE_INCLUDE_DIR}"]
    args += [f"-D{d}" for d in defines]
    return args


def parse_source(
    path: Path, *, include_dirs: list[str] | None = None, defines: list[str] | None = None
) -> ParsedSource:
    """Parse `path` and collect its own and its local headers' tokens and directives."""
    if not path.is_file():
        raise AnnotuneError("no such file", Location(str(path), 1, 1))
    try:
        path.read_bytes()
    except OSError as error:
        raise AnnotuneError(
            f"cannot read file: {error.strerror}", Location(str(path), 1, 1)
        ) from None
    language = language_of(path)
    args = clang_args(language, include_dirs or [], defines or [])
    index = ci.Index.create()
    try:
        tu = index.parse(
            str(path), args=args, unsaved_files=[(SHIM_PATH, CUDA_SHIM)], options=_PARSE_OPTIONS
        )
    except ci.TranslationUnitLoadError:
        raise AnnotuneError(
            "libclang could not parse this file", Location(str(path), 1, 1)
        ) from None

    display = {os.path.realpath(str(path)): str(path)}
    missing: list[tuple[Location, str]] = []
    includes: dict[tuple[str, int], str] = {}
    user_dirs = [os.path.realpath(d) for d in include_dirs or []]
    timing_header = _collect_local_includes(tu, display, missing, includes, user_dirs)

    expanded = _expansions(tu, display)
    files = [_load_file(tu, key, shown, expanded[key]) for key, shown in display.items()]
    functions = _functions(tu, display)
    return ParsedSource(
        files[0], files, functions, missing, language, includes, timing_header=timing_header
    )


def _collect_local_includes(
    tu: ci.TranslationUnit,
    display: dict[str, str],
    missing: list[tuple[Location, str]],
    includes: dict[tuple[str, int], str],
    user_dirs: list[str],
) -> bool:
    """Follow `#include "..."` from the main file through local headers, and `#include <...>`
    where it finds a header in one of `user_dirs` (the configured include directories: their
    headers are the project's, however included); return whether one of them is annotune's
    timing header (then every run must print its time).

    The preprocessing record lists inclusions in translation order, and a header's own
    inclusions follow the line that includes it, so one pass reaches every depth.
    """
    timing_header = False
    for cursor in tu.cursor.get_children():
        if cursor.kind != ci.CursorKind.INCLUSION_DIRECTIVE or cursor.location.file is None:
            continue
        includer = os.path.realpath(cursor.location.file.name)
        if includer not in display:
            continue
        quoted = any(t.spelling.startswith('"') for t in cursor.get_tokens())
        try:
            included = cursor.get_included_file()
        except AssertionError:  # libclang returns a null file when the header was not found
            included = None
        where = Location(display[includer], cursor.location.line, cursor.location.column)
        if included is None:
            if quoted:
                missing.append((where, cursor.spelling))
            continue
        key = os.path.realpath(included.name)
        if Path(key).parent == ANNOTUNE_INCLUDE_DIR:
            timing_header = timing_header or Path(key).name == TIMING_HEADER
            continue
        if key == SHIM_PATH or not (quoted or _inside(key, user_dirs)):
            continue
        if key not in display:
            display[key] = os.path.normpath(included.name)
        includes[(where.file, where.line)] = display[key]
    return timing_header


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
        name = cursor.location.file.name
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
    tu: ci.TranslationUnit, key: str, shown: str, expanded: frozenset[int]
) -> SourceFile:
    data = Path(key).read_bytes()
    clang_file = tu.get_file(key)
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


def _directives(source: SourceFile) -> list[Directive]:
    data = source.data
    tokens = source.tokens
    directives: list[Directive] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        starts_line = data[_line_start(data, token.start) : token.start].strip() == b""
        if not (token.kind == "punctuation" and token.text == "#" and starts_line):
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
    if data[_line_start(data, previous.start) : previous.start].strip() != b"":
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
        key = os.path.realpath(location.file.name)
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
