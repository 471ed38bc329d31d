"""Kernel-mode variants compiled by NVRTC in a pool of worker processes, behind the compile
cache, with nvcc as the fallback. Needs the NVRTC wheel (no GPU: a cubin is only written); the
fallback tests need nvcc too. One builder per cache is shared where the tests allow: a pool's
start and each nvcc fallback cost about a second."""

from __future__ import annotations

import hashlib
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from annotune.annotate import Problem, read_problem
from annotune.builder import Builder, nvrtc
from annotune.builder.nvrtc import (
    TEST_EXIT_MARKER,
    NvrtcPool,
    NvrtcRequest,
    compile_request,
    nvrtc_options,
    nvrtc_unavailable,
    start_pool,
    value_checks,
)
from annotune.builder.verify import Tuned
from annotune.core.diagnostics import Location

pytestmark = pytest.mark.skipif(bool(nvrtc_unavailable()), reason=nvrtc_unavailable() or "-")
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

HELPERS = """\
#pragma once
#include <vector>
#define N 4096
__device__ inline float twice(float v) { return 2.0f * v; }
inline std::vector<float> host_data() { return std::vector<float>(N, 1.0f); }
"""

KERNEL = """\
#include <cstdio>
#include <cstdint>
#include "../common/helpers.cuh"
#ifndef BLOCK
#define BLOCK 128 // @tune values(64, 128, 256)
#endif
#ifndef UNROLL
#define UNROLL 1 // @tune values(1, 100)
#endif
#ifndef UNUSED
#define UNUSED 0 // @tune values(0, 1)
#endif
#pragma annotune kernel scale grid(N / BLOCK) block(BLOCK) args(inout(N), N)
__global__ void scale(float *x, int n) {
  static_assert(BLOCK != 256, "BLOCK 256 is not supported");
  __shared__ float s[BLOCK];
  float a = x[threadIdx.x];
#pragma unroll
  for (int i = 0; i < UNROLL; i++) a = sinf(a * x[(i * 7919) & 1023] + i);
  s[threadIdx.x] = twice(a);
  __syncthreads();
  x[blockIdx.x * BLOCK + threadIdx.x] = s[BLOCK - 1 - threadIdx.x];
}
int main() {
  std::vector<float> x = host_data();
  printf("%zu\\n", x.size());
}
"""

SM90 = (9, 0)
FAST = [{"BLOCK": b, "UNROLL": 1, "UNUSED": u} for b in (64, 128) for u in (0, 1)]
SLOW = {"BLOCK": 64, "UNROLL": 100, "UNUSED": 0}  # 100 unrolled sinf: about a second


def kernel_problem(directory: Path, source: str = KERNEL) -> Problem:
    (directory / "common").mkdir(parents=True, exist_ok=True)
    (directory / "common" / "helpers.cuh").write_text(HELPERS)
    (directory / "src").mkdir(exist_ok=True)
    path = directory / "src" / "kernel.cu"
    path.write_text(source)
    return read_problem(path)


@pytest.fixture(scope="module")
def problem(tmp_path_factory) -> Problem:
    return kernel_problem(tmp_path_factory.mktemp("kernel"))


@pytest.fixture(scope="module")
def builder(problem, tmp_path_factory) -> Iterator[Builder]:
    with Builder(
        problem, cache_dir=tmp_path_factory.mktemp("cache"), jobs=2, nvrtc_arch=SM90
    ) as shared:
        yield shared


def test_nvrtc_compiles_the_device_code_of_a_file_with_host_code_and_std_headers(builder):
    assert builder.nvrtc_unavailable == ""
    assert re.match(r"NVRTC \d+\.\d+.* --gpu-architecture=sm_90; fallback: nvcc -cubin ", (
        builder.identity()
    ))  # fmt: skip
    (build,) = builder.build([FAST[0]])
    assert build.ok and not build.cached and build.fallback == "" and build.error == ""
    cubin = build.executable.read_bytes()
    assert cubin.startswith(b"\x7fELF") and build.program == hashlib.sha256(cubin).hexdigest()
    (kernel,) = build.resources
    assert kernel == "_Z5scalePfi"
    assert build.resources[kernel].shared_bytes == 64 * 4
    assert build.resources[kernel].registers > 0


def test_a_second_build_is_served_from_the_cache_without_nvrtc(builder, monkeypatch):
    builder.build(FAST)

    def no_compile(self, request):
        raise AssertionError("NVRTC was called for a cached variant")

    monkeypatch.setattr(NvrtcPool, "compile", no_compile)
    again = Builder(builder.problem, cache_dir=builder.cache_dir, jobs=2, nvrtc_arch=SM90)
    assert all(b.ok and b.cached for b in again.build(FAST))


def test_builds_come_as_they_finish_and_a_slow_one_holds_back_no_other(problem, tmp_path):
    with Builder(problem, cache_dir=tmp_path, jobs=2, nvrtc_arch=SM90) as fresh:
        order = [index for index, build in fresh.build_iter([SLOW, *FAST]) if build.ok]
    assert sorted(order) == [0, 1, 2, 3, 4] and order[-1] == 0


def test_closing_the_iteration_early_cancels_the_builds_not_started(problem, tmp_path):
    with Builder(problem, cache_dir=tmp_path, jobs=1, nvrtc_arch=SM90) as fresh:
        builds = fresh.build_iter(FAST)
        first, _ = next(builds)
        builds.close()
        (again,) = fresh.build([FAST[3]])
    assert first == 0 and not again.cached  # never built: cancelled


def test_equal_programs_have_equal_cubins_and_the_same_program(builder, tmp_path):
    """UNUSED is read by nothing: both values make the same cubin; so does a compile in
    another cache, and another BLOCK makes another."""
    unused_0, unused_1, other_block, _ = builder.build(FAST)
    assert unused_0.program == unused_1.program != other_block.program
    assert unused_0.executable.read_bytes() == unused_1.executable.read_bytes()
    with Builder(builder.problem, cache_dir=tmp_path, jobs=1, nvrtc_arch=SM90) as elsewhere:
        (again,) = elsewhere.build([FAST[0]])
    assert not again.cached and again.executable.read_bytes() == unused_0.executable.read_bytes()


def test_the_pool_compiles_the_same_request_to_the_same_bytes(tmp_path):
    text = b"__global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }\n"
    options = ("--gpu-architecture=sm_90", "-Xptxas", "-v")
    pool = NvrtcPool(1)
    try:
        first, second = (
            pool.compile(NvrtcRequest("k.cu", text, options, str(tmp_path / name), 60.0))
            for name in ("a", "b")
        )
    finally:
        pool.close()
    assert first[0].ok and first[1] == second[1] != ""
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()


@needs_nvcc
def test_a_failed_variant_fails_located_and_the_others_of_its_batch_compile(builder, problem):
    failing = {"BLOCK": 256, "UNROLL": 1, "UNUSED": 0}
    builds = builder.build([FAST[0], failing, FAST[2]])
    assert [b.ok for b in builds] == [True, False, True]
    failed = builds[1]
    assert f"{problem.source}(15): error: static assertion failed" in failed.error  # nvcc's
    assert f"{problem.source}(15): error: static assertion failed" in failed.fallback  # NVRTC's
    (again,) = builder.build([failing])
    assert again.cached and again.error == failed.error and again.fallback == failed.fallback


def test_a_worker_that_dies_is_a_transient_build_and_the_next_build_compiles(tmp_path):
    marked = KERNEL.replace("__syncthreads();", f"// {TEST_EXIT_MARKER}")
    dying = kernel_problem(tmp_path / "dying", marked)
    cache = tmp_path / "c"
    with Builder(dying, cache_dir=cache, jobs=1, nvrtc_arch=SM90) as fresh:
        (died,) = fresh.build([FAST[0]])
        assert died.transient and not died.ok and died.error == "the NVRTC worker process died"
        assert not any(cache.rglob("result.json"))  # not cached
        (again,) = fresh.build([FAST[0]])  # a new pool, and the same death
        assert again.transient and not again.cached
    with Builder(kernel_problem(tmp_path / "fine"), cache_dir=cache, nvrtc_arch=SM90) as fine:
        (build,) = fine.build([FAST[0]])
    assert build.ok and build.fallback == ""


def test_a_compile_over_the_timeout_is_transient(problem, tmp_path):
    with Builder(problem, cache_dir=tmp_path, jobs=1, timeout=0.2, nvrtc_arch=SM90) as hasty:
        (late,) = hasty.build([SLOW])
    assert late.transient and late.error == "compile timed out after 0.2 s"


@needs_nvcc
def test_what_the_slice_cannot_fix_is_compiled_by_nvcc(tmp_path):
    source = KERNEL.replace(
        "__global__", "#ifdef __CUDACC_RTC__\n#error this kernel needs nvcc\n#endif\n__global__"
    )
    with Builder(
        kernel_problem(tmp_path, source), cache_dir=tmp_path / "c", jobs=1, nvrtc_arch=SM90
    ) as fresh:
        (build,) = fresh.build([FAST[0]])
    assert build.ok and "this kernel needs nvcc" in build.fallback
    assert build.executable.read_bytes().startswith(b"\x7fELF")
    assert len(build.program) == 64  # nvcc's: the preprocessed program's hash
    assert build.resources["_Z5scalePfi"].shared_bytes == 64 * 4


@needs_nvcc
def test_a_kernel_nvrtc_names_otherwise_is_compiled_by_nvcc(tmp_path):
    """With libcu++ included, NVRTC's int64_t is its `long long`: `scale(float *, int64_t)`
    is _Z5scalePfx there, and kernel mode launches _Z5scalePfl, the name nvcc gives it."""
    source = KERNEL.replace("float *x, int n", "float *x, int64_t n")
    source = source.replace("#include <cstdint>", "#include <cstdint>\n#include <cuda/std/cstdint>")
    with Builder(
        kernel_problem(tmp_path, source), cache_dir=tmp_path / "c", jobs=1, nvrtc_arch=SM90
    ) as fresh:
        (build,) = fresh.build([FAST[0]])
    assert build.fallback == "compile failed: NVRTC has no kernel _Z5scalePfl (its: _Z5scalePfx)"
    assert build.ok and list(build.resources) == ["_Z5scalePfl"]


def test_a_kernel_taking_int64_t_compiles_with_nvrtc_without_libcuxx(tmp_path):
    """Without libcu++ the prelude has glibc's `long` (`DeviceCode.prelude`): NVRTC names the
    kernel _Z5scalePfl, as nvcc does. (Needs the builder to pre-include
    `problem.device_code.prelude`, issue 36.)"""
    source = KERNEL.replace("float *x, int n", "float *x, int64_t n")
    with Builder(
        kernel_problem(tmp_path, source), cache_dir=tmp_path / "c", jobs=1, nvrtc_arch=SM90
    ) as fresh:
        (build,) = fresh.build([FAST[0]])
    assert build.ok and build.fallback == "", build.fallback
    assert list(build.resources) == ["_Z5scalePfl"]


@needs_nvcc
def test_a_tuned_macro_overridden_later_fails_nvrtc_check_and_nvcc_says_where(tmp_path):
    source = KERNEL.replace("#ifndef UNUSED", "#undef BLOCK\n#define BLOCK 64\n#ifndef UNUSED")
    problem = kernel_problem(tmp_path, source)
    with Builder(problem, cache_dir=tmp_path / "c", jobs=1, nvrtc_arch=SM90) as fresh:
        overridden, agreeing = fresh.build([FAST[2], FAST[0]])  # BLOCK 128, BLOCK 64
    assert "BLOCK is not the tuned 128" in overridden.fallback
    assert overridden.error == (
        f"tuned value not seen by the compiler: {problem.source}:11: error: the compiler sees "
        f"BLOCK = 64, not the tuned 128: this definition wins over annotune's "
        f"({problem.source}:5)"
    )
    assert agreeing.ok and agreeing.fallback == ""


def test_the_value_checks_compare_integers_in_the_preprocessor_others_by_static_assert():
    at = Location("k.cu", 1, 1)
    text = value_checks([Tuned("B", 4, at), Tuned("F", 0.5, at)])
    assert "#elif (B) != (4)\n" in text
    assert 'static_assert((F) == (0.5), "annotune: F is not the tuned 0.5' in text
    assert text.count("#if !defined(") == 2 and text.count("#endif") == 2


def test_without_device_code_nvcc_compiles_and_the_builder_says_why(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text("#ifndef B\n#define B 1 // @tune values(1, 2)\n#endif\n")
    plain = Builder(read_problem(path), cache_dir=tmp_path / "c", nvrtc_arch=SM90)
    assert "device code" in plain.nvrtc_unavailable
    assert plain.identity().startswith("nvcc -cubin -arch=sm_90 ")
    assert re.match(r"NVRTC \d+\.\d+ cannot compile for sm_50 ", nvrtc_unavailable((5, 0)))


def test_compiles_are_minimal_and_a_program_that_needs_more_compiles_without(tmp_path):
    """`--minimal` leaves out the texture and runtime-API declarations: a kernel taking a
    texture object fails under it, and the worker compiles it again in full."""
    assert "--minimal" in nvrtc_options(SM90, [], [], "prelude.h")
    text = (
        b"__global__ void k(cudaTextureObject_t t, float *x) {\n"
        b"  x[threadIdx.x] = tex1Dfetch<float>(t, threadIdx.x);\n}\n"
    )
    options = ("--gpu-architecture=sm_90", "--minimal", "-Xptxas", "-v")
    outcome = compile_request(NvrtcRequest("t.cu", text, options, str(tmp_path / "t"), 60.0))
    assert outcome.ok, outcome.log
    assert (tmp_path / "t").read_bytes().startswith(b"\x7fELF")


def test_a_started_pool_is_taken_by_the_next_pool_of_its_width():
    start_pool(1)
    started = nvrtc._started[1]
    pool = NvrtcPool(1)
    try:
        assert pool._current() is started and 1 not in nvrtc._started
        assert NvrtcPool(1)._current() is not started  # taken once
    finally:
        pool.close()


def test_cfloat_and_cmath_constants_compile_with_nvrtc(tmp_path):
    """FLT_EPSILON and M_PI come from host headers the slice blanks; NVRTC has them from
    annotune's prelude, so the kernel is not sent to nvcc (HeCBench rfs-cuda, p4-cuda)."""
    source = KERNEL.replace(
        "#include <cstdio>", "#include <cstdio>\n#include <cfloat>\n#include <cmath>"
    )
    source = source.replace("a = sinf(a * x", "a = sinf((float)M_PI * FLT_EPSILON * a * x")
    with Builder(
        kernel_problem(tmp_path, source), cache_dir=tmp_path / "c", jobs=1, nvrtc_arch=SM90
    ) as fresh:
        (build,) = fresh.build([FAST[0]])
    assert build.ok and build.fallback == "", build.fallback or build.error


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the host macros are Linux's")
def test_nvrtc_sees_the_host_systems_macros_as_nvccs_device_pass_does(tmp_path):
    """nvcc's device pass defines `__linux__` (its host compiler's); NVRTC alone does not, and
    a program's `#if defined(__linux__) ... #else #error` stopped every variant there
    (cuda-samples' simpleIPC)."""
    text = b"#ifndef __linux__\n#error no linux\n#endif\n__global__ void k(int *a) { a[0] = 1; }\n"
    options = tuple(nvrtc_options(SM90, [], [], str(tmp_path / "p.h")))
    (tmp_path / "p.h").write_text("")
    outcome = compile_request(NvrtcRequest("k.cu", text, options, str(tmp_path / "k"), 60.0))
    assert outcome.ok, outcome.log
