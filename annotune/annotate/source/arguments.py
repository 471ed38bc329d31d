"""libclang's arguments: the language of a file, the shim of CUDA's keywords, the macros a
compiler predefines and the guards of the runtime headers nvcc includes first, as flags.

libclang parses with `-nostdinc` and a small shim for the CUDA keywords, so that no CUDA toolkit
or system header is needed; missing system headers are expected and ignored. The macros the
compiler predefines that decide CUDA code's `#if` branches (`compiler_macros`) are defined."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from annotune.core.command import is_nvcc

SHIM_PATH = "/__annotune__/cuda_shim.h"
ANNOTUNE_INCLUDE_DIR = Path(__file__).resolve().parents[2] / "include"
"""annotune's own headers (annotune_timing.h): on every include path, never the user's files."""
TIMING_HEADER = "annotune_timing.h"

# Just enough of CUDA for libclang to build an AST of a .cu file without the toolkit.
CUDA_SHIM = """
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __managed__ __attribute__((managed))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define __forceinline__ inline
#define __restrict__ __restrict
struct dim3 {
  unsigned x, y, z;
  dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};
struct uint3 { unsigned x, y, z; };
extern const uint3 threadIdx, blockIdx;
extern const dim3 blockDim, gridDim;
extern const int warpSize;
typedef struct CUstream_st *cudaStream_t;
extern "C" unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block,
                                                 unsigned long shared = 0, void *stream = 0);
"""

LANGUAGES = {
    ".cu": "cuda",
    ".cuh": "cuda",
    ".c": "c",
    ".h": "c++",
    ".hpp": "c++",
    ".hh": "c++",
    ".cc": "c++",
    ".cpp": "c++",
    ".cxx": "c++",
}


def language_of(path: Path) -> str:
    return LANGUAGES.get(path.suffix.lower(), "c++")


def compiler_macros(language: str, compiler: str | None) -> list[str]:
    """The macros a compiler predefines that CUDA code tests and libclang leaves undefined:
    `__CUDACC__` where CUDA is compiled (by nvcc, NVRTC or clang), `__NVCC__` wherever nvcc
    compiles, a .cpp too. `compiler`: the compile command's file name or preset; None, the
    default one: nvcc for CUDA."""
    cuda = ["__CUDACC__"] if language == "cuda" else []
    nvcc = is_nvcc(compiler) if compiler is not None else language == "cuda"
    return cuda + (["__NVCC__"] if nvcc else [])


RUNTIME_GUARDS = (
    *("__COMMON_FUNCTIONS_H__", "__CUDA_RUNTIME_API_H__", "__CUDA_RUNTIME_H__"),
    *("__DEVICE_ATOMIC_FUNCTIONS_H__", "__DEVICE_DOUBLE_FUNCTIONS_H__"),
    *("__DEVICE_FUNCTIONS_H__", "__DEVICE_LAUNCH_PARAMETERS_H__", "__DEVICE_TYPES_H__"),
    *("__DRIVER_TYPES_H__", "__HOST_CONFIG_H__", "__HOST_DEFINES_H__"),
    *("__LIBRARY_TYPES_H__", "__MATH_FUNCTIONS_H__", "__SURFACE_TYPES_H__"),
    *("__SURFACE_INDIRECT_FUNCTIONS_H__", "__TEXTURE_TYPES_H__"),
    *("__TEXTURE_INDIRECT_FUNCTIONS_H__", "__VECTOR_FUNCTIONS_H__", "__VECTOR_TYPES_H__"),
)
"""The include guards of the runtime headers nvcc and NVRTC include before a CUDA file's first
line (`cuda_runtime.h` and what it includes), defined empty for libclang's parse as they are
there: a `#ifdef __DRIVER_TYPES_H__` branch of the user's (cuda-samples' `helper_cuda.h`: host
helpers) is taken as the compiler takes it. Probed through NVRTC 13 itself (`#ifdef G` after an
empty program), leaving out its `__SM_*_H__` ones, which no corpus program tests. A guard only a
header the user includes defines (`__CUDA_FP16_H__`) is not: a test of it after that `#include`
still takes another branch here than under the compiler."""


def clang_args(
    language: str,
    include_dirs: list[str],
    defines: list[str],
    flags: Sequence[tuple[str, str]] = (),
) -> list[str]:
    """libclang's arguments; `flags` are the compile command's other search directories and
    forced includes, (option, path): `-iquote`, `-isystem`, `-idirafter`, `-include`,
    `-imacros`."""
    if language == "cuda":
        args = ["-x", "cuda", "--cuda-host-only", "-nocudainc", "-nocudalib", "-std=c++17"]
        args += ["-include", SHIM_PATH, *(f"-D{guard}=" for guard in RUNTIME_GUARDS)]
    elif language == "c":
        args = ["-x", "c", "-std=c11"]
    else:
        args = ["-x", "c++", "-std=c++17"]
    args += ["-nostdinc", "-fopenacc", "-fopenmp", "-Wno-everything"]
    args += [f"-I{d}" for d in include_dirs] + [f"-I{ANNOTUNE_INCLUDE_DIR}"]
    args += [arg for option, path in flags for arg in (option, path)]
    args += [f"-D{d}" for d in defines]
    return args
