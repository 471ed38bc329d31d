"""How a located error is shown: GCC-style, with the source line and a caret under the column.

Apart from `diagnostics` because showing the line means reading the file with the bounded
reader of `inputs`, which itself raises located errors."""

from __future__ import annotations

import codecs
import unicodedata
from pathlib import Path

from annotune.core.diagnostics import AnnotuneError, Location, printable
from annotune.core.inputs import SOURCE, read_input


def render(error: AnnotuneError) -> str:
    """GCC-style text: `FILE:LINE:COL: error: MESSAGE`, the source line and a caret.

    Columns count characters, as every Location's do; the caret is padded to line up in a
    terminal (tabs kept, wide CJK characters two cells, combining marks none).
    """
    loc = error.location
    if loc is None:
        head = f"annotune: error: {error.message}"
    else:
        head = f"{loc.file}:{loc.line}:{loc.column}: error: {error.message}"
    lines = [head]
    source_line = _read_line(loc) if loc is not None else None
    if source_line is not None:
        shown, column = _window(source_line.translate(_CONTROLS), loc.column)
        lines += [shown, _caret_padding(shown[: column - 1]) + "^"]
    if error.hint:
        lines.append(f"note: {error.hint}")
    return printable("\n".join(lines))


# Control characters other than tab shown as one replacement character each: a source line
# must not drive the terminal (escape sequences), and each still takes one column.
_CONTROLS = {c: "\ufffd" for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)] if c != 0x09}
_SHOWN = 200  # characters of a long line (generated or minified code) shown around the column
_BINARY_SNIFF = 8000  # a NUL byte in this many first bytes: a binary file, as git decides


def _read_line(loc: Location) -> str | None:
    """Line `loc.line` of the file as the locations count lines (at `\\n` only), or None when
    the file cannot be read as a bounded regular file or is binary (a gzip results file)."""
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
