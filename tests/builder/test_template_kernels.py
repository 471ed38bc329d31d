"""Template kernels built for kernel mode: NVRTC instantiates the configuration's instance and
lowers its name (`nvrtcGetLoweredName`); nvcc is made to instantiate it by a line naming it,
and its symbol is found among the cubin's kernels by demangling. Either way the build names the
symbol the runner loads (`BuildResult.symbols`), which the host code's own instance is not."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.builder import Builder, cubin_compiler
from annotune.builder.nvrtc import nvrtc_unavailable
from annotune.builder.symbols import demangle, instance_symbol

SM90 = (9, 0)
SOURCE = """\
#include <cstdio>
#define N 4096
#ifndef BLOCK
#define BLOCK 64 // @tune values(64, 512)
#endif
typedef float real;
namespace kernels {
template <typename T, int BS>
__global__ void block_sum(const T *in, T *out, int n) {
  __shared__ T part[BS];
  int i = blockIdx.x * BS + threadIdx.x;
  part[threadIdx.x] = i < n ? in[i] : T(0);
  __syncthreads();
  for (int s = BS / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}
}  // namespace kernels
#pragma annotune kernel block_sum<real, BLOCK> grid(N / BLOCK) block(BLOCK) \\
    args(in(N), out(N / BLOCK), N)
int main() {
  float *in = nullptr, *out = nullptr;
  kernels::block_sum<double, 32><<<1, 32>>>((double *)in, (double *)out, 0);  // not ours
  printf("%p\\n", (void *)out);
}
"""
LOWERED = {
    64: "_ZN7kernels9block_sumIfLi64EEEvPKT_PS1_i",
    512: "_ZN7kernels9block_sumIfLi512EEEvPKT_PS1_i",
}


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    source = tmp_path_factory.mktemp("template") / "sum.cu"
    source.write_text(SOURCE)
    return read_problem(source)


@pytest.mark.skipif(bool(nvrtc_unavailable()), reason=nvrtc_unavailable() or "-")
def test_nvrtc_lowers_each_configurations_instance(problem, tmp_path):
    configs = [{"BLOCK": 64}, {"BLOCK": 512}]
    with Builder(problem, cache_dir=tmp_path, jobs=2, nvrtc_arch=SM90) as builder:
        built = builder.build(configs)
    for config, result in zip(configs, built, strict=True):
        symbol = LOWERED[config["BLOCK"]]
        assert result.ok and not result.fallback, result.error
        assert result.symbols == {"block_sum<real, BLOCK>": symbol} and symbol in result.resources
    assert built[0].program != built[1].program  # two instances, two cache entries
    with Builder(problem, cache_dir=tmp_path, jobs=1, nvrtc_arch=SM90) as again:
        (cached,) = again.build(configs[1:])
    assert cached.cached and cached.symbols == {"block_sum<real, BLOCK>": LOWERED[512]}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_nvcc_instantiates_the_instance_and_finds_its_symbol(problem, tmp_path):
    with Builder(problem, compiler=cubin_compiler(SM90), cache_dir=tmp_path, jobs=1) as builder:
        (result,) = builder.build([{"BLOCK": 512}])
    assert result.ok, result.error
    assert result.symbols == {"block_sum<real, BLOCK>": LOWERED[512]}
    # the host code's instance is compiled too, and is not the one named
    assert "_ZN7kernels9block_sumIdLi32EEEvPKT_PS1_i" in result.resources
    assert Path(problem.source).read_text() == SOURCE  # the line naming it went to a copy


def test_demangled_names_are_matched_whole():
    assert demangle(LOWERED[64]) == "void kernels::block_sum<float, 64>(float const*, float*, int)"
    symbols = [LOWERED[64], LOWERED[512], "_Z1kILj4ELb1EEvv", "not_mangled"]
    assert instance_symbol("kernels::block_sum<float, 512>", symbols) == LOWERED[512]
    assert instance_symbol("kernels::block_sum<float,64>", symbols) == LOWERED[64]
    assert instance_symbol("k<4, true>", symbols) == "_Z1kILj4ELb1EEvv"  # 4u as written 4
    assert instance_symbol("kernels::block_sum<float, 128>", symbols) is None
    assert instance_symbol("k<4, true>", ["_Z1kILj4ELb1EEvv"] * 2) is None  # not one: none
    assert demangle("not_mangled") == "not_mangled"


@pytest.mark.gpu
@pytest.mark.skipif(bool(nvrtc_unavailable()), reason=nvrtc_unavailable() or "-")
def test_each_instance_runs_on_the_gpu_and_sums_its_blocks(problem, tmp_path):
    """On a GPU: every configuration's instance, built by NVRTC and by nvcc, is loaded by the
    symbol its build names, launched, and its block sums are right."""
    import numpy as np

    from annotune.run.backends import BackendError, BackendUnavailable, open_backend
    from annotune.run.kernel import KernelRunner
    from annotune.run.sampling import Sampling

    try:
        backend = open_backend("cuda-python")
    except (BackendUnavailable, BackendError) as reason:
        pytest.skip(f"cuda-python: {reason}")
    with backend:
        capability = backend.compute_capability()
        (spec,) = problem.kernels
        runner = KernelRunner(spec, backend, warmup=0, sampling=Sampling(min_runs=2, max_runs=2))
        with Builder(problem, cache_dir=tmp_path / "nvrtc", nvrtc_arch=capability) as nvrtc:
            by_nvrtc = nvrtc.build([{"BLOCK": 64}, {"BLOCK": 512}])
        nvcc = Builder(problem, compiler=cubin_compiler(capability), cache_dir=tmp_path / "nvcc")
        by_nvcc = nvcc.build([{"BLOCK": 512}])
        for build in [*by_nvrtc, *by_nvcc]:  # each its own reference: the sums differ
            assert build.ok, build.error
            measured = runner.measure(build)
            out = runner.outputs
            assert measured.status == "ok", measured.error
            data = runner.input_array(0, spec.launch(build.params).args[0])
            sums = data.reshape(-1, build.params["BLOCK"]).sum(axis=1)
            np.testing.assert_allclose(out.outputs["out"], sums, rtol=1e-4)


@pytest.mark.skipif(bool(nvrtc_unavailable()), reason=nvrtc_unavailable() or "-")
def test_a_const_knob_reaches_the_kernel_through_nvrtc(tmp_path):
    """The other way a third-party kernel reads a tunable: a namespace-scope `const`, declared
    as a knob in the config, rewritten in each variant's copy and kept by the slice."""
    (tmp_path / "k.cu").write_text(
        "const int BS = 128;\n"
        "__global__ void sum(const float *in, float *out) {\n"
        "  __shared__ float part[BS];\n"
        "  part[threadIdx.x] = in[blockIdx.x * BS + threadIdx.x];\n"
        "  __syncthreads();\n"
        "  if (threadIdx.x == 0) out[blockIdx.x] = part[BS - 1];\n"
        "}\n"
    )
    (tmp_path / "annotune.toml").write_text(
        '[[file]]\npath = "k.cu"\n[file.params]\nBS = "values(64, 128, 256)"\n'
        '[[file.kernel]]\nname = "sum"\ngrid = "4096 / BS"\nblock = "BS"\n'
        'args = ["in(4096)", "out(4096 / BS)"]\n'
    )
    problem = read_problem(tmp_path / "k.cu")
    with Builder(problem, cache_dir=tmp_path / "cache", jobs=2, nvrtc_arch=SM90) as builder:
        built = builder.build([{"BS": 64}, {"BS": 256}])
    assert [b.fallback for b in built] == ["", ""]
    shared = [b.resources["_Z3sumPKfPf"].shared_bytes for b in built]
    assert shared == [64 * 4, 256 * 4]



@pytest.mark.skipif(bool(nvrtc_unavailable()), reason=nvrtc_unavailable() or "-")
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_two_instances_each_have_their_symbol_from_nvrtc_and_from_nvcc(tmp_path):
    """`dot<float>` and `dot<double>` are two kernels: each build names both symbols, keyed
    by the declared name, which `--kernel` chooses by."""
    (tmp_path / "dot.cu").write_text(
        "#define B 64 // @tune values(64, 128)\n"
        "template <typename T> __global__ void dot(const T *a, T *out) { out[0] = a[0]; }\n"
        "#pragma annotune kernel dot<float> grid(1) block(B) args(in(1), out(1))\n"
        "#pragma annotune kernel dot<double> grid(1) block(B) args(in(1), out(1))\n"
    )
    problem = read_problem(tmp_path / "dot.cu")
    wanted = {"dot<float>": "_Z3dotIfEvPKT_PS0_", "dot<double>": "_Z3dotIdEvPKT_PS0_"}
    with Builder(problem, cache_dir=tmp_path / "a", jobs=1, nvrtc_arch=SM90) as nvrtc:
        (by_nvrtc,) = nvrtc.build([{"B": 64}])
    nvcc = Builder(problem, compiler=cubin_compiler(SM90), cache_dir=tmp_path / "b")
    (by_nvcc,) = nvcc.build([{"B": 64}])
    for build in (by_nvrtc, by_nvcc):
        assert build.ok and not build.fallback, build.error
        assert build.symbols == wanted
