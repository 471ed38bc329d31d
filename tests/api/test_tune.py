"""`annotune.tune` and its kin: options checked as the command line checks them, the report
returned, progress through the callback, nothing printed."""

from __future__ import annotations

from pathlib import Path

import pytest

import annotune
from annotune.api.tune import OPTIONS, arguments

PROGRAM = """\
#include <stdio.h>
#ifndef B
#define B 2 // @tune values(1, 2, 4)
#endif
int main(void) {
    volatile double s = 0;
    for (long i = 0; i < 20000L * B; i++) s += i * 0.5;
    printf("%f\\n", (double)(s > 0));
    return 0;
}
"""


@pytest.fixture
def program(tmp_path: Path) -> Path:
    source = tmp_path / "p.c"
    source.write_text(PROGRAM)
    return source


@pytest.mark.parametrize(
    "options, message",
    [
        ({"budget": 0}, "budget must be an integer of at least 1"),
        ({"budget": True}, "budget must be an integer"),
        ({"seconds": -1}, "seconds must be a positive number"),
        ({"strategy": "bogus"}, "unknown strategy 'bogus'"),
        ({"mode": "fast"}, "mode must be one of program, kernel, auto"),
        ({"objective": "speed"}, "objective must be one of time, energy, edp"),
        ({"args": "-n 4"}, "args is a list of arguments"),
        ({"recheck_rounds": 3}, "--recheck-rounds must be at least 6"),
        ({"arch": "sm_90"}, "--arch"),
    ],
)
def test_options_out_of_range_are_refused_before_the_source_is_read(options, message):
    with pytest.raises(annotune.AnnotuneError, match=message):
        annotune.tune("no-such-file.c", **options)


def test_an_option_no_tune_has_is_a_type_error_naming_the_options():
    with pytest.raises(TypeError, match="no tune option 'bugdet'.*budget"):
        annotune.tune("k.c", bugdet=10)
    assert "sized" not in OPTIONS and "budget" in OPTIONS


def test_paths_and_lists_are_taken_as_python_gives_them(tmp_path):
    given = arguments({"db_path": str(tmp_path / "r.db"), "args": ["-n", 4], "replay": "x.json"})
    assert given.db_path == tmp_path / "r.db"
    assert given.args == ("-n", "4") and given.replay == (Path("x.json"),)


def test_a_tune_returns_its_report_and_reports_progress(program, capsys):
    seen = []
    report = annotune.tune(program, budget=3, recheck_rounds=6, repeats=1, on_progress=seen.append)
    assert isinstance(report, annotune.TuneReport)
    assert report.status is annotune.TuneStatus.OK
    assert report.evaluations == 3 and report.best is not None
    assert report.default.params == {"B": 2} and report.header is not None
    assert report.header.is_file()
    assert seen and seen[-1].evaluations == 3
    assert capsys.readouterr().out == ""  # nothing printed


def test_compile_only_compiles_and_runs_nothing(program):
    compiled = annotune.compile_only(program, budget=3)
    assert isinstance(compiled, annotune.CompileReport)
    assert compiled.to_json()["compiled"] == 3


def test_sizes_are_checked(program):
    with pytest.raises(annotune.AnnotuneError, match="not a positive integer"):
        annotune.tune_sizes(program, sizes={"N": [0, 64]})
    with pytest.raises(annotune.AnnotuneError, match="one problem size"):
        annotune.tune_sizes(program, sizes={"N": [32], "M": [8]})
    with pytest.raises(annotune.AnnotuneError, match="a list of integers"):
        annotune.tune_sizes(program, sizes={"N": "32"})
