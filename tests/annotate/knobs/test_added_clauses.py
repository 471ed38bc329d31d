"""A clause a pragma of code not to be edited lacks (`add = true`): every variant but the
default adds it to the one pragma named, and the default is the pragma as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.builder.variants import variant_source
from annotune.core.diagnostics import AnnotuneError

CODE = """\
#include <stdio.h>
int main(void) {
  double s = 0;
#pragma omp parallel for reduction(+: s)
  for (int i = 0; i < 1000; i++) s += i;
#pragma omp parallel for num_threads(2)
  for (int i = 0; i < 10; i++) s += 1;
  printf("%g\\n", s);
  return 0;
}
"""


def project(tmp_path: Path, knob: str) -> Path:
    path = tmp_path / "k.c"
    path.write_text(CODE)
    (tmp_path / "annotune.toml").write_text(f'[[file]]\npath = "k.c"\n[file.params]\n{knob}\n')
    return path


def test_the_clause_is_added_by_every_variant_but_the_default(tmp_path):
    knob = (
        'T = { domain = "values(1, 2, 4)", clause = "num_threads", add = true, line = 4, '
        "default = 2 }"
    )
    problem = read_problem(project(tmp_path, knob))
    (param,) = problem.params
    assert (param.default, param.rewritten_only) == (2, True)
    text = variant_source(problem, {"T": 4}).files["k.c"].decode()
    assert "#pragma omp parallel for reduction(+: s) num_threads(4)\n" in text
    assert "num_threads(2)\n  for (int i = 0; i < 10" in text  # the other pragma: untouched
    assert variant_source(problem, {"T": 2}).files["k.c"].decode() == CODE
    assert variant_source(problem, {"T": 4}).defines == ()


@pytest.mark.parametrize(
    ("knob", "message"),
    [
        (
            'T = { domain = "values(1, 2)", clause = "num_threads", add = true, line = 4 }',
            "give default",
        ),
        (
            'T = { domain = "values(1, 2)", clause = "num_threads", add = true, default = 1 }',
            "names 2 pragmas",
        ),
        (
            'T = { domain = "values(1, 2)", clause = "num_threads", add = true, line = 6, '
            "default = 1 }",
            "has a `num_threads` clause already",
        ),
        (
            'T = { domain = "values(1, 2)", clause = "vector_length", add = true, line = 4, '
            "default = 1 }",
            "names 0 pragmas",
        ),
        (
            'T = { domain = "values(1, 2)", clause = "schedule", add = true, line = 4, '
            "default = 1 }",
            "'add' adds a clause a pragma lacks",
        ),
        (
            'T = { domain = "values(1, 2)", clause = "num_threads", add = true, line = 4, '
            "default = 3 }",
            "not in its domain",
        ),
        ('T = { domain = "values(1, 2)", add = true, default = 1 }', "'add' adds a clause"),
    ],
)
def test_each_mistake_is_an_error_at_the_config(tmp_path, knob, message):
    with pytest.raises(AnnotuneError, match=message) as caught:
        read_problem(project(tmp_path, knob))
    assert caught.value.location.file.endswith("annotune.toml")
