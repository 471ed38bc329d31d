"""Hostile annotations through `annotune scan`: every mistake is a located error (exit 2, at the
right line and column), every fine input scans (exit 0); never an internal error or a hang.

Each case is a small source file. A mistake's place is given as (line, needle, nth): the
column of the nth occurrence of `needle` on that line, "$" for the end of the line.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

INT64_MAX = 2**63 - 1


def define(domain: str, default: str = "1") -> str:
    """One annotated #define and a use of it."""
    return f"#define N {default} // @tune {domain}\nint a[N];\n"


TWO = (
    "#define BX 32 // @tune values(16, 32, 64)\n"
    "#define BY 1 // @tune values(1, 2, 4)\n"
    "int grid[BX][BY];\n"
)


def constraint(expr: str) -> str:
    """Two parameters and one constraint, on line 4."""
    return TWO + f"#pragma annotune constraint {expr}\n"


def bad(text: str, line: int, needle: str, message: str, nth: int = 1, name: str = "bad"):
    return pytest.param(text, line, needle, nth, message, id=name)


BAD = [
    # -- values(...) --
    bad(define("values()"), 1, "values", "empty domain", name="values-empty"),
    bad(define("values(1, 2, 1)"), 1, "1)", "duplicate value 1", name="values-duplicate"),
    bad(define("values(1, 1.0)"), 1, "1.0", "duplicate value 1.0", name="values-duplicate-float"),
    bad(define("values(1, 2"), 1, "$", "expected ',' or ')'", name="values-unclosed"),
    bad(define("values(1,, 2)"), 1, ", 2", "expected a number, found ','", name="values-hole"),
    bad(define("values(1 2)"), 1, "2)", "expected ',' or ')', found '2'", name="values-no-comma"),
    bad(define("values(a)"), 1, "a)", "expected a number, found 'a'", name="values-name"),
    bad(define("values(1; 2)"), 1, ";", "unexpected character ';'", name="values-semicolon"),
    bad(define('values(1, "2")'), 1, '"', "unexpected character", name="values-string"),
    bad(define("values(1, -)"), 1, "-", "unexpected character '-'", name="values-lone-sign"),
    bad(define("values(1, nan)"), 1, "nan", "found 'nan'", name="values-nan"),
    bad(define("values(1, inf)"), 1, "inf", "found 'inf'", name="values-inf"),
    # -- numbers --
    bad(define("values(1, \u0663)"), 1, "\u0663", "ASCII digits", name="arabic-indic-digit"),
    bad(define("values(1, \uff13)"), 1, "\uff13", "ASCII digits", name="fullwidth-digit"),
    bad(define("values(1, \u00b2)"), 1, "\u00b2", "ASCII digits", name="superscript-digit"),
    bad(define("values(1, 1_000)"), 1, "_000", "invalid suffix '_000'", name="underscore"),
    bad(define("values(1, 12abc)"), 1, "abc", "invalid suffix 'abc'", name="suffix-letters"),
    bad(define("values(1, 5f)"), 1, "f)", "invalid suffix 'f' on constant '5'", name="int-f"),
    bad(define("values(1, 1.5.2)"), 1, ".2", "invalid suffix '.2'", name="two-points"),
    bad(define("values(1, 08)"), 1, "08", "invalid digit in octal constant", name="octal-8"),
    bad(define("values(1, 0x)"), 1, "x)", "invalid suffix 'x' on constant '0'", name="hex-empty"),
    bad(define("values(1, 1e)"), 1, "e)", "invalid suffix 'e'", name="exponent-empty"),
    bad(define("values(1, 1e400)"), 1, "1e400", "out of range", name="float-overflow"),
    bad(
        define(f"values(1, {INT64_MAX + 1})"), 1, "9223", "does not fit in 64 bits", name="int64+1"
    ),
    bad(define("values(1, " + "9" * 5000 + ")"), 1, "99", "does not fit", name="5000-digits"),
    bad(define("values(1, 0x" + "F" * 17 + ")"), 1, "0xF", "does not fit", name="hex-too-big"),
    # -- range(...) and pow2(...) --
    bad(define("range(1)"), 1, "range", "range takes (lo, hi)", name="range-one-bound"),
    bad(define("range(1, 2, 3, 4)"), 1, "range", "range takes", name="range-four-args"),
    bad(define("range(5, 1)", "5"), 1, "5, 1", "lo > hi", name="range-empty"),
    bad(define("range(1, 10, 0)"), 1, "0)", "step must be positive", name="range-step-0"),
    bad(define("range(1, 10, -2)"), 1, "-2", "step must be positive", name="range-step-neg"),
    bad(define("range(1.5, 4)"), 1, "1.5", "must be integers", name="range-float-lo"),
    bad(define("range(1, 1e3)"), 1, "1e3", "must be integers", name="range-float-hi"),
    bad(define("range(1, 1000000000000)"), 1, "range", "too large a domain", name="range-10e12"),
    bad(define(f"range(-{INT64_MAX}, {INT64_MAX})"), 1, "range", "too large", name="range-int64"),
    bad(define("range(1, 2000001, 2)"), 1, "range", "1,000,001 values", name="range-step-big"),
    bad(define("pow2(0, 8)"), 1, "0, 8", "at least 1", name="pow2-zero"),
    bad(define("pow2(5, 7)", "5"), 1, "7)", "no power of two", name="pow2-empty"),
    bad(define("pow2(8)"), 1, "pow2", "pow2 takes (lo, hi)", name="pow2-one-bound"),
    bad(define("pow2(1.5, 8)"), 1, "1.5", "must be integers", name="pow2-float"),
    bad(define("pow2(16, 4)", "16"), 1, "16, 4", "lo > hi", name="pow2-reversed"),
    bad(define("pow2(1, 1" + "0" * 30 + ")"), 1, "10000", "does not fit", name="pow2-huge"),
    # -- the annotation itself --
    bad(define("between(1, 2)"), 1, "between", "unknown domain 'between'", name="unknown-kind"),
    bad(define("bool(1)"), 1, "(1)", "unexpected '('", name="bool-arguments"),
    bad(define("bool extra"), 1, "extra", "unexpected 'extra'", name="trailing-word"),
    bad(define(""), 1, "$", "expected a domain", name="no-domain"),
    bad("#define N 1 // @tune(A bool\n", 1, "(A", "unclosed '('", name="unclosed-name"),
    bad("#define N 1 // @tune(1x) bool\n", 1, "1x", "expected a parameter name", name="bad-name"),
    bad(
        define("values(1) @tune values(2)"), 1, "@tune", "one plain", nth=2, name="two-annotations"
    ),
    bad("int x; // @tune values(1)\n", 1, "@tune", "must be on", name="not-on-a-directive"),
    # -- defaults --
    bad(define("values(1, 2)", "3"), 1, "3 ", "default value 3", name="default-outside"),
    bad(define("values(10, 20)", "010"), 1, "010", "default value 8", name="default-octal"),
    bad(define("values(10)", "1_0"), 1, "1_0", "must be a number literal", name="default-1_0"),
    bad(define("values(1)", "9" * 30), 1, "999", "must be a number literal", name="default-huge"),
    bad(define("values(1)", "abc"), 1, "abc", "must be a number literal", name="default-name"),
    # -- pragmas --
    bad(
        "#pragma annotune param P values(1, 2) default(3)\n",
        1,
        "3)",
        "default value 3 of 'P'",
        name="pragma-default-outside",
    ),
    bad(
        "#pragma annotune param P values(1, 2) default(" + "9" * 5000 + ")\n",
        1,
        "999",
        "does not fit in 64 bits",
        name="pragma-default-5000-digits",
    ),
    bad(
        "#pragma annotune param values(1, 2)\n",
        1,
        "values",
        "expected a parameter name",
        name="pragma-no-name",
    ),
    bad(
        "#pragma annotune param P values(1, 2) extra\n",
        1,
        "extra",
        "unexpected 'extra'",
        name="pragma-trailing",
    ),
    bad(TWO + "#pragma annotune frobnicate 1\n", 4, "frob", "unknown annotune pragma", name="verb"),
    bad(TWO + "#pragma annotune constraint\n", 4, "$", "needs an argument", name="no-constraint"),
    bad(
        TWO + "#pragma annotune param BX values(32, 64)\n",
        4,
        "BX",
        "duplicate parameter 'BX'",
        name="duplicate-param",
    ),
    # -- constraints --
    bad(constraint("BX * BZ <= 1024"), 4, "BZ", "unknown parameter 'BZ'", name="unknown-param"),
    bad(constraint("BX * <= 1024"), 4, "<=", "unexpected '<='", name="missing-operand"),
    bad(constraint("BX * BY <="), 4, "$", "unexpected end of expression", name="ends-early"),
    bad(constraint("(BX * BY <= 1024"), 4, "$", "expected ')' but found the end", name="unclosed"),
    bad(constraint("BX * BY) <= 1024"), 4, ")", "unexpected ')'", name="extra-paren"),
    bad(constraint("BX = 32"), 4, "=", "assignment is not allowed", name="assignment"),
    bad(constraint("BX ? BY"), 4, "$", "expected ':'", name="half-conditional"),
    bad(constraint("min(BX) > 1"), 4, "min", "exactly two arguments", name="min-one-argument"),
    bad(constraint("pow(BX, 2) > 1"), 4, "pow", "calls are not allowed", name="call"),
    bad(constraint("BX.y > 1"), 4, ".", "member access", name="member"),
    bad(constraint("BX[0] > 1"), 4, "[", "subscripts", name="subscript"),
    bad(constraint('"BX" > 1'), 4, '"', "strings are not allowed", name="string"),
    bad(constraint("BX > \u0663"), 4, "\u0663", "ASCII digits", name="constraint-arabic"),
    bad(constraint("BX\u00a0> 1"), 4, "\u00a0", "unexpected character", name="nbsp"),
    bad(constraint("BX > 1e400"), 4, "1e400", "out of range", name="constraint-float-overflow"),
    bad(constraint("BX > " + "9" * 5000), 4, "99", "does not fit", name="constraint-5000-digits"),
    bad(constraint("BX % 2.0 == 0"), 4, "%", "invalid operands to '%'", name="float-modulo"),
    bad(constraint("(" * 300 + "BX" + ")" * 300), 4, "(", "nested more than 200", 201, "nest-201"),
    bad(constraint("- " * 300 + "BX"), 4, "-", "nested more than 200", nth=201, name="unary"),
    bad(constraint("BX > 100"), 4, "BX", "leaves no legal configuration", name="all-illegal"),
    bad(constraint("BX / 0 > 1"), 4, "BX", "leaves no legal", name="division-by-zero"),
    bad(constraint("BX % (BY - BY) == 0"), 4, "BX", "leaves no legal", name="modulo-by-zero"),
    bad(constraint("BX * 4611686018427387904 < 1024"), 4, "BX", "no legal", name="overflow"),
    bad(
        TWO + "#pragma annotune constraint BX > 1\n#pragma annotune constraint BY > 4\n",
        5,
        "BY",
        "leaves no legal configuration",
        name="second-constraint-empties",
    ),
    bad(
        TWO + "#pragma annotune constraint BX > 1 && \\\n    BZ < 4\n",
        5,
        "BZ",
        "unknown parameter 'BZ'",
        name="continued-line",
    ),
    bad(
        TWO + "#pragma annotune constraint /* é */ BX > 1 && /* b */ \\\n    BZ < 4\n",
        5,
        "BZ",
        "unknown parameter 'BZ'",
        name="comments-and-continued-line",
    ),
    # -- #pragma annotune args --
    bad(TWO + '#pragma annotune args 4 "abc\n', 4, '"', "unterminated string", name="args-quote"),
    bad(TWO + "#pragma annotune args -n 'x\n", 4, "'", "unterminated character", name="args-1q"),
]


def good(text: str, summary: str, name: str, suffix: str = ".c"):
    return pytest.param(text, summary, suffix, id=name)


GOOD = [
    good(
        constraint(" || ".join(["BX == 16"] * 499 + ["BY == 4"])),
        "9 configurations, 5 legal",
        "or-500",
    ),
    good(constraint(" + ".join(["BY"] * 500) + " <= 1000"), "9 configurations, 6 legal", "sum-500"),
    good(
        constraint("(" * 200 + "BX * BY" + ")" * 200 + " >= 64"),
        "9 configurations, 6 legal",
        "nest-200",
    ),
    good(constraint("BY != 1 && BX / (BY - 1) > 16"), "9 configurations, 3 legal", "guarded-div"),
    good(constraint("BX * BY <= 64"), "9 configurations, 6 legal", "plain"),
    good(
        constraint("BX /* wide */ * BY <= 64 \\\n  && /* not too */ BY < 4 // tall"),
        "9 configurations, 5 legal",
        "comments-and-continuation",
    ),
    good(define("values(0x10, 010, 32u, 1.5f)", "0x10"), "4 configurations, 4 legal", "literals"),
    good(define("values(-4, -2, 0)", "-2"), "3 configurations, 3 legal", "negative"),
    good(define(f"pow2(1, {INT64_MAX})"), "63 configurations, 63 legal", "pow2-int64"),
    good(define("range(1, 1000000)"), "1,000,000 configurations", "range-million"),
    good(
        "".join(f"#define P{i} 1 // @tune range(1, 1000)\nint a{i}[P{i}];\n" for i in range(4))
        + "#pragma annotune constraint P0 + P1 > P2\n",
        "too large to count",
        "space-10e12",
    ),
]


@pytest.mark.parametrize(("text", "line", "needle", "nth", "message"), BAD)
def test_bad_input_is_a_located_error(cli, tmp_path, text, line, needle, nth, message):
    source = tmp_path / "kernel.c"
    source.write_text(text, encoding="utf-8")
    result = cli("scan", source)
    output = result.stdout + result.stderr
    assert "internal error" not in output and "Traceback" not in output
    assert result.exit_code == 2, output
    column = column_of(text.splitlines()[line - 1], needle, nth)
    assert f"{source}:{line}:{column}: error: " in result.stderr, result.stderr
    assert message in result.stderr, result.stderr


def column_of(line: str, needle: str, nth: int) -> int:
    if needle == "$":
        return len(line.rstrip()) + 1
    index = -1
    for _ in range(nth):
        index = line.index(needle, index + 1)
    return index + 1


@pytest.mark.parametrize(("text", "summary", "suffix"), GOOD)
def test_fine_input_scans(cli, tmp_path, text, summary, suffix):
    source = tmp_path / f"kernel{suffix}"
    source.write_text(text)
    result = cli("scan", source)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert summary in " ".join(result.stdout.split())


def test_a_space_no_configuration_of_which_is_legal_is_not_tuned(cli, tmp_path, monkeypatch):
    """`tune` stops at the constraint, as scan does, before anything is compiled."""
    source = tmp_path / "kernel.c"
    source.write_text(constraint("1 / (BX - BX)") + "int main(void) { return 0; }\n")
    monkeypatch.chdir(tmp_path)
    result = cli("tune", source, "--budget", "2", "--repeats", "1", "--max-repeats", "1")
    assert result.exit_code == 2, result.stdout + result.stderr
    assert f"{source}:4:29: error: this constraint leaves no legal configuration" in result.stderr
    assert not (tmp_path / ".annotune").exists()  # nothing compiled, no study opened


def test_c_literals_mean_what_c_says(cli, tmp_path):
    source = tmp_path / "kernel.c"
    source.write_text(define("values(0x10, 010, 32u, 1.5f)", "010"))
    (param,) = cli.json("scan", source, "--json")["params"]
    assert param["values"] == [16, 8, 32, 1.5] and param["default"] == 8


def test_a_million_value_range_scans_in_linear_time(cli, tmp_path):
    """Measured 0.3 s (benchmarks/scale.py); a quadratic check took minutes."""
    source = tmp_path / "kernel.c"
    source.write_text(define("range(1, 1000000)", "5"))
    start = time.perf_counter()
    report = cli.json("scan", source, "--json")
    assert time.perf_counter() - start < 5
    assert report["space"] == {"cartesian": 1_000_000, "legal": 1_000_000}


def test_chained_macros_in_kernel_mode_resolve_in_linear_time(cli, tmp_path):
    """1000 macros, each using the next one defined: resolved in about 0.1 s, where retrying
    every unresolved macro until none changes took 15 s."""
    macros = "".join(f"#define M{i} (M{i + 1} + 1)\n" for i in range(1000)) + "#define M1000 1\n"
    source = tmp_path / "kernel.cu"
    source.write_text(
        "#define B 32 // @tune values(32, 64)\n"
        + macros
        + "#pragma annotune kernel k grid(M0 / B) block(B) args(in(M0), 1)\n"
        + "__global__ void k(const float *in, int n) { }\n"
    )
    start = time.perf_counter()
    result = cli("scan", source)
    assert time.perf_counter() - start < 5
    assert result.exit_code == 0, result.stderr


def test_scan_json_of_a_hostile_but_fine_space_is_json(cli, tmp_path):
    source = tmp_path / "kernel.c"
    source.write_text(constraint(" || ".join(["BX == 16"] * 300)))
    report = json.loads(cli("scan", source, "--json").stdout)
    assert report["space"] == {"cartesian": 9, "legal": 3}
    assert Path(report["file"]) == source


def test_a_space_beyond_any_float_is_estimated_not_a_crash(cli, tmp_path):
    """2**1100 configurations: the estimate is an integer product, never a float overflow."""
    lines = [f"#define P{i} 1 // @tune values(1, 2)" for i in range(1100)]
    source = tmp_path / "many.c"
    source.write_text("\n".join([*lines, "int main(void) { return 0; }"]) + "\n")
    done = cli("scan", source, "--json")
    assert done.exit_code == 0, done.stderr
    space = json.loads(done.stdout)["space"]
    assert space["cartesian"] == 2**1100 and space["legal_estimate"] == 2**1100
