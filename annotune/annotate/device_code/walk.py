"""The walk's state: the user's files as the AST names them (their tokens, libclang's errors in
them), what is blanked so far, and the primitives every part of the walk blanks with (a
declaration and the `;` that ends it, however far). One `Walk` serves one slice."""

from __future__ import annotations

import bisect
import os

import clang.cindex as ci

from annotune.annotate.device_code.records import Span
from annotune.annotate.source import ParsedSource, SourceFile, Token


def span(extent: ci.SourceRange) -> Span:
    return (extent.start.line, extent.start.column, extent.end.line, extent.end.column)


def line_column(source: SourceFile, offset: int) -> tuple[int, int]:
    """The 1-based line and byte column of a byte offset (libclang's, unlike Location's)."""
    line = bisect.bisect_right(source.line_starts, offset)
    return line, offset - source.line_starts[line - 1] + 1


class Walk:
    """One pass over the AST's declarations in the user's files, collecting what to blank."""

    def __init__(self, parsed: ParsedSource, tu: ci.TranslationUnit) -> None:
        self.keys = {os.path.realpath(f.path): os.path.abspath(f.path) for f in parsed.files}
        self.sources = {os.path.abspath(f.path): f for f in parsed.files}
        self._starts: dict[str, list[int]] = {}  # each file's token starts, for bisecting
        self._code_tokens: dict[str, tuple[list[Token], list[int]]] = {}
        self.found: dict[str, list[Span]] = {key: [] for key in self.keys.values()}
        self.blanked: set[tuple[str, int]] = set()  # variables, by (file, offset)
        self.seen: dict[str, list[Span]] = {key: [] for key in self.keys.values()}
        self.errors: dict[str, list[tuple[int, int, str]]] = {}
        self.host_functions: set[str] = set()  # the names of the functions blanked
        self.host_names: set[str] = set()  # and of the typedefs and aliases blanked
        # Classes kept whole though a field's type is one the parse lacks (a system header's
        # `struct timeval`), and typedefs of such types: (file, cursor, what to blank with it).
        self.lacking: list[tuple[str, ci.Cursor, ci.Cursor]] = []
        self.device_functions: set[str] = set()  # and of those kept
        self._real: dict[str, str] = {}
        for diagnostic in tu.diagnostics:
            where = diagnostic.location
            if diagnostic.severity >= ci.Diagnostic.Error and where.file is not None:
                key = self.key(where.file.name)
                if key is not None:
                    self.errors.setdefault(key, []).append(
                        (where.line, where.column, diagnostic.spelling)
                    )

    def key(self, name: str) -> str | None:
        real = self._real.get(name)
        if real is None:
            real = self._real[name] = os.path.realpath(name)
        return self.keys.get(real)

    def file(self, cursor: ci.Cursor) -> str | None:
        """The user file holding the whole declaration, None if it is no user's or the
        declaration spans files (a macro's expansion)."""
        extent = cursor.extent
        start, end = extent.start.file, extent.end.file
        if cursor.location.file is None or start is None or end is None:
            return None
        key = self.key(cursor.location.file.name)
        if key is None or self.key(start.name) != key or self.key(end.name) != key:
            return None
        return key

    def blank(self, key: str, cursor: ci.Cursor, statement: bool = False) -> None:
        """Blank the declaration and the `;` after it: the one just after it, or with
        `statement` the one ending it (or its body's `}`), however far (an invalid
        declaration's extent stops before its initialiser)."""
        extent = cursor.extent
        start, end = extent.start, extent.end
        last = self.last_token(key, end.offset, statement)
        if last is None:
            self.found[key].append((start.line, start.column, end.line, end.column))
            return
        end_at = line_column(self.sources[key], last + 1)
        self.found[key].append((start.line, start.column, *end_at))

    def statement_start(self, key: str, offset: int) -> int:
        """Where the namespace-scope statement around `offset` starts: after the `;`, `{`
        or `}` before it, or after the directive or comment before it."""
        source = self.sources[key]
        directives = [(d.hash_token.start, d.end) for d in source.directives]
        tokens = source.tokens
        index = bisect.bisect_right(self.token_starts(key), offset) - 1
        start = tokens[index].start
        for token in reversed(tokens[:index]):
            in_directive = any(a <= token.start <= b for a, b in directives)
            if in_directive or token.text in (";", "{", "}"):
                break
            if token.kind != "comment":
                start = token.start
        return start

    def code(self, key: str) -> tuple[list[Token], list[int]]:
        """The file's tokens but comments, and where each starts."""
        if key not in self._code_tokens:
            tokens = [t for t in self.sources[key].tokens if t.kind != "comment"]
            self._code_tokens[key] = (tokens, [t.start for t in tokens])
        return self._code_tokens[key]

    def token_starts(self, key: str) -> list[int]:
        if key not in self._starts:
            self._starts[key] = [t.start for t in self.sources[key].tokens]
        return self._starts[key]

    def last_token(self, key: str, offset: int, statement: bool) -> int | None:
        """The offset of the `;` that ends a declaration ending at `offset`, or None. With
        `statement`, the `;` at its depth however far, or the `}` of a brace group at its
        depth that neither `;` nor `,` follows: a body, which ends the declaration. libclang
        reads a host function whose parameter's type it does not know (`void f(std::vector<int>
        &v) {...}`) as a variable `f` initialised by `(...)`, its extent stopping at `f`."""
        tokens, starts = self.code(key)
        depth = 0
        for index in range(bisect.bisect_left(starts, offset), len(tokens)):
            text = tokens[index].text
            if text == ";" and depth == 0:
                return tokens[index].start
            if not statement:
                return None
            if text in ("(", "[", "{"):
                depth += 1
            elif text in (")", "]", "}"):
                if depth == 0:
                    return None
                depth -= 1
                following = tokens[index + 1].text if index + 1 < len(tokens) else ""
                if text == "}" and depth == 0 and following not in (";", ","):
                    return tokens[index].start
        return None

    def words(self, key: str, cursor: ci.Cursor) -> set[str]:
        """The texts of the tokens in the declaration's extent, read from the file: libclang's
        own come back empty for an extent that starts with a macro (`__global__`)."""
        starts = self.token_starts(key)
        first = bisect.bisect_left(starts, cursor.extent.start.offset)
        last = bisect.bisect_left(starts, cursor.extent.end.offset)
        return {t.text for t in self.sources[key].tokens[first:last]}

    def errors_in(self, key: str, start: ci.SourceLocation, end: ci.SourceLocation) -> list[str]:
        low, high = (start.line, start.column), (end.line, end.column)
        return [text for *at, text in self.errors.get(key, ()) if low <= tuple(at) < high]
