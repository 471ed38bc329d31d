"""A config parameter's default is the value the compiler sees when annotune passes nothing:
an unguarded `#define` the preprocessor keeps cannot take another default from the config."""

from __future__ import annotations

from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.core.diagnostics import AnnotuneError


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def problem(tmp_path: Path, header: str, param: str):
    write(tmp_path / "inc" / "conf.h", header)
    source = write(tmp_path / "k.c", '#include "conf.h"\nint main(void) { return B; }\n')
    write(
        tmp_path / "annotune.toml",
        f'[[file]]\npath = "k.c"\ninclude = ["inc"]\n[file.params]\n{param}\n',
    )
    return read_problem(source)


def test_a_default_that_differs_from_an_unguarded_define_is_an_error_in_the_config(tmp_path):
    with pytest.raises(AnnotuneError) as caught:
        problem(tmp_path, "#define B 16\n", 'B = { domain = "values(4, 8, 16)", default = 8 }')
    error = caught.value
    assert "default of B is 8, but the compiler uses 16" in error.message
    assert f"{tmp_path / 'inc' / 'conf.h'}:1:11" in error.message  # where the source says 16
    where = error.location
    assert (Path(where.file).name, where.line, where.column) == ("annotune.toml", 5, 46)


def test_without_a_config_default_the_unguarded_value_is_the_default(tmp_path):
    found = problem(tmp_path, "#define B 16\n", 'B = "values(4, 8, 16)"')
    assert (found.param("B").default, found.param("B").guarded) == (16, False)


def test_the_same_default_as_the_define_is_accepted(tmp_path):
    found = problem(tmp_path, "#define B 16\n", 'B = { domain = "values(4, 16)", default = 16 }')
    assert found.param("B").default == 16


def test_the_compilers_value_outside_the_domain_names_where_it_comes_from(tmp_path):
    with pytest.raises(AnnotuneError) as caught:
        problem(tmp_path, "#define B 16\n", 'B = "values(4, 8)"')
    assert "the default of B, 16, is not in its domain values(4, 8)" in caught.value.message
    assert "conf.h:1:11" in caught.value.message


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("#define BASE 8\n#define B (2 * BASE)\n", 16),
        ("#define B (1 << 4)\n", 16),
        ("#define B 0x10u\n", 16),
        ("#define WIDE 4\n#define BASE (WIDE * 2)\n#define B BASE + BASE\n", 16),
    ],
)
def test_an_expression_of_numbers_and_macros_is_computed_as_the_preprocessor_does(
    tmp_path, header, value
):
    found = problem(tmp_path, header, 'B = "values(8, 16)"')
    assert found.param("B").default == value
    with pytest.raises(AnnotuneError, match="but the compiler uses 16"):
        problem(tmp_path, header, 'B = { domain = "values(8, 16)", default = 8 }')


@pytest.mark.parametrize("value", ["sizeof(int) * 4", "B + 1", "(1 / 0)", "UNKNOWN"])
def test_a_value_annotune_cannot_compute_is_an_error_not_a_guess(tmp_path, value):
    with pytest.raises(AnnotuneError) as caught:
        problem(tmp_path, f"#define B {value}\n", 'B = { domain = "values(4, 8)", default = 8 }')
    assert "which annotune cannot read as a number" in caught.value.message
    assert Path(caught.value.location.file).name == "annotune.toml"


def test_a_guarded_define_takes_the_configs_default_since_d_reaches_it(tmp_path):
    header = "#ifndef B\n#define B 16\n#endif\n"
    found = problem(tmp_path, header, 'B = { domain = "values(4, 8, 16)", default = 8 }')
    assert (found.param("B").default, found.param("B").guarded) == (8, True)


def test_a_define_in_a_skipped_branch_takes_the_configs_default(tmp_path):
    header = "#ifdef NEVER\n#define B 16\n#endif\n"
    found = problem(tmp_path, header, 'B = { domain = "values(4, 8, 16)", default = 8 }')
    assert found.param("B").default == 8


def test_a_value_that_expands_without_bound_is_refused(tmp_path):
    """A value whose expansion doubles at each level (4 M tokens here) is no knob's plain value:
    annotune stops expanding it rather than build it in memory. Nothing in the code uses it."""
    levels = "".join(f"#define L{i} (L{i - 1} + L{i - 1})\n" for i in range(1, 23))
    write(tmp_path / "inc" / "conf.h", "#define L0 1\n" + levels + "#define B L22\n")
    source = write(tmp_path / "k.c", '#include "conf.h"\nint main(void) { return 0; }\n')
    write(
        tmp_path / "annotune.toml",
        '[[file]]\npath = "k.c"\ninclude = ["inc"]\n[file.params]\n'
        'B = { domain = "values(4, 8)", default = 8 }\n',
    )
    with pytest.raises(AnnotuneError, match="cannot read as a number"):
        read_problem(source)
