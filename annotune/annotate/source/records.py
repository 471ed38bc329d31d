"""What the front end hands on: the user's files as libclang read them (their tokens,
directives, skipped `#if` branches, the macros expanded), their functions, and the parse whole."""

from __future__ import annotations

import bisect
import codecs
import functools
from dataclasses import dataclass, field

from annotune.core.diagnostics import Location


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
class TextSpan:
    """Bytes [start, end) of a file: where a default value is written, for rewriting copies."""

    file: str
    start: int
    end: int


@dataclass(frozen=True)
class FunctionDef:
    """A function defined in one of the user's files: bytes [start, end) of `file`; a kernel
    (`__global__`), or device code (`__device__`, with `__host__` or without)."""

    file: str
    name: str
    start: int
    end: int
    is_kernel: bool
    is_device: bool = False

    @property
    def runs_on_device(self) -> bool:
        """Whether its body is device code, where `blockDim` and the like are CUDA's."""
        return self.is_kernel or self.is_device


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
    # Every place a file was looked for, absolute, in order: the headers found (any file of
    # the unit's, system ones too), the places tried before each and those of one not found,
    # the forced includes (`annotate.source.search`). Its appearing is a change, as theirs is.
    searched: list[str] = field(default_factory=list)
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
