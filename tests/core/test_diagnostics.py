from annotune.core.diagnostics import AnnotuneError, Location


def test_render_points_a_caret_under_the_column_keeping_tabs(tmp_path):
    source = tmp_path / "k.cu"
    source.write_text("int a;\n\t#define X 9 // @tune values(1)\n")
    error = AnnotuneError("bad default", Location(str(source), 2, 12), hint="use 1")
    assert error.render().splitlines() == [
        f"{source}:2:12: error: bad default",
        "\t#define X 9 // @tune values(1)",
        "\t" + " " * 10 + "^",
        "note: use 1",
    ]


def test_render_without_location_or_readable_file():
    assert AnnotuneError("oops").render() == "annotune: error: oops"
    missing = AnnotuneError("gone", Location("/nonexistent/x.cu", 3, 4))
    assert missing.render() == "/nonexistent/x.cu:3:4: error: gone"
