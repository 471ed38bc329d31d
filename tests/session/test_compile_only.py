"""`tune --compile-only`: which configurations are compiled, what is counted, and the
architecture nvcc (or NVRTC) is given. The nvcc tests skip where nvcc is not installed, the
NVRTC one where NVRTC is not either."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.builder import CompilerCommand
from annotune.builder.nvrtc import nvrtc_unavailable
from annotune.core.diagnostics import AnnotuneError
from annotune.session.compile_only import compile_configurations
from annotune.session.options import TuneOptions

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

SOURCE = """\
#ifndef BLOCK
#define BLOCK 256 // @tune values(256, 512, 1024)
#endif
#ifndef ITEMS
#define ITEMS 1 // @tune values(1, 2)
#endif
#if BLOCK > 512
#error BLOCK is too large
#endif
#if defined(__CUDA_ARCH__) && defined(ONLY_SM90) && __CUDA_ARCH__ != 900
#error compiled for another architecture than sm_90
#endif
__global__ void scale(float *x) {
  __shared__ float s[BLOCK * ITEMS];
  for (int i = 0; i < ITEMS; i++) s[threadIdx.x * ITEMS + i] = x[threadIdx.x * ITEMS + i];
  __syncthreads();
  for (int i = 0; i < ITEMS; i++) x[threadIdx.x * ITEMS + i] = 2 * s[BLOCK * ITEMS - 1 - i];
}
int main(void) { return 0; }
"""


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "scale.cu"
    path.write_text(SOURCE)
    return path


@needs_nvcc
def test_every_configuration_is_compiled_and_failures_and_resources_are_counted(source):
    problem = read_problem(source)
    report = compile_configurations(problem, TuneOptions(budget=None, jobs=4))
    assert (report.compiled, report.failed, report.transient, report.cached) == (4, 2, 0, 0)
    assert report.space_size == 6 and report.arch is None and report.seconds > 0
    (kind,) = report.failures  # two configurations, one kind: the same #error
    assert kind.count == 2 and kind.status == "compile_error" and kind.params["BLOCK"] == 1024
    assert "BLOCK is too large" in kind.error and str(source) in kind.error  # the user's file
    (kernel,) = report.kernels
    assert kernel.kernel == "_Z5scalePf" and kernel.compiled == 4
    assert kernel.shared_bytes == (256 * 4, 512 * 2 * 4)
    assert kernel.registers[0] > 0 and kernel.spilling == 0
    assert report.to_json()["kernels"]["_Z5scalePf"]["shared_bytes"] == [1024, 4096]

    again = compile_configurations(problem, TuneOptions(budget=None, jobs=4))
    assert again.cached == 6 and (again.compiled, again.failed) == (4, 2)  # failures cached too


@needs_nvcc
def test_the_architecture_reaches_nvcc(source):
    problem = read_problem(source)
    options = TuneOptions(
        budget=1,  # one build per architecture shows which one reached nvcc
        jobs=1,
        compiler=CompilerCommand.parse("nvcc -O3 -Xptxas -v -DONLY_SM90 {source} -o {output}"),
    )
    default_arch = compile_configurations(problem, options)
    assert default_arch.compiled == 0 and "another architecture" in default_arch.failures[0].error
    sm90 = compile_configurations(problem, options, arch="sm_90")
    assert sm90.compiled == 1 and sm90.arch == "sm_90"
    assert sm90.command.startswith("nvcc -arch=sm_90 -O3 ")
    by_device = compile_configurations(problem, TuneOptions(budget=1, device="H100"))
    assert by_device.arch == "sm_90" and "-arch=sm_90" in by_device.command


FAKE_COMPILER = (
    "import sys; args = sys.argv[1:]; "
    "open(sys.argv[1], 'a').write(' '.join(a for a in args if a.startswith('-D')) + '\\n'); "
    "open(args[args.index('-o') + 1], 'w').write('')"
)


def test_the_default_comes_first_then_a_seeded_uniform_sample_of_legal_ones(tmp_path):
    """Checked with a stand-in compiler that logs each variant's -D flags: no nvcc needed."""
    path = tmp_path / "space.c"
    path.write_text(
        "#ifndef A\n#define A 2 // @tune range(1, 8)\n#endif\n"
        "#ifndef B\n#define B 1 // @tune range(1, 8)\n#endif\n"
        "#pragma annotune constraint A * B <= 16\nint main(void) { return 0; }\n"
    )
    log = tmp_path / "compiled.log"
    command = CompilerCommand(
        (sys.executable, "-c", FAKE_COMPILER, str(log), "{defines}", "{source}", "-o", "{output}")
    )

    def compile_five(seed: int):
        options = TuneOptions(budget=5, seed=seed, jobs=1, compiler=command, cache_dir=tmp_path)
        return compile_configurations(read_problem(path), options)

    first = compile_five(seed=0)
    assert (first.compiled, first.failed, first.cached) == (5, 0, 0) and first.kernels == ()
    compiled = log.read_text().splitlines()
    assert compiled[0] == "-DA=2 -DB=1" and len(set(compiled)) == 5
    for line in compiled:
        a, b = (int(flag.split("=")[1]) for flag in line.split())
        assert a * b <= 16
    assert compile_five(seed=0).cached == 5  # the same seed, the same configurations
    assert 1 <= compile_five(seed=1).cached < 5  # the default, and another sample


def test_an_architecture_needs_nvcc_without_one_of_its_own(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text("#ifndef B\n#define B 1 // @tune values(1, 2)\n#endif\n")
    problem = read_problem(path)
    with pytest.raises(AnnotuneError, match="runs gcc"):
        compile_configurations(problem, TuneOptions(compiler=CompilerCommand.parse("gcc")), "sm_90")
    own = TuneOptions(compiler=CompilerCommand.parse("nvcc -arch=sm_80 {source} -o {output}"))
    with pytest.raises(AnnotuneError, match=r"already names an architecture \(-arch=sm_80\)"):
        compile_configurations(problem, own, "sm_90")
    with pytest.raises(AnnotuneError, match="not sm_XY"):
        compile_configurations(problem, TuneOptions(), "90")
    with pytest.raises(AnnotuneError, match="no NVIDIA GPU of annotune's table"):
        compile_configurations(problem, TuneOptions(device="AMD Instinct MI250X"))


KERNEL = """\
#include <cstdio>
#define N 4096
#ifndef BLOCK
#define BLOCK 128 // @tune values(128, 256, 512)
#endif
#if BLOCK == 512 && defined(__CUDACC_RTC__)
#error not for NVRTC
#endif
#pragma annotune kernel twice grid(N / BLOCK) block(BLOCK) args(inout(N))
__global__ void twice(float *x) {
  __shared__ float s[BLOCK];
  s[threadIdx.x] = x[blockIdx.x * BLOCK + threadIdx.x];
  __syncthreads();
  x[blockIdx.x * BLOCK + threadIdx.x] = 2 * s[BLOCK - 1 - threadIdx.x];
}
int main() { printf("%d\\n", N); }
"""


@needs_nvcc
@pytest.mark.skipif(bool(nvrtc_unavailable()), reason=nvrtc_unavailable() or "-")
def test_kernel_mode_compiles_with_nvrtc_and_counts_what_nvcc_compiled_instead(tmp_path):
    path = tmp_path / "twice.cu"
    path.write_text(KERNEL)
    problem = read_problem(path)
    report = compile_configurations(problem, TuneOptions(budget=None, jobs=2))
    assert (report.compiled, report.failed, report.transient, report.cached) == (3, 0, 0, 0)
    assert report.fallbacks == 1 and report.to_json()["fallbacks"] == 1  # BLOCK 512: nvcc
    (why,) = report.fallback_reasons  # each fallback says why, with an example
    assert "not for NVRTC" in why.error and why.params == {"BLOCK": 512} and why.count == 1
    assert report.to_json()["fallback_reasons"][0]["params"] == {"BLOCK": 512}
    assert report.command.startswith("NVRTC ") and "--gpu-architecture=sm_75" in report.command
    assert report.arch == "sm_75" and report.warnings == ()
    (kernel,) = report.kernels
    assert kernel.kernel == "_Z5twicePf" and kernel.shared_bytes == (128 * 4, 512 * 4)

    again = compile_configurations(problem, TuneOptions(budget=1, jobs=2), arch="sm_90")
    assert again.arch == "sm_90" and "--gpu-architecture=sm_90" in again.command
    assert (again.compiled, again.cached, again.fallbacks) == (1, 0, 0)
