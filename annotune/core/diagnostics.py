"""Located errors: every user mistake is reported as FILE:LINE:COL, never as a traceback."""

from __future__ import annotations

import codecs
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Location:
    """A 1-based position in a source or config file."""

    file: str
    line: int
    column: int

    def shifted(self, columns: int) -> Location:
        """The location `columns` characters further along the same line."""
        return Location(self.file, self.line, self.column + columns)

    def to_json(self) -> dict:
        return {"file": printable(self.file), "line": self.line, "column": self.column}


_SURROGATE = re.compile("[\ud800-\udfff]")


def printable(text: str) -> str:
    """`text` as it can be shown and stored: a file name's byte that is not UTF-8, which
    `os.fsdecode` keeps as a lone surrogate (`k\\udcff.c`), written as an escape (`k\\xff.c`),
    as Python and git show such names. Any other lone surrogate is written `\\udXXX`. Used
    where a path is printed, put in JSON, in the database or in a generated header; the path
    itself stays as it is, and still opens the file."""
    if text.isascii():
        return text
    return _SURROGATE.sub(_escape, text)


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


class AnnotuneError(Exception):
    """A mistake in the user's input, reported with its location (when known).

    `hint` is an optional second line of advice, e.g. the command that fixes it.
    """

    def __init__(self, message: str, location: Location | None = None, *, hint: str = ""):
        super().__init__(message)
        self.message = message
        self.location = location
        self.hint = hint

    def render(self) -> str:
        """GCC-style text: `FILE:LINE:COL: error: MESSAGE`, the source line and a caret.

        Columns count characters, as every Location's do; the caret is padded to line up in a
        terminal (tabs kept, wide CJK characters two cells, combining marks none).
        """
        loc = self.location
        if loc is None:
            head = f"annotune: error: {self.message}"
        else:
            head = f"{loc.file}:{loc.line}:{loc.column}: error: {self.message}"
        lines = [head]
        source_line = _read_line(loc) if loc is not None else None
        if source_line is not None:
            shown, column = _window(source_line.translate(_CONTROLS), loc.column)
            lines += [shown, _caret_padding(shown[: column - 1]) + "^"]
        if self.hint:
            lines.append(f"note: {self.hint}")
        return printable("\n".join(lines))


# Control characters other than tab shown as one replacement character each: a source line
# must not drive the terminal (escape sequences), and each still takes one column.
_CONTROLS = {c: "\ufffd" for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)] if c != 0x09}
_SHOWN = 200  # characters of a long line (generated or minified code) shown around the column
_BINARY_SNIFF = 8000  # a NUL byte in this many first bytes: a binary file, as git decides


def _read_line(loc: Location) -> str | None:
    """Line `loc.line` of the file as the locations count lines (at `\\n` only), or None when
    the file cannot be read as a bounded regular file or is binary (a gzip results file)."""
    from annotune.core.inputs import SOURCE, read_input  # inputs raises this module's errors

    try:
        data = read_input(Path(loc.file), SOURCE)
    except AnnotuneError:
        return None
    if b"\0" in data[:_BINARY_SNIFF]:
        return None
    lines = data.removeprefix(codecs.BOM_UTF8).split(b"\n", loc.line)
    if not 1 <= loc.line <= len(lines) or (loc.line == len(lines) and not lines[-1]):
        return None
    return lines[loc.line - 1].removesuffix(b"\r").decode("utf-8", errors="replace")


def _window(line: str, column: int) -> tuple[str, int]:
    """A long line cut to `_SHOWN` characters around `column`, "..." where text is left out,
    and the column within what is shown."""
    if len(line) <= _SHOWN:
        return line, column
    start = max(0, min(column - 1 - _SHOWN // 2, len(line) - _SHOWN))
    head = "..." if start else ""
    tail = "..." if start + _SHOWN < len(line) else ""
    return head + line[start : start + _SHOWN] + tail, column - start + len(head)


def _caret_padding(before: str) -> str:
    return "".join(_padding(ch) for ch in before)


def _padding(ch: str) -> str:
    """What lines up under `ch` in a terminal."""
    if ch == "\t":
        return "\t"
    if unicodedata.combining(ch):
        return ""
    return "  " if unicodedata.east_asian_width(ch) in "WF" else " "
