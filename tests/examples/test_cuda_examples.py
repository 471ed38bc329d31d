"""The CUDA examples of the IterML paper's Table 1 (examples/cuda/<name>/).

Each one scans to the space its comments promise, sampled configurations' kernels compile (and
fit a 1024-thread block in registers), its Makefile builds it, and its program, run on a small
CPU emulation of CUDA (blocks in turn, a block's threads as std::threads), verifies its result
and prints the same check value for every configuration.

Each also declares its kernel(s) for kernel mode: the pragmas launch what main launches (grid,
block, shared memory, arguments, for several configurations), name symbols the cubin has, and
the reductions whose order the block shape changes are shown, in numpy, to need the tolerance
their examples document. On a GPU, each kernel is tuned and no configuration's output differs.

The default run compiles 2 sampled configurations per example with NVRTC, as kernel mode does
(tens of milliseconds a variant against seconds with nvcc, which compiles them where NVRTC's
bindings are not installed): main, where the values reach only a launch's shape, is compiled
by g++ for two configurations in the emulation, and nvcc compiles each whole file once for
the cubin symbols and builds two through their Makefiles. The default run makes two
examples. With ANNOTUNE_FULL_EXAMPLES=1 it compiles 20 per example with nvcc (180 nvcc runs,
several minutes) and makes all ten.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from annotune.annotate import problem_space, read_problem
from annotune.annotate.source import ANNOTUNE_INCLUDE_DIR
from annotune.builder import Builder
from annotune.builder.nvrtc import nvrtc_unavailable
from annotune.core.diagnostics import AnnotuneError
from annotune.run.backends import select_backend
from annotune.run.device import gpu_name
from annotune.run.program import RunSpec
from annotune.session.options import KERNEL_CHECK_RTOL, TuneOptions
from annotune.session.tuner import tune

ROOT = Path(__file__).parents[2]
CUDA = ROOT / "examples" / "cuda"
KERNELS = ("conv2d", "conv3d", "2mm", "3mm", "gemm", "gesummv", "mvt", "syr2k", "syrk")
BLOCK_VALUES = tuple(range(1, 1025))
THIRD = {
    "conv2d": ("ROWS_PER_THREAD", (1, 2, 4, 8)),
    "stencil2d": ("ROWS_PER_THREAD", (1, 2, 4, 8)),
    "conv3d": ("PLANES_PER_THREAD", (1, 2, 4, 8, 16)),
}
UNROLL = ("UNROLL", (1, 2, 4, 8))
LEGAL_BLOCKS = 7262  # (x, y) in 1..1024 with x * y <= 1024, the paper's space
# Small problem sizes for the CPU emulation (the sizes are guarded macros).
SMALL = {
    "conv2d": ["-DNI=37", "-DNJ=45"],
    "conv3d": ["-DN=13"],
    "syrk": ["-DN=37", "-DM=29"],
    "syr2k": ["-DN=37", "-DM=29"],
    "stencil2d": ["-DNX=37", "-DNY=45"],
    "convolution": ["-DIMAGE_WIDTH=37", "-DIMAGE_HEIGHT=45"],
}

FULL = os.environ.get("ANNOTUNE_FULL_EXAMPLES") == "1"
full_only = pytest.mark.skipif(
    not FULL,
    reason="slow: set ANNOTUNE_FULL_EXAMPLES=1 to run it (20 variants per example, make all nine)",
)
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
SM90 = (9, 0)
NVRTC_MISSING = nvrtc_unavailable(SM90)  # then the default run's variants compile with nvcc
needs_nvrtc_or_nvcc = pytest.mark.skipif(
    bool(NVRTC_MISSING) and shutil.which("nvcc") is None,
    reason=f"nvcc is not installed and {NVRTC_MISSING}",
)


def source(name: str) -> Path:
    return CUDA / name / f"{name}.cu"


@pytest.mark.parametrize("name", KERNELS)
def test_example_scans_to_the_documented_space(name):
    problem = read_problem(source(name))
    third, third_values = THIRD.get(name, UNROLL)
    assert [p.name for p in problem.params] == ["BLOCK_X", "BLOCK_Y", third]
    assert all(p.guarded for p in problem.params)
    assert problem.param("BLOCK_X").values == BLOCK_VALUES
    assert problem.param("BLOCK_Y").values == BLOCK_VALUES
    assert problem.param(third).values == third_values
    assert [c.expr for c in problem.constraints] == ["BLOCK_X * BLOCK_Y <= 1024"]
    launch_uses = [u for u in problem.param("BLOCK_X").uses if u.kind == "launch"]
    assert launch_uses, "the block shape must reach a kernel launch"
    space = problem_space(problem)
    assert space.cartesian_size == len(BLOCK_VALUES) ** 2 * len(third_values)
    assert space.count_legal() == LEGAL_BLOCKS * len(third_values)
    assert space.is_legal(space.default_row()[None, :]).all()


def _compile_sample(name: str, count: int, cache: Path, *, nvrtc: bool) -> None:
    """`count` sampled configurations of `name` compile, by NVRTC (kernel mode's cubins, with no
    fallback to nvcc) or by nvcc (the whole program), and fit their block in registers."""
    problem = read_problem(source(name))
    space = problem_space(problem)
    rng = np.random.default_rng(KERNELS.index(name))
    configs = space.to_dicts(space.sample(count, rng))
    with Builder(problem, cache_dir=cache, jobs=2, nvrtc_arch=SM90 if nvrtc else None) as builder:
        results = builder.build(configs)
    failed = [(r.params, r.error, r.fallback) for r in results if not r.ok or r.fallback]
    assert not failed
    for result in results:
        threads = result.params["BLOCK_X"] * result.params["BLOCK_Y"]
        assert result.resources, "ptxas reported no kernel"
        for kernel, used in result.resources.items():
            # Registers are handed out in steps of 8 per thread; 64 Ki per block at most.
            per_thread = -(-used.registers // 8) * 8
            assert per_thread * threads <= 65536, (kernel, result.params, used)


@needs_nvrtc_or_nvcc
@pytest.mark.parametrize("name", KERNELS)
def test_sampled_variants_compile(name, tmp_path):
    _compile_sample(name, 2, tmp_path, nvrtc=not NVRTC_MISSING)


@full_only
@needs_nvcc
@pytest.mark.parametrize("name", KERNELS)
def test_twenty_sampled_variants_compile(name, tmp_path):
    _compile_sample(name, 20, tmp_path, nvrtc=False)


def _make(name: str, tmp_path: Path) -> None:
    work = tmp_path / name
    shutil.copytree(CUDA / name, work, ignore=shutil.ignore_patterns("build", name))
    shutil.copytree(CUDA / "common", tmp_path / "common", dirs_exist_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [
            "make",
            f"ANNOTUNE={sys.executable} -m annotune",
            f"ANNOTUNE_INCLUDE={ANNOTUNE_INCLUDE_DIR}",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (work / name).is_file()
    header = (work / "build" / f"{name}.tuned.h").read_text()
    assert "#define BLOCK_X 32" in header
    # A second make asks annotune again but rebuilds nothing: the header did not change.
    again = subprocess.run(
        ["make", f"ANNOTUNE={sys.executable} -m annotune"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "nvcc" not in again.stdout


@pytest.mark.slow
@needs_nvcc
@needs_make
@pytest.mark.parametrize("name", ["gemm", "stencil2d"])
def test_makefile_builds_the_example(name, tmp_path):
    _make(name, tmp_path)


@full_only
@needs_nvcc
@needs_make
@pytest.mark.parametrize("name", [*KERNELS, "stencil2d"])
def test_makefile_builds_every_example(name, tmp_path):
    _make(name, tmp_path)


# -- the CPU emulation --------------------------------------------------------------------------

SHIM = r"""
#pragma once
#include <barrier>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
thread_local dim3 threadIdx, blockIdx;
static std::barrier<> *emu_barrier = nullptr;
#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline
template <class T> T __ldg(const T *p) { return *p; }
#define __shared__ static
inline void __syncthreads() { emu_barrier->arrive_and_wait(); }
enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidConfiguration = 9 };
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost };
typedef int cudaEvent_t;
static cudaError_t emu_last = cudaSuccess;
inline const char *cudaGetErrorString(cudaError_t e) { return e ? "invalid configuration" : ""; }
inline cudaError_t cudaGetLastError() {
  const cudaError_t e = emu_last;
  emu_last = cudaSuccess;
  return e;
}
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
template <class T> cudaError_t cudaMalloc(T **p, size_t n) {
  *p = static_cast<T *>(std::calloc(1, n));
  return cudaSuccess;
}
inline cudaError_t cudaFree(void *p) { std::free(p); return cudaSuccess; }
inline cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind) {
  std::memcpy(d, s, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemset(void *d, int v, size_t n) {
  std::memset(d, v, n);
  return cudaSuccess;
}
template <class T> cudaError_t cudaMemcpyToSymbol(T &symbol, const void *s, size_t n) {
  std::memcpy(&symbol, s, n);
  return cudaSuccess;
}
inline cudaError_t cudaEventCreate(cudaEvent_t *) { return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t, int = 0) { return cudaSuccess; }
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t, cudaEvent_t) {
  *ms = 0.0f;
  return cudaSuccess;
}
template <class F, class... A> void emu_launch(F kernel, dim3 grid, dim3 block, A... args) {
  const unsigned threads = block.x * block.y * block.z;
  if (threads == 0 || threads > 1024 || block.z > 64 || grid.y > 65535 || grid.z > 65535) {
    emu_last = cudaErrorInvalidConfiguration;
    return;
  }
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        std::barrier<> barrier(threads);
        emu_barrier = &barrier;
        std::vector<std::thread> team;
        for (unsigned tz = 0; tz < block.z; ++tz)
          for (unsigned ty = 0; ty < block.y; ++ty)
            for (unsigned tx = 0; tx < block.x; ++tx)
              team.emplace_back([=] {
                threadIdx = dim3(tx, ty, tz);
                blockIdx = dim3(bx, by, bz);
                kernel(args...);
              });
        for (std::thread &t : team) t.join();
      }
}
"""
_LAUNCH = re.compile(r"(\w+)<<<([^>]*)>>>\(")
_CHECK = re.compile(r"^annotune-check: (\S+)$", re.M)


EMULATION_FLAGS = ("-std=c++20", "-O1", "-pthread")


def _emulate(
    name: str, config: dict[str, int], workdir: Path, shim: Path
) -> subprocess.CompletedProcess:
    """Build `name` with `config` against the shim (g++) and run it at a small size."""
    stem = f"{name}-{'-'.join(map(str, config.values()))}"
    program = workdir / f"{stem}.cpp"
    program.write_text(_LAUNCH.sub(r"emu_launch(\1, \2, ", source(name).read_text()))
    binary = workdir / stem
    defines = SMALL.get(name, ["-DN=37"]) + [f"-D{k}={v}" for k, v in config.items()]
    subprocess.run(
        ["g++", *EMULATION_FLAGS, "-include", str(shim)]
        + [f"-I{ANNOTUNE_INCLUDE_DIR}", f"-I{CUDA / name}", *defines]
        + [str(program), "-o", str(binary)],
        check=True,
        capture_output=True,
        text=True,
    )
    return subprocess.run([str(binary)], capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def shim(tmp_path_factory) -> Path:
    """The emulation's header, precompiled once for the module's two dozen programs: the
    standard headers it includes were half of each one's compile. Where it does not compile, a
    g++ without C++20's <barrier> skips; any other reason fails."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    header = tmp_path_factory.mktemp("shim") / "emu_shim.h"
    header.write_text(SHIM)
    flags = ["g++", *EMULATION_FLAGS]
    done = subprocess.run(
        [*flags, "-x", "c++-header", str(header), "-o", f"{header}.gch"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        probe = header.with_name("probe.cpp")
        probe.write_text("#include <barrier>\nint main() { std::barrier<> b(1); }\n")
        lacks = subprocess.run([*flags, str(probe), "-o", str(probe.with_suffix(""))], check=False)
        if lacks.returncode != 0:
            pytest.skip("g++ lacks C++20 <barrier>")
        pytest.fail(f"the emulation's header does not compile:\n{done.stderr}")
    return header


@needs_gxx
@pytest.mark.parametrize("name", [*KERNELS, "stencil2d"])
def test_example_verifies_with_the_same_check_for_every_block(name, tmp_path, shim):
    third, third_values = THIRD.get(name, UNROLL)
    configs = [
        {"BLOCK_X": 32, "BLOCK_Y": 8, third: third_values[0]},  # the defaults' shape
        {"BLOCK_X": 12, "BLOCK_Y": 5, third: third_values[-1]},  # partial blocks everywhere
    ]
    if FULL:
        configs.append({"BLOCK_X": 1, "BLOCK_Y": 40, third: third_values[1]})
    _assert_same_check(name, configs, tmp_path, shim)


def _assert_same_check(name: str, configs: list[dict[str, int]], workdir: Path, shim: Path) -> None:
    """Every configuration of `name` runs, verifies and prints one and the same check value."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(lambda c: _emulate(name, c, workdir, shim), configs))
    checks = []
    for config, done in zip(configs, runs, strict=True):
        assert done.returncode == 0, (config, done.stderr)
        checks.append(_CHECK.findall(done.stdout))
    assert all(len(c) == 1 for c in checks)
    assert checks[1:] == checks[:-1], "the check value depends on the configuration"


@needs_gxx
@pytest.mark.parametrize("name", ["gemm", "mvt"])
def test_an_illegal_block_exits_non_zero(name, tmp_path, shim):
    third, third_values = THIRD.get(name, UNROLL)
    config = {"BLOCK_X": 64, "BLOCK_Y": 32, third: third_values[0]}
    done = _emulate(name, config, tmp_path, shim)
    assert done.returncode != 0
    assert "annotune-time-ms" not in done.stdout
    assert "invalid configuration" in done.stderr


# -- convolution: the space of the recorded runs ------------------------------------------------

CONVOLUTION_CONFIGS = [
    {"block_size_x": 16, "block_size_y": 16, "tile_size_x": 1, "tile_size_y": 1, "read_only": 0,
     "use_padding": 0, "use_shmem": 1},  # the defaults
    {"block_size_x": 48, "block_size_y": 2, "tile_size_x": 3, "tile_size_y": 2, "read_only": 1,
     "use_padding": 1, "use_shmem": 1},  # padded rows, partial tiles at the edges
    {"block_size_x": 32, "block_size_y": 4, "tile_size_x": 4, "tile_size_y": 3, "read_only": 1,
     "use_padding": 0, "use_shmem": 0},  # straight from global memory
]  # fmt: skip
FIXED = {"use_cmem": 1, "filter_height": 15, "filter_width": 15}


def test_convolution_declares_the_recorded_runs_space(replay_file):
    """The same names and values, and constraints that leave exactly the configurations the
    recorded runs measured (4,362 of 10,240), so that they can teach `predict`."""
    problem = read_problem(source("convolution"))
    space = problem_space(problem)
    assert space.cartesian_size == 10240 and space.count_legal() == 4362
    recorded = json.loads(gzip.decompress(replay_file("convolution_A100").read_bytes()))
    assert [p.name for p in problem.params] == recorded["tune_params_keys"]
    for param in problem.params:
        assert list(param.values) == recorded["tune_params"][param.name]
    names = recorded["tune_params_keys"]
    measured = {tuple(c[n] for n in names) for c in recorded["cache"].values()}
    legal = {tuple(c[n] for n in names) for c in space.to_dicts(space.legal_indices())}
    assert legal == measured


@needs_nvrtc_or_nvcc
def test_convolution_variants_compile(tmp_path):
    """Each of the three code paths' kernel compiles (NVRTC, as kernel mode compiles it: the
    paths differ in device code only; main is compiled with them by g++ in the emulation)."""
    problem = read_problem(source("convolution"))
    configs = [{**c, **FIXED} for c in CONVOLUTION_CONFIGS]
    nvrtc_arch = None if NVRTC_MISSING else SM90
    with Builder(problem, cache_dir=tmp_path, jobs=2, nvrtc_arch=nvrtc_arch) as builder:
        results = builder.build(configs)
    assert [(r.error, r.fallback) for r in results if not r.ok or r.fallback] == []
    assert all(r.resources for r in results)


@needs_gxx
def test_convolution_verifies_with_the_same_check_for_every_configuration(tmp_path, shim):
    configs = [{**c, **FIXED} for c in CONVOLUTION_CONFIGS]
    _assert_same_check("convolution", configs, tmp_path, shim)


# -- kernel mode: each example declares the launches its main performs ---------------------------

KERNEL_NAMES = {
    "2mm": ("matmul",),
    "3mm": ("matmul",),
    "conv2d": ("conv2d",),
    "conv3d": ("conv3d",),
    "convolution": ("convolution",),
    "gemm": ("gemm",),
    "gesummv": ("gesummv",),
    "mvt": ("mvt_rows", "mvt_columns"),
    "stencil2d": ("jacobi_step",),
    "syr2k": ("syr2k",),
    "syrk": ("syrk",),
}
# Sizes and scalars as each example's main uses them (its defaults).
N_MM, N_GEMM, N_VEC, N_CONV3D, N_STENCIL, N_CONV2D = 1024, 2048, 8192, 384, 4096, 8192
IMAGE, FILTER = 4096, 15
ALPHA, BETA = 1.5, 1.25


def _blocks(n: int, per_block: int) -> int:
    """Blocks of `per_block` that cover `n` items (the ceiling of n / per_block)."""
    return -(-n // per_block)


def _square(n: int, c: dict) -> tuple:
    """One thread per entry of an n x n output: blocks cover columns in x and rows in y."""
    return (_blocks(n, c["BLOCK_X"]), _blocks(n, c["BLOCK_Y"]), 1)


# What main launches for a configuration, worked out here from the examples' comments:
# (grid, block, dynamic shared bytes, ((kind, element count or scalar value), ...)).
MAIN_LAUNCHES: dict[tuple[str, str], Callable[[dict], tuple]] = {
    # 2mm's second launch, D = T * C + beta * D (the example's choice).
    ("2mm", "matmul"): lambda c: (
        _square(N_MM, c), (c["BLOCK_X"], c["BLOCK_Y"], 1), 0,
        (("in", N_MM**2), ("in", N_MM**2), ("inout", N_MM**2), ("scalar", 1.0),
         ("scalar", BETA)),
    ),
    ("3mm", "matmul"): lambda c: (
        _square(N_MM, c), (c["BLOCK_X"], c["BLOCK_Y"], 1), 0,
        (("in", N_MM**2), ("in", N_MM**2), ("out", N_MM**2)),
    ),
    ("conv2d", "conv2d"): lambda c: (
        (_blocks(N_CONV2D, c["BLOCK_X"]),
         _blocks(N_CONV2D, c["BLOCK_Y"] * c["ROWS_PER_THREAD"]), 1),
        (c["BLOCK_X"], c["BLOCK_Y"], 1), 0, (("in", N_CONV2D**2), ("out", N_CONV2D**2)),
    ),
    ("conv3d", "conv3d"): lambda c: (
        (_blocks(N_CONV3D, c["BLOCK_X"]), _blocks(N_CONV3D, c["BLOCK_Y"]),
         _blocks(N_CONV3D, c["PLANES_PER_THREAD"])),
        (c["BLOCK_X"], c["BLOCK_Y"], 1), 0, (("in", N_CONV3D**3), ("out", N_CONV3D**3)),
    ),
    ("convolution", "convolution"): lambda c: (
        (_blocks(IMAGE, c["block_size_x"] * c["tile_size_x"]),
         _blocks(IMAGE, c["block_size_y"] * c["tile_size_y"]), 1),
        (c["block_size_x"], c["block_size_y"], 1), 0,
        (("out", IMAGE**2), ("in", (IMAGE + FILTER - 1) ** 2), ("in", FILTER**2)),
    ),
    ("gemm", "gemm"): lambda c: (
        _square(N_GEMM, c), (c["BLOCK_X"], c["BLOCK_Y"], 1), 0,
        (("in", N_GEMM**2), ("in", N_GEMM**2), ("inout", N_GEMM**2), ("scalar", ALPHA),
         ("scalar", BETA)),
    ),
    # A block computes BLOCK_Y rows (gesummv, mvt_rows) or BLOCK_X columns (mvt_columns).
    ("gesummv", "gesummv"): lambda c: (
        (_blocks(N_VEC, c["BLOCK_Y"]), 1, 1), (c["BLOCK_X"], c["BLOCK_Y"], 1), 0,
        (("in", N_VEC**2), ("in", N_VEC**2), ("in", N_VEC), ("out", N_VEC), ("scalar", ALPHA),
         ("scalar", BETA)),
    ),
    ("mvt", "mvt_rows"): lambda c: (
        (_blocks(N_VEC, c["BLOCK_Y"]), 1, 1), (c["BLOCK_X"], c["BLOCK_Y"], 1), 0,
        (("in", N_VEC**2), ("in", N_VEC), ("inout", N_VEC)),
    ),
    ("mvt", "mvt_columns"): lambda c: (
        (_blocks(N_VEC, c["BLOCK_X"]), 1, 1), (c["BLOCK_X"], c["BLOCK_Y"], 1), 0,
        (("in", N_VEC**2), ("in", N_VEC), ("inout", N_VEC)),
    ),
    ("stencil2d", "jacobi_step"): lambda c: (
        (_blocks(N_STENCIL, c["BLOCK_X"]),
         _blocks(N_STENCIL, c["BLOCK_Y"] * c["ROWS_PER_THREAD"]), 1),
        (c["BLOCK_X"], c["BLOCK_Y"], 1), 0, (("in", N_STENCIL**2), ("out", N_STENCIL**2)),
    ),
    ("syr2k", "syr2k"): lambda c: (
        _square(N_MM, c), (c["BLOCK_X"], c["BLOCK_Y"], 1), 0,
        (("in", N_MM**2), ("in", N_MM**2), ("inout", N_MM**2), ("scalar", ALPHA),
         ("scalar", BETA)),
    ),
    ("syrk", "syrk"): lambda c: (
        _square(N_MM, c), (c["BLOCK_X"], c["BLOCK_Y"], 1), 0,
        (("in", N_MM**2), ("inout", N_MM**2), ("scalar", ALPHA), ("scalar", BETA)),
    ),
}  # fmt: skip


def _some_configurations(problem) -> list[dict]:
    """The default, the block shapes at both ends of the space (where legal), and a sample."""
    space = problem_space(problem)
    rows = [space.default_row()]
    names = [p.name for p in problem.params]
    if names[:2] == ["BLOCK_X", "BLOCK_Y"]:
        for shape in ((1, 1024), (1024, 1), (12, 5)):
            pairs = list(zip(names[:2], shape, strict=True))
            if not all(v in problem.param(n).values for n, v in pairs):
                continue  # stencil2d's blocks are powers of two
            row = space.default_row().copy()
            row[:2] = [problem.param(n).values.index(v) for n, v in pairs]
            row[2] = len(problem.params[2].values) - 1 if shape[0] == 1 else 0
            if space.is_legal(row[None, :]).all():
                rows.append(row)
    rng = np.random.default_rng(21)
    return space.to_dicts(np.vstack([*rows, space.sample(4, rng)]))


@pytest.mark.parametrize("name", sorted(KERNEL_NAMES))
def test_kernel_pragmas_launch_what_main_launches(name):
    problem = read_problem(source(name))
    assert tuple(k.name for k in problem.kernels) == KERNEL_NAMES[name]
    configs = _some_configurations(problem)
    assert len(configs) >= 5
    for spec in problem.kernels:
        for config in configs:
            launch = spec.launch(config)
            got = (
                launch.grid,
                launch.block,
                launch.shared,
                tuple((a.kind, a.count if a.is_pointer else a.value) for a in launch.args),
            )
            assert got == MAIN_LAUNCHES[name, spec.name](config), (spec.name, config)
            assert {a.dtype for a in launch.args} == {"float32"}


def _elf_sections(elf: bytes) -> list[tuple[str, int, int, int, int, int]]:
    """The sections of a little-endian ELF64 file (a cubin), in order: (name, type, offset,
    size, link, entry size). Read here, so that no test needs the CUDA toolkit's binary tools."""
    assert elf[:6] == b"\x7fELF\x02\x01", "not a little-endian ELF64 file"
    (table_at,) = struct.unpack_from("<Q", elf, 0x28)
    entry_size, count, names_index = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [
        struct.unpack_from("<IIQQQQIIQQ", elf, table_at + i * entry_size) for i in range(count)
    ]
    names_at = headers[names_index][4]
    return [
        (_c_string(elf, names_at + name), kind, offset, size, link, entries)
        for name, kind, _, _, offset, size, link, _, _, entries in headers
    ]


def _c_string(data: bytes, start: int) -> str:
    return data[start : data.index(b"\0", start)].decode()


def _function_symbols(elf: bytes) -> set[str]:
    """What `cuobjdump -symbols` lists as STT_FUNC: the kernels' names."""
    sections = _elf_sections(elf)
    names = set()
    for _, kind, offset, size, link, entries in sections:
        if kind != 2:  # SHT_SYMTAB
            continue
        strings = sections[link][2]
        for at in range(offset, offset + size, entries):
            name, info = struct.unpack_from("<IB", elf, at)
            if info & 0xF == 2:  # STT_FUNC
                names.add(_c_string(elf, strings + name))
    return names


# The constant memory kernel mode must find initialized (it launches without main): the first
# weights, as each example's main computes them for its reference.
CONSTANT_WEIGHTS = {
    "conv3d": [((t * 5) % 9 - 4) * 0.125 for t in range(27)],
    "convolution": [(((e * 40503) % 17) - 8) / 64 for e in range(15 * 15)],
}


@needs_nvcc
@pytest.mark.parametrize("name", sorted(KERNEL_NAMES))
def test_each_declared_kernel_is_a_symbol_of_the_cubin(name, tmp_path):
    """The mangled names kernel mode loads are those nvcc gives the kernels (one compile), and
    constant memory holds its weights without main's help."""
    cubin = tmp_path / f"{name}.cubin"
    subprocess.run(
        ["nvcc", "-cubin", "-arch=sm_90", f"-I{ANNOTUNE_INCLUDE_DIR}", str(source(name))]
        + ["-o", str(cubin)],
        check=True,
        capture_output=True,
    )
    elf = cubin.read_bytes()
    symbols = _function_symbols(elf)
    for spec in read_problem(source(name)).kernels:
        assert spec.mangled_name in symbols, (spec.mangled_name, sorted(symbols))
    if name in CONSTANT_WEIGHTS:
        (offset, size) = {s[0]: s[2:4] for s in _elf_sections(elf)}[".nv.constant3"]
        constants = np.frombuffer(elf, np.float32, size // 4, offset)
        assert constants.tolist() == CONSTANT_WEIGHTS[name]


# -- kernel mode: reductions whose order the block shape changes ---------------------------------

PROGRAM_RTOL = RunSpec.check_tolerance  # program mode's default
ATOL = 1e-8  # the kernel runner's


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """float32 a * b + c rounded once, as the GPU's fused multiply-add (the float64 product of
    two floats is exact; the float64 sum may round first, which is rare and one ulp)."""
    return (a.astype(np.float64) * b + c).astype(np.float32)


def _lane_sums(matrix: np.ndarray, vector: np.ndarray, lanes: int) -> np.ndarray:
    """Each row of matrix @ vector added as the example's kernel adds it with `lanes` threads:
    lane l adds the terms l, l + lanes, ... in turn, then the lanes meet in the kernel's tree
    (stride pow2_ceil(lanes) / 2, halving; lane l adds lane l + s while l + s < lanes)."""
    rows, n = matrix.shape
    parts = np.zeros((rows, lanes), np.float32)
    for start in range(0, n, lanes):
        width = min(lanes, n - start)
        parts[:, :width] = _fma(matrix[:, start : start + width], vector[start : start + width],
                                parts[:, :width])  # fmt: skip
    stride = (1 << (lanes - 1).bit_length()) // 2
    while stride:
        low = np.arange(min(stride, lanes - stride))
        parts[:, low] += parts[:, low + stride]
        stride //= 2
    return parts[:, 0]


def _kernel_inputs(name: str, kernel: str) -> tuple[list[np.ndarray], dict]:
    """The float arrays kernel mode uploads for the kernel's `in` and `inout` arguments, made as
    `KernelRunner.input_array` makes them under seed 0, and the default configuration."""
    problem = read_problem(source(name))
    space = problem_space(problem)
    default = space.to_dicts(space.default_row()[None, :])[0]
    spec = next(k for k in problem.kernels if k.name == kernel)
    args = spec.launch(default).args
    assert {a.dtype for a in args} == {"float32"}
    inputs = [
        np.random.default_rng([0, index]).random(arg.count).astype(np.float32)
        for index, arg in enumerate(args)
        if arg.kind in ("in", "inout")
    ]
    return inputs, default


def _gesummv(inputs: list[np.ndarray], lanes: int) -> np.ndarray:
    a, b, x = (array.reshape(N_VEC, -1) if array.size > N_VEC else array for array in inputs[:3])
    alpha, beta = np.float32(ALPHA), np.float32(BETA)
    sum_a, sum_b = _lane_sums(a, x, lanes), _lane_sums(b, x, lanes)
    return _fma(np.full(N_VEC, alpha), sum_a, beta * sum_b)


def _mvt_rows(inputs: list[np.ndarray], lanes: int) -> np.ndarray:
    a, y1, x1 = inputs
    return x1 + _lane_sums(a.reshape(N_VEC, N_VEC), y1, lanes)


def _mvt_columns(inputs: list[np.ndarray], lanes: int) -> np.ndarray:
    a, y2, x2 = inputs
    return x2 + _lane_sums(a.reshape(N_VEC, N_VEC).T, y2, lanes)


REDUCTIONS = {  # kernel: (example, its output as a function of the lanes, the lanes' parameter)
    "gesummv": ("gesummv", _gesummv, "BLOCK_X"),
    "mvt_rows": ("mvt", _mvt_rows, "BLOCK_X"),
    "mvt_columns": ("mvt", _mvt_columns, "BLOCK_Y"),
}


@pytest.mark.slow
@pytest.mark.parametrize("kernel", sorted(REDUCTIONS))
def test_a_reduction_order_needs_kernel_modes_tolerance(kernel):
    """One lane (every term added in turn) against the default's lanes and tree, on the inputs
    kernel mode makes: correct outputs that program mode's tolerance would reject and kernel
    mode's accepts. The other examples sum each output in one order for every configuration."""
    name, output, lanes = REDUCTIONS[kernel]
    inputs, default = _kernel_inputs(name, kernel)
    reference = output(inputs, default[lanes])
    one_lane = output(inputs, 1)
    assert one_lane.dtype == reference.dtype == np.float32
    assert not np.allclose(one_lane, reference, rtol=PROGRAM_RTOL, atol=ATOL)
    assert np.allclose(one_lane, reference, rtol=KERNEL_CHECK_RTOL, atol=ATOL)
    relative = np.abs(one_lane.astype(np.float64) - reference) / np.abs(reference)
    assert relative.max() < KERNEL_CHECK_RTOL / 2, relative.max()  # with room to spare


# -- kernel mode on a GPU ------------------------------------------------------------------------

# The worst summation order as the baseline, so that every configuration is checked against it.
GPU_REFERENCE = {
    "gesummv": {"BLOCK_X": 1},
    "mvt_rows": {"BLOCK_X": 1},
    "mvt_columns": {"BLOCK_Y": 1},
}


@pytest.fixture(scope="module")
def kernel_gpu() -> str:
    name = gpu_name()
    if name is None or shutil.which("nvcc") is None:
        pytest.skip("needs an NVIDIA GPU (nvidia-smi) and nvcc")
    try:
        with select_backend():
            pass
    except AnnotuneError as error:
        pytest.skip(error.message)
    return name


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("name", "kernel"), [(n, k) for n in sorted(KERNEL_NAMES) for k in KERNEL_NAMES[n]]
)
def test_kernel_mode_tunes_the_example_with_no_wrong_output(name, kernel, kernel_gpu, tmp_path):
    shutil.copytree(CUDA / name, tmp_path / name, ignore=shutil.ignore_patterns("tuned"))
    shutil.copytree(CUDA / "common", tmp_path / "common")
    problem = read_problem(tmp_path / name / f"{name}.cu")
    space = problem_space(problem)
    reference = None
    if kernel in GPU_REFERENCE:
        reference = {**space.to_dicts(space.default_row()[None, :])[0], **GPU_REFERENCE[kernel]}
    options = TuneOptions(
        strategy="random",
        budget=6,
        mode="kernel",
        kernel=kernel,
        transfer=False,
        recheck=0,
        drift_every=0,
        reference=reference,
        run=RunSpec(
            warmup=1,
            repeats=3,
            max_repeats=3,
            check_tolerance=KERNEL_CHECK_RTOL,
        ),
    )
    report = tune(problem, options)
    assert report.device == kernel_gpu
    assert not report.baseline_failed
    assert [f for f in report.failures if f.status == "wrong_output"] == []
    assert report.invalid == 0, report.failures
    assert report.evaluations >= 3  # the baseline and configurations compared with it
