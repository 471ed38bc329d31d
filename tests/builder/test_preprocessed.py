"""Configurations whose preprocessed sources are the same are the same program: the builder
says so with equal `program` hashes, and only then."""

from __future__ import annotations

import shutil

import pytest

from annotune.annotate import read_problem
from annotune.builder import Builder, CompilerCommand

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

TILED = """\
#include <stdio.h>
#define TILING 0 // @tune values(0, 1)
#define TILE 8 // @tune values(8, 16, 32)
#define UNROLL 1 // @tune values(1, 2)
#if TILING
static const int tile = TILE;
#else
static const int tile = 1;
#endif
int main(void) { printf("%d %d %s\\n", tile, UNROLL, __FILE__); return 0; }
"""


def programs(tmp_path, source: str, name: str, compiler: str, configs: list[dict]) -> list[str]:
    (tmp_path / name).write_text(source)
    problem = read_problem(tmp_path / name)
    builder = Builder(problem, compiler=CompilerCommand.parse(compiler), cache_dir=tmp_path / "c")
    builds = builder.build(configs)
    assert all(b.ok for b in builds), [b.error for b in builds]
    return [b.program for b in builds]


@needs_gcc
def test_a_value_in_an_inactive_branch_changes_nothing_and_an_active_one_does(tmp_path):
    """TILE is read only when TILING is on; the unguarded #defines make every variant a
    rewritten copy, whose own path (in `__FILE__`) must not tell the copies apart."""
    configs = [
        {"TILING": 0, "TILE": 8, "UNROLL": 1},
        {"TILING": 0, "TILE": 32, "UNROLL": 1},
        {"TILING": 1, "TILE": 8, "UNROLL": 1},
        {"TILING": 1, "TILE": 32, "UNROLL": 1},
        {"TILING": 0, "TILE": 8, "UNROLL": 2},
    ]
    hashes = programs(tmp_path, TILED, "t.c", "gcc {source} -o {output}", configs)
    assert all(hashes)
    assert hashes[0] == hashes[1]
    assert len({hashes[0], *hashes[2:]}) == 4


@needs_gcc
def test_the_hash_is_kept_with_the_cached_build(tmp_path):
    configs = [{"TILING": 0, "TILE": 8, "UNROLL": 1}, {"TILING": 0, "TILE": 16, "UNROLL": 1}]
    first = programs(tmp_path, TILED, "t.c", "gcc {source} -o {output}", configs)
    again = programs(tmp_path, TILED, "t.c", "gcc {source} -o {output}", configs)
    assert first == again and first[0] == first[1]


@needs_nvcc
def test_cuda_host_and_device_code_both_count(tmp_path):
    """H matters only in host code, D only in device code (`__CUDA_ARCH__`), N nowhere."""
    source = """\
#ifndef H
#define H 1 // @tune values(1, 2)
#endif
#ifndef D
#define D 1 // @tune values(1, 2)
#endif
#ifndef N
#define N 1 // @tune values(1, 2)
#endif
__global__ void k(int *x) {
#ifdef __CUDA_ARCH__
  x[0] = D;
#else
  x[0] = H;
#endif
}
int main() { return 0; }
"""
    configs = [
        {"H": 1, "D": 1, "N": 1},
        {"H": 1, "D": 1, "N": 2},
        {"H": 2, "D": 1, "N": 1},
        {"H": 1, "D": 2, "N": 1},
    ]
    hashes = programs(
        tmp_path, source, "k.cu", "nvcc -arch=sm_80 -cubin {source} -o {output}", configs
    )
    assert hashes[0] == hashes[1]
    assert len({hashes[0], hashes[2], hashes[3]}) == 3


@needs_gcc
def test_a_value_used_only_in_another_file_of_the_command_counts(tmp_path):
    """PAD is read only by lib.c, which the compile command names beside annotune's source:
    the same -D reaches it, so PAD's values are different programs."""
    (tmp_path / "lib.c").write_text(
        "#ifndef PAD\n#define PAD 0\n#endif\nint pad(void) { return PAD; }\n"
    )
    source = (
        "int pad(void);\n"
        "#ifndef PAD\n#define PAD 0 // @tune values(0, 1)\n#endif\n"
        "int main(void) { return pad(); }\n"
    )
    compiler = f"gcc {{source}} {tmp_path / 'lib.c'} -o {{output}}"
    hashes = programs(tmp_path, source, "main.c", compiler, [{"PAD": 0}, {"PAD": 1}])
    assert hashes[0] != hashes[1]


@needs_nvcc
def test_a_value_used_only_for_a_later_architecture_counts(tmp_path):
    source = """\
#ifndef V
#define V 1 // @tune values(1, 2)
#endif
__global__ void k(int *x) {
#if __CUDA_ARCH__ >= 900
  x[0] = V;
#endif
}
int main() { return 0; }
"""
    compiler = (
        "nvcc -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -c "
        "{source} -o {output}"
    )
    hashes = programs(tmp_path, source, "k.cu", compiler, [{"V": 1}, {"V": 2}])
    assert hashes[0] != hashes[1]
