"""A user's file through clang's own lexer: its raw tokens (comments included), which of its text
the preprocessor skipped (libclang's skipped ranges) and where it expanded a macro, and its
preprocessor directives, rebuilt from those tokens (libclang exposes no cursor for `#ifndef` or
`#pragma`), with the comments that sit on or just above them."""

from __future__ import annotations

import codecs
import ctypes
import functools
import os
from pathlib import Path

import clang.cindex as ci

from annotune.annotate.source.records import Directive, SourceFile, Token
from annotune.annotate.source.strings import file_name
from annotune.core.inputs import SOURCE, read_input


def expansions(tu: ci.TranslationUnit, display: dict[str, str]) -> dict[str, frozenset[int]]:
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


def load_file(
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


def join_continuations(text: str) -> str:
    """Blank out the backslashes of continued lines; every character keeps its offset."""
    return text.replace("\\\r\n", " \r\n").replace("\\\n", " \n")
