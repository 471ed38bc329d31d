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
