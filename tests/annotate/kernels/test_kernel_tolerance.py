"""tolerance(R): a kernel's declaration says how far its outputs may differ from the default's,
in a pragma or a config; `--check-rtol` still decides when given."""

from __future__ import annotations

from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.core.diagnostics import AnnotuneError
from annotune.session.options import KERNEL_CHECK_RTOL, TuneArguments, tune_options

SOURCE = """\
#define N 4096
#ifndef TILE
#define TILE 16 // @tune pow2(16, 256)
#endif
{pragma}
__global__ void scale(const float *in, float *out) {{
  int i = blockIdx.x * TILE + threadIdx.x;
  out[i] = 2.0f * in[i];
}}
"""
PRAGMA = "#pragma annotune kernel scale grid(N / TILE) block(TILE) args(in(N), out(N))"
CONFIG = """\
[[file]]
path = "scale.cu"
[[file.kernel]]
name = "scale"
grid = "N / TILE"
block = "TILE"
args = ["in(N)", "out(N)"]
tolerance = {tolerance}
"""


def problem_of(tmp_path: Path, pragma: str = "", config: str | None = None):
    (tmp_path / "scale.cu").write_text(SOURCE.format(pragma=pragma))
    if config is not None:
        (tmp_path / "annotune.toml").write_text(config)
    return read_problem(tmp_path / "scale.cu")


def rtol(problem, **given) -> float:
    return tune_options(problem, TuneArguments(mode="kernel", **given)).run.check_tolerance


@pytest.mark.parametrize("declared", ["1e-3", '"1e-3"'])
def test_the_declared_tolerance_is_the_checks_unless_the_command_line_gives_one(tmp_path, declared):
    problem = problem_of(tmp_path, config=CONFIG.format(tolerance=declared))
    assert problem.kernels[0].tolerance == 1e-3
    assert rtol(problem) == 1e-3
    assert rtol(problem, check_rtol=0.5) == 0.5


def test_a_pragma_says_it_too_and_without_it_the_default_holds(tmp_path):
    assert rtol(problem_of(tmp_path, PRAGMA + " tolerance(0)")) == 0
    assert rtol(problem_of(tmp_path, PRAGMA)) == KERNEL_CHECK_RTOL


@pytest.mark.parametrize(
    ("tolerance", "message"),
    [('"loose"', "takes a number, not 'loose'"), ("-1", "is not a finite number >= 0")],
)
def test_a_bad_tolerance_is_located_in_the_config(tmp_path, tolerance, message):
    with pytest.raises(AnnotuneError) as caught:
        problem_of(tmp_path, config=CONFIG.format(tolerance=tolerance))
    assert message in caught.value.message
    assert caught.value.location is not None
    assert caught.value.location.file.endswith("annotune.toml")
    assert caught.value.location.line == 8
