from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.render import render


def test_render_points_a_caret_under_the_column_keeping_tabs(tmp_path):
    source = tmp_path / "k.cu"
    source.write_text("int a;\n\t#define X 9 // @tune values(1)\n")
    error = AnnotuneError("bad default", Location(str(source), 2, 12), hint="use 1")
    assert render(error).splitlines() == [
        f"{source}:2:12: error: bad default",
        "\t#define X 9 // @tune values(1)",
        "\t" + " " * 10 + "^",
        "note: use 1",
    ]


def test_render_without_location_or_readable_file():
    assert render(AnnotuneError("oops")) == "annotune: error: oops"
    missing = AnnotuneError("gone", Location("/nonexistent/x.cu", 3, 4))
    assert render(missing) == "/nonexistent/x.cu:3:4: error: gone"


def test_printable_escapes_what_a_terminal_acts_on_and_keeps_lines_and_tabs():
    from annotune.core.diagnostics import printable

    assert printable("k\x1b[2J.c") == "k\\x1b[2J.c"
    assert printable("x\x1b]0;x\x07") == "x\\x1b]0;x\\x07"
    assert printable("a\rb\x7f\x9b\u202ec") == "a\\x0db\\x7f\\x9b\\u202ec"
    assert printable("k\udcff.c") == "k\\xff.c"  # a name's byte that is not UTF-8, as before
    assert printable("line 1\n\tline 2 é 漢") == "line 1\n\tline 2 é 漢"


def test_a_located_error_in_a_file_named_with_an_escape_sequence_is_shown_escaped():
    error = AnnotuneError("bad \x1b]0;title\x07", Location("k\x1b[2J.c", 1, 2))
    assert render(error) == "k\\x1b[2J.c:1:2: error: bad \\x1b]0;title\\x07"
