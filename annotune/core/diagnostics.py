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


_UNSHOWABLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
"""What a terminal would act on or cannot show: the C0 controls but tab and newline (ESC
begins every CSI and OSC sequence: `\\x1b[2J` clears the screen, `\\x1b]0;...\\x07` retitles
the window), DEL, the C1 controls (`\\x9b` is a one-byte CSI), the bidirectional marks,
embeddings, overrides and isolates (text shown in another order than it is), and lone
surrogates (a file name's byte that is not UTF-8)."""

_SURROGATE = re.compile("[\ud800-\udfff]")


def printable(text: str) -> str:
    """`text` as annotune shows and stores it: every character of `_UNSHOWABLE` written as
    Python writes it in a string literal (`\\x1b`, `\\u202e`), and a file name's byte that is
    not UTF-8, which `os.fsdecode` keeps as a lone surrogate (`k\\udcff.c`), as the byte
    (`k\\xff.c`), as Python and git show such names. The one rule for every name or value of
    the user's (a path, a device's name, a config's or the environment's value) that annotune
    prints, puts in JSON, in the database or in a generated header: a file named
    `k\\x1b[2J.c` must not clear the screen of whoever scans it. Tab and newline stay, so a
    whole message (an error with its source line) can go through it; the path itself stays as
    it is, and still opens the file."""
    if text.isascii() and text.isprintable():
        return text
    return _UNSHOWABLE.sub(_escape, text)


def encodable(text: str) -> str:
    """`text` with only its lone surrogates escaped, as `printable` escapes them: for output
    that holds terminal sequences of annotune's own (rich's styles, written after each name
    was made `printable`), which must reach the terminal, and must still encode."""
    if text.isascii():
        return text
    return _SURROGATE.sub(_escape, text)


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


class AnnotuneError(Exception):
    """A mistake in the user's input, reported with its location (when known).

    `hint` is an optional second line of advice, e.g. the command that fixes it.
    """

    def __init__(self, message: str, location: Location | None = None, *, hint: str = ""):
        super().__init__(message)
        self.message = message
        self.location = location
        self.hint = hint
