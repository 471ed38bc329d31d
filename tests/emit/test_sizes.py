"""Size-aware headers: the nearest-size rule, the table they carry, and what a compiler sees."""

from __future__ import annotations

import subprocess
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from annotune.annotate.problem import Problem, TunableParam
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.emit.sizes import (
    SizeEntry,
    SizeTable,
    parse_sizes,
    read_size_table,
    render_size_header,
)


def _problem(tmp_path: Path, *names: str) -> Problem:
    source = tmp_path / "kern.c"
    params = tuple(
        TunableParam(n, (1, 2, 4, 8, 1 << 40), 1, "define", True, Location(str(source), 1, 1), "x")
        for n in names
    )
    return Problem(source, "c", params, (), (str(source),))


def _table(*sizes: int, predicted: int | None = None) -> SizeTable:
    entries = tuple(
        SizeEntry(s, {"BX": i + 1, "bx": 8}, predicted=s == predicted) for i, s in enumerate(sizes)
    )
    return SizeTable("N", sizes[-1], "the largest tuned size", entries)


@given(st.lists(st.integers(1, 10**6), min_size=1, max_size=6, unique=True), st.integers(1, 10**7))
def test_the_nearest_size_is_nearest_in_log2_with_ties_to_the_larger(sizes, size):
    table = _table(*sorted(sizes))
    chosen = table.nearest(size)
    for entry in table.entries:  # compared exactly: |log a - log s| vs |log b - log s| by ratios
        mine, other = sorted((chosen.size, size)), sorted((entry.size, size))
        assert Fraction(mine[1], mine[0]) <= Fraction(other[1], other[0])
        if Fraction(mine[1], mine[0]) == Fraction(other[1], other[0]):
            assert chosen.size >= entry.size


def test_the_table_survives_the_header_and_a_predicted_entry_joins_it(tmp_path):
    problem = _problem(tmp_path, "BX", "bx")
    table = _table(128, 512)
    text = render_size_header(problem, table, device="GPU X", space_size=9, tool_version="t")
    assert read_size_table(text, "h") == table
    grown = table.with_entry(SizeEntry(2048, {"BX": 5, "bx": 8}, predicted=True))
    assert [e.size for e in grown.entries] == [128, 512, 2048]
    text = render_size_header(problem, grown, device="GPU X", space_size=9, tool_version="t")
    assert "N = 2048: predicted, not measured" in text
    assert read_size_table("/* a plain header */", "h") is None
    with pytest.raises(AnnotuneError, match="cannot be read"):
        read_size_table(' * annotune-sizes: {"name": 1}', "h.h")


def test_the_header_compiles_and_selects_per_size_at_compile_and_run_time(tmp_path):
    problem = _problem(tmp_path, "BX", "bx")
    table = SizeTable(
        "N",
        300,
        "the source's default N",
        (
            SizeEntry(100, {"BX": 1, "bx": 2}),
            SizeEntry(1000, {"BX": 4, "bx": 1 << 40}, predicted=True),
        ),
    )
    header = tmp_path / "kern.h"
    header.write_text(
        render_size_header(problem, table, device="d", space_size=None, tool_version="t")
    )
    probe = tmp_path / "probe.c"
    probe.write_text(
        "#include <stdio.h>\n#include <stdlib.h>\n"
        "int main(int argc, char **argv) {\n"
        "  annotune_kern_params p = annotune_kern_params_for(atof(argv[1]));\n"
        '  printf("%d %d %lld\\n", BX, p.value_BX, (long long)p.value_bx);\n  return 0;\n}\n'
    )
    # The geometric mean of 100 and 1000 is 316.2: 316 takes 100's values, 317 1000's.
    for define, size, expected in (
        ("-DN=316", "316", "1 1 2"),
        ("-DN=317", "317", "4 4 1099511627776"),
        (None, "5", "1 1 2"),  # N undefined: the source's default, 300
    ):
        binary = tmp_path / "probe"
        args = ["gcc", "-Wall", "-Werror", "-include", str(header), *[define] * bool(define)]
        subprocess.run([*args, str(probe), "-o", str(binary)], check=True)
        out = subprocess.run([binary, size], capture_output=True, text=True, check=True).stdout
        assert out.split() == expected.split()


@pytest.mark.parametrize(
    "text, message",
    [
        ("N", "expected NAME=SIZE"),
        ("1N=4", "expected NAME=SIZE"),
        ("N=4,x", "'x' is not a positive integer"),
        ("N=0", "'0' is not a positive integer"),
        ("N=-4", "is not a positive integer"),
        ("N=4,4", "4 is given twice"),
        ("N=99999999999", "larger than"),
    ],
)
def test_bad_sizes_are_refused(text, message):
    with pytest.raises(AnnotuneError, match=message):
        parse_sizes(text)


def test_sizes_are_sorted():
    assert parse_sizes(" N = 4096, 512,1024") == ("N", (512, 1024, 4096))
