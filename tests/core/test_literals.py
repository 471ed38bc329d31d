"""One writer of a knob's value as C (`core.literals`): the header is the measured program."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from annotune.annotate import read_problem
from annotune.builder.variants import variant_source
from annotune.core.literals import (
    as_declared,
    c_literal,
    fill_placeholders,
    placeholder_mistake,
    placeholders,
    value_text,
)
from annotune.emit import render_header


@pytest.mark.parametrize(
    ("value", "text"),
    [(4, "4"), (2.0, "2.0"), (0.5, "0.5"), (-1, "(-1)"), (-0.25, "(-0.25)"), (True, "1"),
     (np.int64(8), "8"), (np.float64(2.0), "2.0"), (1e-05, "1e-05")],
)  # fmt: skip
def test_a_value_is_written_as_its_own_type(value, text):
    assert c_literal(value) == text


def test_a_stored_value_takes_its_domains_type_back():
    assert type(as_declared(2, (0.5, 1.0, 2.0))) is float
    assert type(as_declared(2.0, (1, 2, 4))) is int
    assert as_declared(3, (1, 2)) == 3  # not in the domain: as it is


def test_an_environment_value_is_plain_text():
    assert value_text(4.0) == "4"
    assert value_text(np.float64(0.5)) == "0.5"


def test_the_header_writes_a_double_knob_as_the_variant_was_compiled(tmp_path: Path):
    """A knob declared `values(0.5, 1.0, 2.0)` was compiled as `-DS=2.0` but written into the
    header as `#define S 2`: `7 / S` is 3.5 in the program measured and 3 in the one shipped.
    Read back from the results database it is 2 (JSON keeps no type): still 2.0 in both."""
    source = tmp_path / "f.c"
    source.write_text(
        "#ifndef S\n#define S 1.0 // @tune values(0.5, 1.0, 2.0)\n#endif\n"
        "#ifndef B\n#define B 4 // @tune values(1, 2, 4)\n#endif\nint main(void) { return 0; }\n"
    )
    problem = read_problem(source)
    stored = {"S": 2, "B": 4}
    assert variant_source(problem, stored).defines == ("-DS=2.0", "-DB=4")
    header = render_header(
        problem, stored, device="d", space_size=None, measurements=0, default_time=None,
        best_time=None, tool_version="1",
    )  # fmt: skip
    assert "#define S 2.0 " in header
    assert "#define B 4 " in header


def test_a_negative_value_reaches_the_compiler_in_parentheses(tmp_path: Path):
    source = tmp_path / "k.c"
    source.write_text("#ifndef D\n#define D 1 // @tune values(-1, 1)\n#endif\nint y = 3-D;\n")
    assert variant_source(read_problem(source), {"D": -1}).defines == ("-DD=(-1)",)


def test_placeholders_with_escaped_braces_and_the_first_stray_brace():
    """`{{`/`}}` are literal braces (`OMP_PLACES = "{{0:4}}"`); a brace of no `{NAME}` is a
    mistake at its offset, never text that reaches the program as written."""
    assert placeholders("{{0:4}}:{T}") == ["T"]
    assert fill_placeholders("{{0:{T}}}:{U}", {"T": 4}) == "{0:4}:{U}"
    assert fill_placeholders("{{N}}-{N}", {"N": 8}, unescape=False) == "{{N}}-8"
    assert placeholder_mistake("{{0:4}}-{T}", "env X") is None
    assert placeholder_mistake("a{T", "env X")[0] == 1
    assert placeholder_mistake("a{T", "env X")[1].startswith(
        "'{' in env X opens a placeholder that no '}' closes"
    )
    assert placeholder_mistake("{T}}", "env X")[0] == 3
    assert placeholder_mistake("{a{T}", "env X")[0] == 0
    assert "{1st} in env X names no parameter" in placeholder_mistake("{1st}", "env X")[1]
