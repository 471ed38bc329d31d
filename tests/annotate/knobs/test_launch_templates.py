"""Launches a config rewrites over knobs (`[[file.launch]]`): the grid moves with the block, the
expressions must compute what the code computes at the defaults, the default variant is the
code byte for byte, and what no rewrite reaches is said as a coupling."""

from __future__ import annotations

from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.builder.variants import header_ignored, variant_source
from annotune.core.diagnostics import AnnotuneError

CODE = """\
template <typename T, int B>
__global__ void scale(T *x, int n) { int i = blockIdx.x * B + threadIdx.x; if (i < n) x[i] *= 2; }
__global__ void rotate(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n / 2) x[i] += 1;
}
__global__ void __launch_bounds__(128) bounded(float *x) { x[threadIdx.x] = 0; }
__global__ void tile(float *x, int w) { x[threadIdx.y * w + threadIdx.x] = 0; }
int main() {
  int n = 1 << 20; float *x = 0;
  rotate<<<(n / 2 + 255) / 256, 256>>>(x, n);
  scale<float, 128><<<n / 128, 128>>>(x, n);
  bounded<<<n / 128, 128>>>(x);
  dim3 blocks (16, 16);
  dim3 grid ((1024 + 15) / 16, (1024 + 15) / 16);
  tile<<<grid, blocks>>>(x, 1024);
  return 0;
}
"""


def project(tmp_path: Path, config: str, code: str = CODE) -> Path:
    path = tmp_path / "k.cu"
    path.write_text(code)
    (tmp_path / "annotune.toml").write_text(f'[[file]]\npath = "k.cu"\n{config}')
    return path


ROTATE = """\
[file.params]
BS = "pow2(32, 1024)"
[[file.launch]]
kernel = "rotate"
grid = "(n / 2 + BS - 1) / BS"
block = "BS"
"""


def test_the_grid_moves_with_the_block_and_the_default_is_the_codes_number(tmp_path):
    problem = read_problem(project(tmp_path, ROTATE))
    (param,) = problem.params
    assert param.default == 256  # `block = "BS"` over the launch's 256
    assert [r.what.split(" at ")[0] for r in problem.rewrites] == [
        "the grid of the launch of rotate",
        "the block of the launch of rotate",
    ]
    assert [r.written for r in problem.rewrites] == ["(n / 2 + 255) / 256", "256"]
    text = variant_source(problem, {"BS": 64}).files["k.cu"].decode()
    assert "rotate<<<(n / 2 + 64 - 1) / 64, 64>>>(x, n);" in text
    assert variant_source(problem, {"BS": 256}).files["k.cu"].decode() == CODE  # as written
    assert variant_source(problem, {"BS": 64}).defines == ()  # no -DBS: nothing reads it
    assert param.couplings == ()  # the grid is rewritten with it: nothing left behind
    assert [p.name for p in header_ignored(problem, {"BS": 64})] == ["BS"]  # a copy sets it


def test_a_template_that_computes_otherwise_at_the_defaults_is_an_error_at_it(tmp_path):
    wrong = ROTATE.replace("(n / 2 + BS - 1) / BS", "(n + BS - 1) / BS")
    with pytest.raises(AnnotuneError) as caught:
        read_problem(project(tmp_path, wrong))
    error = caught.value
    assert "at the defaults (BS = 256), grid is `(n + 256 - 1) / 256`" in error.message
    assert "`( n / 2 + 255 ) / 256`" in error.message and "k.cu:11" in error.message
    assert (error.location.line, error.location.column) == (7, 9)  # the config's grid


def test_an_equivalent_expression_is_accepted_and_a_changed_vendored_file_is_caught(tmp_path):
    same = ROTATE.replace("(n / 2 + BS - 1) / BS", "n / 2 / BS + (n / 2 % BS != 0)")
    assert len(read_problem(project(tmp_path, same)).rewrites) == 2  # the same for every n tried
    changed = CODE.replace("(n / 2 + 255) / 256", "(n + 255) / 256")  # the vendored file moved
    with pytest.raises(AnnotuneError, match="the baseline would not be the program as written"):
        read_problem(project(tmp_path, same, changed))


def test_dim3_variables_resolve_to_their_declarations(tmp_path):
    config = """\
[file.params]
BX = "pow2(4, 32)"
BY = { domain = "pow2(4, 32)", default = 16 }
[[file.launch]]
kernel = "tile"
grid = "dim3((1024 + BX - 1) / BX, (1024 + BY - 1) / BY)"
block = "dim3(BX, BY)"
"""
    with pytest.raises(AnnotuneError, match="give it a default"):
        read_problem(project(tmp_path, config))  # BX is named in expressions only
    problem = read_problem(
        project(
            tmp_path,
            config.replace('"pow2(4, 32)"\nBY', '{ domain = "pow2(4, 32)", default = 16 }\nBY', 1),
        )
    )
    text = variant_source(problem, {"BX": 32, "BY": 8}).files["k.cu"].decode()
    assert "tile<<<dim3((1024 + 32 - 1) / 32, (1024 + 8 - 1) / 8), dim3(32, 8)>>>" in text
    assert {p.name: p.couplings for p in problem.params} == {"BX": (), "BY": ()}


def test_template_arguments_and_what_is_left_behind(tmp_path):
    config = """\
[file.params]
BT = "pow2(32, 512)"
[[file.launch]]
kernel = "scale"
block = "BT"
template = ["float", "BT"]
[[file.launch]]
kernel = "bounded"
block = "BT"
"""
    with pytest.raises(AnnotuneError, match="no launch of nothing"):
        read_problem(project(tmp_path, config.replace('kernel = "bounded"', 'kernel = "nothing"')))
    problem = read_problem(project(tmp_path, config))
    text = variant_source(problem, {"BT": 64}).files["k.cu"].decode()
    assert "scale<float, 64><<<n / 128, 64>>>" in text and "bounded<<<n / 128, 64>>>" in text
    (param,) = problem.params
    said = sorted((c[0].line, c[1].split(" `")[0]) for c in param.couplings)
    assert said == [
        (7, "the kernel's"),  # __launch_bounds__(128)
        (12, "the launch's argument"),  # n / 128: the grid no rewrite reaches
        (13, "the launch's argument"),
    ]


@pytest.mark.parametrize(
    ("launch", "message", "line"),
    [
        ('kernel = "missing"\nblock = "BS"', "no launch of missing", 6),
        ('kernel = "rotate"\nblock = "BS"\nline = 3', "no launch of rotate", 6),
        ('kernel = "rotate"', "give grid, block, shared or template", 5),
        ('kernel = "rotate"\nblock = "128"\ngrid = "(n / 2 + BS - 1) / BS"', "names no knob", 7),
        ('kernel = "rotate"\nblock = "BS"\ntemplate = ["BS"]', "writes no template arguments", 8),
        ('kernel = "rotate"\nblock = 256', "block must be a C expression", 7),
        ('kernel = "rotate"\nblocks = "BS"', "unknown key 'blocks'", 7),
    ],
)
def test_every_mistake_is_located_in_the_config(tmp_path, launch, message, line):
    knob = 'BS = { domain = "pow2(32, 1024)", default = 256 }'
    config = f"[file.params]\n{knob}\n[[file.launch]]\n{launch}\n"
    with pytest.raises(AnnotuneError, match=message) as caught:
        read_problem(project(tmp_path, config))
    assert caught.value.location.line == line


def test_a_launch_written_twice_is_refused(tmp_path):
    config = ROTATE.replace(
        'BS = "pow2(32, 1024)"', 'BS = { domain = "pow2(32, 1024)", launch = "rotate" }'
    )
    with pytest.raises(AnnotuneError, match="rewritten twice"):
        read_problem(project(tmp_path, config))


CAPPED = """\
__global__ void find(int *x, int order) { x[threadIdx.x] = order; }
void launch(int *x, int order, int count) {
  int threads;
  threads = order < 256 ? order : 256;
  find<<<count, threads>>>(x, order);
}
"""

CAP = """\
[file.params]
CAP = { domain = "pow2(64, 1024)", default = 256 }
[[file.launch]]
kernel = "find"
block = "order < CAP ? order : CAP"
"""


def test_a_name_set_by_a_statement_is_read_through_that_statement(tmp_path):
    # shaped like HeCBench b+tree-cuda's kernel wrappers: the block is a variable that no
    # initializer sets, a statement caps it at a literal, and the launch names the variable
    problem = read_problem(project(tmp_path, CAP, CAPPED))
    assert [r.written for r in problem.rewrites] == ["threads"]
    text = variant_source(problem, {"CAP": 512}).files["k.cu"].decode()
    assert "find<<<count, order < 512 ? order : 512>>>(x, order);" in text
    assert variant_source(problem, {"CAP": 256}).files["k.cu"].decode() == CAPPED


@pytest.mark.parametrize(
    "statements",
    [
        "threads = order < 128 ? order : 128;",  # the vendored file changed: another cap
        "threads = order < 256 ? order : 256;\n  if (order > 9) threads = 32;",  # two values
    ],
)
def test_a_statement_that_computes_otherwise_is_an_error_at_the_config(tmp_path, statements):
    code = CAPPED.replace("threads = order < 256 ? order : 256;", statements)
    with pytest.raises(AnnotuneError) as caught:
        read_problem(project(tmp_path, CAP, code))
    assert "at the defaults (CAP = 256)" in caught.value.message
    assert caught.value.location.line == 7  # the config's block
