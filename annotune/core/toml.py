"""TOML read with positions: the document (tomllib's, a mistake located in it: `parse_toml`)
and where each key and value of it is written (`Positions`), for errors at FILE:LINE:COL."""

from __future__ import annotations

import bisect
import re
import sys
from pathlib import Path

from annotune.core.diagnostics import AnnotuneError, Location

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_TOML_TOKEN = re.compile(
    r'(?P<string>"""(?:\\[\s\S]|[^\\])*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:\\.|[^"\\\n])*"|\'[^\'\n]*\')'
    r"|(?P<comment>#[^\n]*)|(?P<newline>\n)|(?P<space>[ \t\r]+)"
    r"|(?P<word>[A-Za-z0-9_+\-:]+)|(?P<mark>.)"
)


class Positions:
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


def parse_toml(text: str, path: Path) -> dict:
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
