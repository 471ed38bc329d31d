"""`[file.check]`: what a correct run of code the user must not edit prints, read from the
config with every mistake located at its value."""

from __future__ import annotations

import pytest

from annotune.annotate import read_problem
from annotune.core.diagnostics import AnnotuneError
from annotune.core.output_check import OutputCheck

SOURCE = "#define BS 64\nint main(void) { return BS - 64; }\n"


def _problem(tmp_path, check: str):
    source = tmp_path / "sum.c"
    source.write_text(SOURCE)
    (tmp_path / "annotune.toml").write_text(
        f'[[file]]\npath = "sum.c"\n[file.params]\nBS = "pow2(16, 256)"\n[file.check]\n{check}\n'
    )
    return read_problem(source)


def test_the_rules_are_read_into_the_problem_settings(tmp_path):
    problem = _problem(
        tmp_path, "expect = 'PASS'\nreject = 'FAIL'\nresult = 'sum = (\\S+)'\nrtol = 1e-6"
    )
    assert problem.settings.output_check == OutputCheck(
        expect="PASS", reject="FAIL", result=r"sum = (\S+)", rtol=1e-6
    )


def test_no_check_table_means_no_rules(tmp_path):
    source = tmp_path / "sum.c"
    source.write_text(SOURCE)
    (tmp_path / "annotune.toml").write_text(
        '[[file]]\npath = "sum.c"\n[file.params]\nBS = "pow2(16, 256)"\n'
    )
    assert read_problem(source).settings.output_check is None


@pytest.mark.parametrize(
    ("check", "where", "message"),
    [
        ("expct = 'PASS'", (6, 1), "unknown key 'expct' in [file.check] (did you mean 'expect'?)"),
        ("expect = 'PA(SS'", (6, 11), "invalid expect regex: missing ), unterminated subpattern"),
        ("result = '[0-9'", (6, 11), "invalid result regex: unterminated character set"),
        ("reject = 3", (6, 10), "'reject' must be a regex in a non-empty string"),
        ("expect = ''", (6, 11), "'expect' must be a regex in a non-empty string"),
        ("result = '(\\S+)'\nrtol = -1e-3", (7, 8), "'rtol' must be a finite number >= 0"),
        ("result = '(\\S+)'\nrtol = inf", (7, 8), "'rtol' must be a finite number >= 0"),
        ("result = '(\\S+)'\nrtol = '1e-6'", (7, 9), "'rtol' must be a number"),
        ("result = '(\\S+)'\nrtol = true", (7, 8), "'rtol' must be a number"),
        ("expect = 'PASS'\nrtol = 1e-6", (7, 1), "'rtol' is how far `result`'s numbers"),
        ("", (5, 7), "[file.check] needs expect, reject or result"),
    ],
)
def test_check_mistakes_are_located_at_their_value(tmp_path, check, where, message):
    with pytest.raises(AnnotuneError) as caught:
        _problem(tmp_path, check)
    assert message in caught.value.message
    at = caught.value.location
    assert (at.file, at.line, at.column) == (str(tmp_path / "annotune.toml"), *where)


def test_check_that_is_not_a_table_is_located(tmp_path):
    source = tmp_path / "sum.c"
    source.write_text(SOURCE)
    (tmp_path / "annotune.toml").write_text('[[file]]\npath = "sum.c"\ncheck = "PASS"\n')
    with pytest.raises(AnnotuneError) as caught:
        read_problem(source)
    assert "'check' must be a table" in caught.value.message
    assert (caught.value.location.line, caught.value.location.column) == (3, 1)
