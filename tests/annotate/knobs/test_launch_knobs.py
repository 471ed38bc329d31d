"""Knobs a config names in CUDA launches and `dim3` declarations (code not to be edited): the
literal is the default, every place is rewritten in a copy, and a number that also stands in
what the knob governs (the grid's round-up, `__launch_bounds__`, a shared array, a template
argument) is said before anything compiles."""

from __future__ import annotations

from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.builder.variants import variant_source
from annotune.core.diagnostics import AnnotuneError

ROTATE = """\
template <typename T, int B>
__global__ void scale(T *x, int n) { int i = blockIdx.x * B + threadIdx.x; if (i < n) x[i] *= 2; }
__global__ void __launch_bounds__(256) rotate(float *x, int n) {
  __shared__ float s[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { s[threadIdx.x] = x[i]; x[i] = s[threadIdx.x] + 1; }
}
__global__ void tile(float *x, int w) { x[threadIdx.y * w + threadIdx.x] = 0; }
__global__ void plain(float *x) { x[threadIdx.x] = 0; }
int main() {
  int n = 1 << 20; float *x = 0;
  rotate<<<(n / 2 + 255) / 256, 256>>>(x, n);
  scale<float, 128><<<n / 128, 128>>>(x, n);
  dim3 blocks (16, 16);
  dim3 grid ((1024 + 15) / 16, (1024 + 15) / 16);
  tile<<<grid, blocks>>>(x, 1024);
  tile<<<dim3(4, 4), dim3(8, 8), 0>>>(x, 32);
  dim3 threads (256);
  plain<<<n / 64, threads>>>(x);
  plain<<<1, 64>>>(x);
  rotate<<<n / 256, 256>>>(x, n);
  return 0;
}
"""


def project(tmp_path: Path, params: str) -> Path:
    path = tmp_path / "rot.cu"
    path.write_text(ROTATE)
    (tmp_path / "annotune.toml").write_text(f'[[file]]\npath = "rot.cu"\n[file.params]\n{params}\n')
    return path


def knob(tmp_path: Path, params: str):
    (param,) = read_problem(project(tmp_path, params)).params
    return param


def test_a_launchs_block_literal_is_the_knob_in_every_launch_of_the_kernel(tmp_path):
    path = project(tmp_path, 'BS = { domain = "pow2(32, 1024)", launch = "rotate" }')
    problem = read_problem(path)
    (param,) = problem.params
    assert (param.default, param.origin, param.location.line) == (256, "literal", 12)
    assert len(param.more_spans) == 1  # the second launch of rotate, on line 21
    text = variant_source(problem, {"BS": 64}).files["rot.cu"].decode()
    assert "rotate<<<(n / 2 + 255) / 256, 64>>>" in text and "rotate<<<n / 256, 64>>>" in text
    assert "__launch_bounds__(256)" in text  # what the knob does not reach stays: said below


@pytest.mark.parametrize(
    ("params", "default", "line"),
    [
        ('TY = { domain = "pow2(2, 16)", launch = "tile", arg = "block.y", line = 17 }', 8, 17),
        ('GX = { domain = "pow2(2, 16)", launch = "tile", arg = "grid.x", line = 17 }', 4, 17),
        ('SH = { domain = "values(0, 1024)", launch = "tile", arg = "shared", line = 17 }', 0,
         17),
        ('BX = { domain = "pow2(4, 32)", dim3 = "blocks.x" }', 16, 14),
        ('BY = { domain = "pow2(4, 32)", dim3 = "blocks.y" }', 16, 14),
        ('T = { domain = "pow2(64, 512)", dim3 = "threads.x" }', 256, 18),
        ('P = { domain = "pow2(32, 128)", launch = "plain", line = 20 }', 64, 20),
    ],
)
def test_each_form_names_its_literal(tmp_path, params, default, line):
    param = knob(tmp_path, params)
    assert (param.default, param.location.line) == (default, line)


def test_the_numbers_the_knob_does_not_reach_are_said(tmp_path):
    couplings = knob(tmp_path, 'BS = { domain = "pow2(32, 1024)", launch = "rotate" }').couplings
    said = {(where.line, what) for where, what in couplings}
    assert said == {
        (12, "the launch's grid `( n / 2 + 255 ) / 256`"),
        (21, "the launch's grid `n / 256`"),
        (3, "the kernel's `__launch_bounds__`"),
        (4, "an array bound in the kernel"),
    }
    templated = knob(tmp_path, 'SB = { domain = "values(64, 128)", launch = "scale" }').couplings
    assert {what.split(" `")[0] for _, what in templated} == {
        "the launch's grid",
        "a template argument of the launch",
    }
    blocks = knob(tmp_path, 'BX = { domain = "pow2(4, 32)", dim3 = "blocks.x" }').couplings
    assert [what.split(" `")[0] for _, what in blocks] == ["`dim3 grid` of the launch"]


def test_an_uncoupled_literal_is_said_nowhere(tmp_path):
    plain = 'P = { domain = "pow2(32, 128)", launch = "plain", line = 20 }'
    assert knob(tmp_path, plain).couplings == ()


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ('T = { domain = "pow2(64, 512)", launch = "plain" }', "`threads` at"),
        ('T = { domain = "pow2(2, 8)", dim3 = "threads.y" }', "an absent component is 1"),
        ('T = { domain = "pow2(2, 8)", launch = "missing" }', "a launch of missing"),
        ('T = { domain = "pow2(2, 8)", launch = "tile", arg = "blocks" }', "arg must be grid"),
        ('T = { domain = "pow2(2, 8)", dim3 = "blocks" }', "dim3 must be a dim3 variable"),
        ('T = { domain = "pow2(2, 8)", dim3 = "blocks.x", clause = "unroll" }', "one place"),
        ('T = { domain = "pow2(2, 8)", arg = "block" }', "'arg' narrows a place"),
        ('T = { domain = "pow2(2, 8)", launch = "rotate", default = 8 }', "the program has 256"),
        ('T = { domain = "pow2(2, 8)", launch = "tile", arg = "block.y" }', "`blocks` at"),
    ],
)
def test_each_mistake_is_said(tmp_path, params, said):
    with pytest.raises(AnnotuneError) as caught:
        read_problem(project(tmp_path, params))
    assert said in caught.value.message, caught.value.message
