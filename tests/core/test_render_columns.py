"""The caret under a located error: character columns, lined up in a terminal, never a hang."""

from __future__ import annotations

import os

import pytest

from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.render import render


def rendered(path, line: int, column: int) -> list[str]:
    return render(AnnotuneError("bad", Location(str(path), line, column))).splitlines()


@pytest.mark.parametrize(
    ("text", "column", "caret"),
    [
        ("日本 = 1 x\n", 8, " " * 9 + "^"),  # CJK: one column, two cells each
        ("\tＡé = x\n", 7, "\t" + " " * 6 + "^"),  # fullwidth Ａ two cells, tabs kept
        ("e\u0301 = x\n", 6, " " * 4 + "^"),  # a combining accent takes no cell
    ],
)
def test_the_caret_lines_up_under_the_character_column(tmp_path, text, column, caret):
    source = tmp_path / "k.c"
    source.write_text(text, encoding="utf-8")
    assert rendered(source, 1, column)[1:] == [text.rstrip("\n"), caret]


def test_lines_are_counted_at_newlines_only(tmp_path):
    """A form feed (GNU sources) or U+2028 is no line break for a location's line."""
    source = tmp_path / "k.c"
    source.write_bytes("a\f b\u2028c\r\nsecond\n".encode())
    assert rendered(source, 2, 1)[1:] == ["second", "^"]


def test_control_characters_are_shown_harmless_one_column_each(tmp_path):
    source = tmp_path / "k.c"
    source.write_bytes(b"\x1b[2Jx = y\n")
    assert rendered(source, 1, 5)[1:] == ["\ufffd[2Jx = y", "    ^"]


def test_a_long_line_is_shown_around_the_column(tmp_path):
    source = tmp_path / "k.c"
    source.write_text("a" * 5000 + "X" + "b" * 5000 + "\n")
    shown, caret = rendered(source, 1, 5001)[1:]
    assert len(shown) == 206 and shown.startswith("...a") and shown.endswith("b...")
    assert shown[len(caret) - 1] == "X"


def test_a_byte_order_mark_is_not_a_column(tmp_path):
    source = tmp_path / "k.c"
    source.write_bytes(b"\xef\xbb\xbfint x;\n")
    assert rendered(source, 1, 5)[1:] == ["int x;", "    ^"]


@pytest.mark.parametrize("kind", ["fifo", "device", "binary"])
def test_no_source_line_for_special_or_binary_files(tmp_path, kind):
    path = tmp_path / "f"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path = "/dev/zero"
    else:
        path.write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00text\n")
    assert rendered(path, 1, 1) == [f"{path}:1:1: error: bad"]
