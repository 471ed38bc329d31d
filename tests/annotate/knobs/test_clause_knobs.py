"""Knobs a config names in pragma clauses (`clause = "thread_limit"`): the literal's number is
the default, every place is rewritten in a copy, and each mistake is said at the config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.builder.variants import variant_source
from annotune.core.diagnostics import AnnotuneError

HEAT = """\
#include <stdio.h>
#define N 4096
static float a[N], b[N];
void step(int n) {
  #pragma omp target teams distribute parallel for thread_limit(256)
  for (int i = 1; i < n - 1; i++) b[i] = (a[i-1] + a[i] + a[i+1]) / 3;
}
void again(int n) {
  #pragma omp target teams distribute parallel for thread_limit(256) num_teams(64)
  for (int i = 1; i < n - 1; i++) a[i] = b[i];
}
int main(int argc, char **argv) {
  int nthreads = argc > 5 ? 8 : 4;
  #pragma omp parallel for num_threads(4) schedule(static, 16)
  for (int i = 0; i < N; i++) a[i] = i;
  #pragma omp parallel for num_threads(nthreads)
  for (int i = 0; i < N; i++) a[i] += 1;
#if 0
  #pragma omp parallel for collapse(2)
  for (int i = 0; i < 2; i++) for (int j = 0; j < 2; j++) a[i] = j;
#endif
  #pragma unroll 4
  for (int i = 0; i < 8; i++) b[i] = a[i];
  step(N);
  printf("PASS %f\\n", b[10]);
  return 0;
}
"""


def project(tmp_path: Path, params: str, source: str = HEAT, name: str = "heat.c") -> Path:
    path = tmp_path / name
    path.write_text(source)
    (tmp_path / "annotune.toml").write_text(f'[[file]]\npath = "{name}"\n[file.params]\n{params}\n')
    return path


def mistake(path: Path) -> AnnotuneError:
    with pytest.raises(AnnotuneError) as caught:
        read_problem(path)
    return caught.value


def test_every_literal_of_the_clause_is_the_knob_and_its_number_the_default(tmp_path):
    path = project(tmp_path, 'TL = { domain = "values(64, 128, 256)", clause = "thread_limit" }')
    (param,) = read_problem(path).params
    assert (param.default, param.origin, param.guarded) == (256, "literal", False)
    assert param.location.line == 5
    variant = variant_source(read_problem(path), {"TL": 64})
    text = variant.files["heat.c"].decode()
    assert text.count("thread_limit(64)") == 2 and "thread_limit(256)" not in text
    assert variant.defines == ()  # no -D reaches a literal: the copy is the program


@pytest.mark.parametrize(
    ("params", "name", "default", "line"),
    [
        ('NT = { domain = "values(1, 2, 4)", clause = "num_threads", line = 14 }', "NT", 4, 14),
        ('CH = { domain = "values(8, 16, 32)", clause = "schedule" }', "CH", 16, 14),
        ('TL = { domain = "values(64, 256)", clause = "thread_limit", function = "again" }',
         "TL", 256, 9),
        ('NG = { domain = "values(32, 64)", clause = "num_teams" }', "NG", 64, 9),
        ('U = { domain = "values(1, 2, 4)", clause = "unroll" }', "U", 4, 22),
    ],
)  # fmt: skip
def test_a_line_or_a_function_narrows_the_clause_to_one_pragma(
    tmp_path, params, name, default, line
):
    (param,) = read_problem(project(tmp_path, params)).params
    assert (param.name, param.default, param.location.line) == (name, default, line)
    assert param.more_spans == ()


def test_a_line_of_a_local_header(tmp_path):
    (tmp_path / "kern.h").write_text(
        "static void k(float *a) {\n#pragma acc parallel loop vector_length(128)\n"
        "for (int i = 0; i < 64; i++) a[i] = 0; }\n"
    )
    source = '#include "kern.h"\nint main(void) { float a[64]; k(a); return 0; }\n'
    path = project(
        tmp_path,
        'VL = { domain = "pow2(32, 256)", clause = "vector_length", line = "kern.h:2" }',
        source,
    )
    (param,) = read_problem(path).params
    assert param.default == 128 and Path(param.location.file).name == "kern.h"


@pytest.mark.parametrize(
    ("params", "said", "at"),
    [
        # one of the num_threads clauses is a name: which the knob means is not a guess
        ('NT = { domain = "values(1, 2)", clause = "num_threads" }',
         "`num_threads(nthreads)`, no number literal", "clause"),
        ('NT = { domain = "values(1, 2)", clause = "num_threads", line = 16 }',
         "`num_threads(nthreads)`, no number literal", "clause"),
        ('NT = { domain = "values(1, 2)", clause = "num_threads", line = 99 }',
         "no pragma in", "clause"),
        ('C = { domain = "values(1, 2)", clause = "collapse" }',
         "in an #if branch the compiler skips", "clause"),
        ('TL = { domain = "values(64, 256)", clause = "thread_limit", default = 64 }',
         "the program has 256", "default"),
        ('TL = { domain = "values(64, 128)", clause = "thread_limit" }',
         "not in its domain", None),
        ('TL = { domain = "values(64, 256)", clause = "thread_lim" }',
         "'thread_lim' is no clause", "clause"),
        ('TL = { domain = "values(64, 256)", line = 5 }', "'line' narrows a place", None),
        ('TL = { domain = "values(64, 256)", clause = "thread_limit", line = 0 }',
         "line must be a line number", None),
        ('TL = { domain = "values(64, 256)", clause = "thread_limit", function = "a b" }',
         "function must be a C function's name", None),
    ],
)  # fmt: skip
def test_each_mistake_is_said_at_the_config(tmp_path, params, said, at):
    error = mistake(project(tmp_path, params))
    assert said in error.message, error.message
    if at is not None:  # at the value of the key `at`, inside its quotes for a string
        value = params.index(f"{at} = ") + len(f"{at} = ") + 1
        column = value + 1 if params[value - 1] == '"' else value
        assert Path(error.location.file).name == "annotune.toml"
        assert (error.location.line, error.location.column) == (4, column)


def test_literals_that_differ_are_no_one_default(tmp_path):
    source = HEAT.replace("thread_limit(256) num_teams", "thread_limit(128) num_teams")
    error = mistake(
        project(tmp_path, 'TL = { domain = "values(128, 256)", clause = "thread_limit" }', source)
    )
    assert "differ: 256 at" in error.message and "128 at" in error.message
    assert "line" in error.hint


def test_scan_shows_the_clause_knob_and_how_to_ship_it(cli, tmp_path, monkeypatch):
    project(tmp_path, 'TL = { domain = "values(64, 128, 256)", clause = "thread_limit" }')
    monkeypatch.chdir(tmp_path)
    done = cli("scan", "heat.c", "--json")
    assert done.exit_code == 0, done.stderr
    (param,) = json.loads(done.stdout)["params"]
    assert (param["name"], param["default"], param["origin"]) == ("TL", 256, "literal")
