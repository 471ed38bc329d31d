"""Located errors: every user mistake is reported as FILE:LINE:COL, never as a traceback."""

from __future__ import annotations

import re
from dataclasses import dataclass


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
