"""Located errors: every user mistake is reported as FILE:LINE:COL, never as a traceback."""

from __future__ import annotations

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
        return {"file": self.file, "line": self.line, "column": self.column}


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
        """GCC-style text: `FILE:LINE:COL: error: MESSAGE`, the source line and a caret."""
        loc = self.location
        if loc is None:
            head = f"annotune: error: {self.message}"
        else:
            head = f"{loc.file}:{loc.line}:{loc.column}: error: {self.message}"
        lines = [head]
        source_line = _read_line(loc) if loc is not None else None
        if source_line is not None:
            lines.append(source_line)
            caret_pad = "".join("\t" if ch == "\t" else " " for ch in source_line[: loc.column - 1])
            lines.append(caret_pad + "^")
        if self.hint:
            lines.append(f"note: {self.hint}")
        return "\n".join(lines)


def _read_line(loc: Location) -> str | None:
    try:
        text = Path(loc.file).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    lines = text.splitlines()
    if 1 <= loc.line <= len(lines):
        return lines[loc.line - 1]
    return None
