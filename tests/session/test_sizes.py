"""`tune --sizes`: one tune per size, the size reaching the program as a macro or an
argument, and one header that selects per size."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from annotune.core.diagnostics import AnnotuneError
from annotune.emit.sizes import read_size_table
from annotune.results.database import Database
from annotune.session.options import TuneArguments
from annotune.session.sizes import tune_sizes

# The synthetic time is smallest where B == N / 8: the best B moves with the size.
MACRO_PROGRAM = r"""
#include <math.h>
#include <stdio.h>
#ifndef N
#define N 128
#endif
#ifndef B
#define B 16 // @tune values(8, 16, 32, 64)
#endif
int main(void) {
  printf("took %.3f ms\n", fabs(B - N / 8.0) + 1.0);
  return 0;
}
"""

ARGUMENT_PROGRAM = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#ifndef B
#define B 16 // @tune values(8, 16, 32, 64)
#endif
int main(int argc, char **argv) {
  const double n = argc > 2 ? atof(argv[2]) : 128.0;
  printf("took %.3f ms\n", fabs(B - n / 8.0) + 1.0);
  return 0;
}
"""


def _given(tmp_path: Path, **overrides) -> TuneArguments:
    settings = dict(
        budget=4,
        time_regex=r"took ([0-9.]+) ms",
        repeats=2,
        max_repeats=2,
        warmup=0,
        recheck=2,
        recheck_rounds=12,
        db_path=tmp_path / "results.db",
    )
    return TuneArguments(**{**settings, **overrides})


def test_each_size_is_tuned_and_the_header_selects_per_size(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "k.c"
    source.write_text(MACRO_PROGRAM)
    report = tune_sizes(source, _given(tmp_path), "N", (64, 256))
    assert report.via == "macro"
    assert [o.size for o in report.outcomes] == [64, 256]
    assert [o.report.best.params["B"] for o in report.outcomes] == [8, 32]
    table = read_size_table(report.header.read_text(), str(report.header))
    assert [(e.size, dict(e.params)) for e in table.entries] == [(64, {"B": 8}), (256, {"B": 32})]
    assert (table.default_size, table.default_reason) == (128, "the source's default N")
    with Database(tmp_path / "results.db") as db:
        assert len(db.studies()) == 2  # one study per size
    # Compiled with the header: each size gets its own B, the source's default N the nearest.
    header = report.header
    for define, expected in (("-DN=64", 8), ("-DN=100", 8), ("-DN=200", 32), (None, 32)):
        assert _compiled_b(tmp_path, header, define) == expected


def _compiled_b(tmp_path: Path, header: Path, define: str | None) -> int:
    probe = tmp_path / "probe.c"
    probe.write_text(
        "#include <stdio.h>\nint main(void) {\n"
        "  annotune_k_params p = annotune_k_params_for(256);\n"
        '  printf("%d %d\\n", B, p.b);\n  return 0;\n}\n'
    )
    binary = tmp_path / "probe"
    command = ["gcc", "-include", str(header), *([define] if define else []), str(probe)]
    subprocess.run([*command, "-o", str(binary)], check=True)
    compiled, runtime = map(
        int, subprocess.run([binary], capture_output=True, text=True).stdout.split()
    )
    assert runtime == 32
    return compiled


def test_a_size_in_the_arguments_is_substituted_per_size(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "k.c"
    source.write_text(ARGUMENT_PROGRAM)
    report = tune_sizes(source, _given(tmp_path, args=("--n", "{N}")), "N", (64, 512))
    assert report.via == "argument"
    assert [o.report.best.params["B"] for o in report.outcomes] == [8, 64]
    table = read_size_table(report.header.read_text(), str(report.header))
    assert table.default_size == 512  # known only at run time: the largest tuned size


def test_a_size_that_reaches_nothing_is_refused_before_anything_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "k.c"
    source.write_text(ARGUMENT_PROGRAM)
    with pytest.raises(AnnotuneError, match="reaches nothing"):
        tune_sizes(source, _given(tmp_path), "N", (64, 512))
    assert not (tmp_path / "results.db").exists()


def test_a_tuned_parameter_is_no_size(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "k.c"
    source.write_text(MACRO_PROGRAM)
    with pytest.raises(AnnotuneError, match="is a tuned parameter") as raised:
        tune_sizes(source, _given(tmp_path), "B", (8, 16))
    assert raised.value.location is not None and raised.value.location.line == 8


def test_an_unguarded_define_cannot_also_be_the_argument(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "k.c"
    source.write_text("#define N 4\n" + ARGUMENT_PROGRAM)
    with pytest.raises(AnnotuneError, match="unguarded"):
        tune_sizes(source, _given(tmp_path, args=("{N}",)), "N", (64, 512))


def test_an_unguarded_size_define_is_rewritten_per_size(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "k.c"
    source.write_text(MACRO_PROGRAM.replace("#ifndef N\n#define N 128\n#endif", "#define N 128"))
    report = tune_sizes(source, _given(tmp_path), "N", (64, 256))
    assert [o.report.best.params["B"] for o in report.outcomes] == [8, 32]
    assert source.read_text().count("#define N 128") == 1  # the user's file is untouched


DATASET_PROGRAM = r"""
#include <math.h>
#include <stdio.h>
#if !defined(N) && !defined(M)
#  ifdef SMALL
#    define N 32
#  else
#    define N 1024
#  endif
#  define M 1024
#endif
#ifndef B
#define B 16 // @tune values(8, 16, 32, 64)
#endif
int main(void) {
  printf("took %.3f ms\n", fabs(B - N / 8.0) + 1.0 + M * 0.0);
  return 0;
}
"""


def test_a_size_defined_only_in_a_skipped_branch_is_given_as_a_flag(tmp_path, monkeypatch):
    """PolyBench's layout: the sizes are defined together, only when none is given; with M
    given on the compile command, no branch defining N is active, and N must reach the
    compiler as -DN (a rewrite of the skipped `#define N 32` would change nothing)."""
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "k.c"
    source.write_text(DATASET_PROGRAM)
    (tmp_path / "annotune.toml").write_text(
        '[[file]]\npath = "k.c"\ncompile = "gcc -O1 -DM=7 {source} -o {output} -lm"\n'
    )
    report = tune_sizes(source, _given(tmp_path), "N", (64, 256))
    assert [o.report.invalid for o in report.outcomes] == [0, 0]
    assert [o.report.best.params["B"] for o in report.outcomes] == [8, 32]
    table = read_size_table(report.header.read_text(), str(report.header))
    assert table.default_reason.startswith("the largest tuned size")


ENV_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#ifndef N
#define N 128
#endif
int main(void) {
  const char *threads = getenv("THREADS_USED");
  const double t = threads ? atof(threads) : 1.0;
  printf("took %.3f ms\n", fabs(t - N / 32.0) + 1.0);
  return 0;
}
"""


def test_an_environment_tuned_per_size_is_said_per_size(tmp_path, monkeypatch):
    """A parameter that reaches the program only through its environment (OMP_NUM_THREADS
    from THREADS) has no macro the program reads: the header must say each size's."""
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "k.c"
    source.write_text(ENV_PROGRAM)
    (tmp_path / "annotune.toml").write_text(
        '[[file]]\npath = "k.c"\n[file.params]\n'
        'THREADS = { domain = "values(1, 2, 4, 8)", default = 1 }\n'
        '[file.env]\nTHREADS_USED = "{THREADS}"\n'
    )
    report = tune_sizes(source, _given(tmp_path), "N", (32, 256))
    assert [o.report.best.params["THREADS"] for o in report.outcomes] == [1, 8]
    text = report.header.read_text()
    assert "N = 32: " in text and "environment THREADS_USED=1" in text
    assert "environment THREADS_USED=8" in text and " * environment:" not in text
    table = read_size_table(text, "h")
    assert [e.environment for e in table.entries] == ["THREADS_USED=1", "THREADS_USED=8"]
