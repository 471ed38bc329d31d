"""The CUDA examples of the IterML paper's Table 1 (examples/cuda/<name>/).

Each one scans to the space its comments promise, sampled configurations compile with nvcc (and
fit a 1024-thread block in registers), its Makefile builds it, and its program, run on a small
CPU emulation of CUDA (blocks in turn, a block's threads as std::threads), verifies its result
and prints the same check value for every configuration.

The default run compiles 2 sampled configurations per example and makes two examples. With
ANNOTUNE_FULL_EXAMPLES=1 it compiles 20 per example (180 nvcc runs, several minutes) and makes
all ten.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from annotune.annotate import problem_space, read_problem
from annotune.annotate.frontend import ANNOTUNE_INCLUDE_DIR
from annotune.builder import Builder

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
REPLAY = ROOT.parent / "shared" / "data" / "replay"

FULL = os.environ.get("ANNOTUNE_FULL_EXAMPLES") == "1"
full_only = pytest.mark.skipif(
    not FULL,
    reason="slow: set ANNOTUNE_FULL_EXAMPLES=1 to run it (20 variants per example, make all nine)",
)
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


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


def _compile_sample(name: str, count: int, cache: Path) -> None:
    problem = read_problem(source(name))
    space = problem_space(problem)
    rng = np.random.default_rng(KERNELS.index(name))
    configs = space.to_dicts(space.sample(count, rng))
    results = Builder(problem, cache_dir=cache, jobs=2).build(configs)
    failed = [(r.params, r.error) for r in results if not r.ok]
    assert not failed
    for result in results:
        threads = result.params["BLOCK_X"] * result.params["BLOCK_Y"]
        assert result.resources, "ptxas reported no kernel"
        for kernel, used in result.resources.items():
            # Registers are handed out in steps of 8 per thread; 64 Ki per block at most.
            per_thread = -(-used.registers // 8) * 8
            assert per_thread * threads <= 65536, (kernel, result.params, used)


@needs_nvcc
@pytest.mark.parametrize("name", KERNELS)
def test_sampled_variants_compile(name, tmp_path):
    _compile_sample(name, 2, tmp_path)


@full_only
@needs_nvcc
@pytest.mark.parametrize("name", KERNELS)
def test_twenty_sampled_variants_compile(name, tmp_path):
    _compile_sample(name, 20, tmp_path)


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


def _emulate(name: str, config: dict[str, int], workdir: Path) -> subprocess.CompletedProcess:
    """Build `name` with `config` against the shim (g++) and run it at a small size."""
    stem = f"{name}-{'-'.join(map(str, config.values()))}"
    shim = workdir / f"{stem}_shim.h"
    shim.write_text(SHIM)
    program = workdir / f"{stem}.cpp"
    program.write_text(_LAUNCH.sub(r"emu_launch(\1, \2, ", source(name).read_text()))
    binary = workdir / stem
    defines = SMALL.get(name, ["-DN=37"]) + [f"-D{k}={v}" for k, v in config.items()]
    subprocess.run(
        ["g++", "-std=c++20", "-O1", "-pthread", "-include", str(shim)]
        + [f"-I{ANNOTUNE_INCLUDE_DIR}", f"-I{CUDA / name}", *defines]
        + [str(program), "-o", str(binary)],
        check=True,
        capture_output=True,
        text=True,
    )
    return subprocess.run([str(binary)], capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def emulation_works(tmp_path_factory):
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    probe = tmp_path_factory.mktemp("probe") / "probe.cpp"
    probe.write_text("#include <barrier>\nint main() { std::barrier<> b(1); }\n")
    done = subprocess.run(
        ["g++", "-std=c++20", "-pthread", str(probe), "-o", str(probe.with_suffix(""))],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip("g++ lacks C++20 <barrier>")


@needs_gxx
@pytest.mark.parametrize("name", [*KERNELS, "stencil2d"])
def test_example_verifies_with_the_same_check_for_every_block(name, tmp_path, emulation_works):
    third, third_values = THIRD.get(name, UNROLL)
    configs = [
        {"BLOCK_X": 32, "BLOCK_Y": 8, third: third_values[0]},  # the defaults' shape
        {"BLOCK_X": 12, "BLOCK_Y": 5, third: third_values[-1]},  # partial blocks everywhere
    ]
    if FULL:
        configs.append({"BLOCK_X": 1, "BLOCK_Y": 40, third: third_values[1]})
    _assert_same_check(name, configs, tmp_path)


def _assert_same_check(name: str, configs: list[dict[str, int]], workdir: Path) -> None:
    """Every configuration of `name` runs, verifies and prints one and the same check value."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(lambda c: _emulate(name, c, workdir), configs))
    checks = []
    for config, done in zip(configs, runs, strict=True):
        assert done.returncode == 0, (config, done.stderr)
        checks.append(_CHECK.findall(done.stdout))
    assert all(len(c) == 1 for c in checks)
    assert checks[1:] == checks[:-1], "the check value depends on the configuration"


@needs_gxx
@pytest.mark.parametrize("name", ["gemm", "mvt"])
def test_an_illegal_block_exits_non_zero(name, tmp_path, emulation_works):
    third, third_values = THIRD.get(name, UNROLL)
    done = _emulate(name, {"BLOCK_X": 64, "BLOCK_Y": 32, third: third_values[0]}, tmp_path)
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


def test_convolution_declares_the_recorded_runs_space():
    """The same names and values, and constraints that leave exactly the configurations the
    recorded runs measured (4,362 of 10,240), so that they can teach `predict`."""
    problem = read_problem(source("convolution"))
    space = problem_space(problem)
    assert space.cartesian_size == 10240 and space.count_legal() == 4362
    if not REPLAY.is_dir():
        pytest.skip("shared replay data not present")
    recorded = json.loads(gzip.decompress((REPLAY / "convolution_A100.json.gz").read_bytes()))
    assert [p.name for p in problem.params] == recorded["tune_params_keys"]
    for param in problem.params:
        assert list(param.values) == recorded["tune_params"][param.name]
    names = recorded["tune_params_keys"]
    measured = {tuple(c[n] for n in names) for c in recorded["cache"].values()}
    legal = {tuple(c[n] for n in names) for c in space.to_dicts(space.legal_indices())}
    assert legal == measured


@needs_nvcc
def test_convolution_variants_compile(tmp_path):
    problem = read_problem(source("convolution"))
    configs = [{**c, **FIXED} for c in CONVOLUTION_CONFIGS]
    results = Builder(problem, cache_dir=tmp_path, jobs=2).build(configs)
    assert [r.error for r in results if not r.ok] == []
    assert all(r.resources for r in results)


@needs_gxx
def test_convolution_verifies_with_the_same_check_for_every_configuration(
    tmp_path, emulation_works
):
    _assert_same_check("convolution", [{**c, **FIXED} for c in CONVOLUTION_CONFIGS], tmp_path)
