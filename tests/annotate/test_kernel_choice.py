"""`chosen_kernel`: `--mode kernel` and `--kernel` are never quietly program mode."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.annotate.problem import chosen_kernel
from annotune.core.diagnostics import AnnotuneError

TWO_KERNELS = """\
#define B 32 // @tune pow2(32, 256)
#pragma annotune kernel first grid(4) block(B) args(out(4 * B))
__global__ void first(float *out) { out[threadIdx.x] = 1; }
#pragma annotune kernel second grid(4) block(B) args(out(4 * B))
__global__ void second(float *out) { out[threadIdx.x] = 2; }
"""
NO_KERNEL = """\
#define B 32 // @tune pow2(32, 256)
__global__ void third(float *out) { out[threadIdx.x] = 3; }
int main() { third<<<4, B>>>(0); }
"""


@pytest.fixture(scope="module")
def problems(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("choice")
    (root / "two.cu").write_text(TWO_KERNELS)
    (root / "none.cu").write_text(NO_KERNEL)
    return {name: read_problem(root / f"{name}.cu") for name in ("two", "none")}


def test_the_named_kernel_or_the_only_one(problems):
    two = problems["two"]
    assert chosen_kernel(two, "kernel", "second").name == "second"
    assert chosen_kernel(two, "auto", "first").name == "first"
    one = dataclasses.replace(two, kernels=two.kernels[:1])
    assert chosen_kernel(one, "kernel", None).name == "first"
    assert chosen_kernel(one, "auto", None).name == "first"


def test_program_mode_and_auto_without_kernels_run_the_program(problems):
    assert chosen_kernel(problems["two"], "program", None) is None
    assert chosen_kernel(problems["none"], "auto", None) is None
    assert chosen_kernel(problems["none"], "program", None) is None


def test_kernel_mode_without_a_declared_kernel_is_an_error(problems):
    with pytest.raises(AnnotuneError, match="declares none") as caught:
        chosen_kernel(problems["none"], "kernel", None)
    error = caught.value
    assert error.location is not None and Path(error.location.file).name == "none.cu"
    assert "[[file.kernel]]" in (error.hint or "")


@pytest.mark.parametrize("mode", ["kernel", "auto"])
def test_a_kernel_named_that_no_source_declares(problems, mode):
    with pytest.raises(AnnotuneError, match="--kernel third: kernel mode needs a declared"):
        chosen_kernel(problems["none"], mode, "third")
    with pytest.raises(AnnotuneError, match="--kernel nope: no such kernel") as caught:
        chosen_kernel(problems["two"], mode, "nope")
    assert "first at " in (caught.value.hint or "") and "two.cu:2:" in (caught.value.hint or "")


def test_several_kernels_and_none_named(problems):
    with pytest.raises(AnnotuneError, match="2 kernels are declared .first, second.") as caught:
        chosen_kernel(problems["two"], "kernel", None)
    assert caught.value.location is not None and caught.value.location.line == 2


def test_a_kernel_named_in_program_mode_or_an_unknown_mode(problems):
    with pytest.raises(AnnotuneError, match="--mode program runs the program"):
        chosen_kernel(problems["two"], "program", "first")
    with pytest.raises(AnnotuneError, match="unknown mode 'kernels'"):
        chosen_kernel(problems["two"], "kernels", None)


TEMPLATE = """\
#define N 4096
template <typename T>
__global__ void dot_kernel(const T *a, const T *b, T *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] * b[i];
}
"""
CONFIG = """\
[[file]]
path = "dot.cu"
[file.params]
BS = { domain = "pow2(32, 256)", default = 128 }
"""
DECLARED = """\
[[file.kernel]]
name = "{name}"
grid = "(N + BS - 1) / BS"
block = "BS"
args = ["in(N)", "in(N)", "out(N)", "N"]
"""


def _instances(directory: Path, *names: str):
    (directory / "dot.cu").write_text(TEMPLATE)
    declared = "".join(DECLARED.format(name=name) for name in names)
    (directory / "annotune.toml").write_text(CONFIG + declared)
    return read_problem(directory / "dot.cu")


def test_two_instances_of_one_template_are_two_kernels_chosen_by_their_declared_names(
    tmp_path,
):
    problem = _instances(tmp_path, "dot_kernel<float>", "dot_kernel< double >")
    kernels = problem.kernels
    assert [k.declared for k in kernels] == ["dot_kernel<float>", "dot_kernel<double>"]
    assert chosen_kernel(problem, "kernel", "dot_kernel<double>") is kernels[1]
    assert chosen_kernel(problem, "kernel", "dot_kernel <float>") is kernels[0]
    with pytest.raises(AnnotuneError, match="2 instances of it are declared: name one"):
        chosen_kernel(problem, "kernel", "dot_kernel")
    with pytest.raises(AnnotuneError, match="no such kernel") as refused:
        chosen_kernel(problem, "kernel", "dot_kernel<int>")
    assert "dot_kernel<double> at " in refused.value.hint
    with pytest.raises(AnnotuneError, match=r"2 kernels are declared \(dot_kernel<float>, dot"):
        chosen_kernel(problem, "kernel", None)


def test_the_same_instance_declared_twice_is_a_located_duplicate(tmp_path):
    with pytest.raises(AnnotuneError, match="duplicate .* for 'dot_kernel<float>'") as error:
        _instances(tmp_path, "dot_kernel<float>", "dot_kernel<float >")
    assert error.value.location.line == 11
