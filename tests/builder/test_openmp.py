"""Compiler flags follow the source's directive families: OpenMP gets -fopenmp (or -mp), OpenACC
-fopenacc (or -acc), so that a tuned OpenMP program runs on its threads."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.builder import Builder, CompilerCommand, default_compiler
from annotune.builder import compiler as compiler_module
from annotune.builder.compiler import PRESETS, preset_argv

THREADS = """\
#include <omp.h>
#include <stdio.h>
#ifndef CHUNK
#define CHUNK 4 // @tune values(4, 8)
#endif
int main(void) {
  int threads = 0;
#pragma omp parallel
  {
#pragma omp single
    threads = omp_get_num_threads();
  }
  printf("threads=%d max=%d chunk=%d\\n", threads, omp_get_max_threads(), CHUNK);
  return 0;
}
"""


@pytest.mark.parametrize(
    ("name", "pragmas", "flags"),
    [
        ("gcc", {"omp"}, ["-fopenmp"]),
        ("gcc", {"acc"}, ["-fopenacc"]),
        ("g++", {"omp", "acc"}, ["-fopenacc", "-fopenmp"]),
        ("gcc", set(), []),
        ("nvc", {"omp"}, ["-mp"]),
        ("nvc++", {"acc", "omp"}, ["-acc", "-mp"]),
        ("nvcc", {"omp"}, ["-Xcompiler", "-fopenmp"]),
        ("nvcc", {"acc"}, []),
        ("cc", {"omp"}, ["-fopenmp"]),
    ],
)
def test_each_family_gets_its_flag(name, pragmas, flags):
    argv = preset_argv(name, pragmas)
    assert list(argv[2 : 2 + len(flags)]) == flags
    assert argv[:2] + argv[2 + len(flags) :] == PRESETS[name]


@pytest.mark.parametrize(
    ("installed", "language", "pragmas", "expected"),
    [
        ({"gcc"}, "c", {"omp"}, ("gcc", "-O2", "-fopenmp")),
        ({"gcc", "g++"}, "c++", {"acc"}, ("g++", "-O2", "-fopenacc")),
        ({"nvc", "gcc"}, "c", {"omp"}, ("nvc", "-O2", "-mp")),
        ({"nvc++"}, "c++", {"acc"}, ("nvc++", "-O2", "-acc")),
        (set(), "cuda", {"omp"}, ("nvcc", "-O3", "-Xcompiler", "-fopenmp")),
    ],
)
def test_the_default_compiler_for_each_family(monkeypatch, installed, language, pragmas, expected):
    monkeypatch.setattr(
        compiler_module.shutil, "which", lambda name: f"/bin/{name}" if name in installed else None
    )
    command = default_compiler(language, frozenset(pragmas))
    assert command.argv[: len(expected)] == expected


def test_a_named_preset_follows_the_source_a_written_command_does_not(tmp_path):
    source = tmp_path / "t.c"
    source.write_text(THREADS)
    problem = read_problem(source)
    assert problem.pragmas == {"omp"}
    named = Builder(problem, compiler=CompilerCommand.parse("gcc"), cache_dir=tmp_path / "c")
    assert "-fopenmp" in named.compiler.argv and "-fopenacc" not in named.compiler.argv
    written = CompilerCommand.parse("gcc -O1 {source} -o {output}")
    assert Builder(problem, compiler=written, cache_dir=tmp_path / "c").compiler == written


def _threads(executable: Path) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    done = subprocess.run([str(executable)], capture_output=True, text=True, env=env, check=True)
    return done.stdout.strip()


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_an_openmp_program_built_by_default_runs_on_its_threads(tmp_path):
    source = tmp_path / "threads.c"
    source.write_text(THREADS)
    (build,) = Builder(read_problem(source), cache_dir=tmp_path / "c").build([{"CHUNK": 8}])
    assert build.ok, build.error
    assert _threads(build.executable) == "threads=2 max=2 chunk=8"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_nvcc_passes_openmp_to_the_host_compiler(tmp_path):
    """Host code only, so it runs without a GPU."""
    source = tmp_path / "threads.cu"
    source.write_text(THREADS)
    (build,) = Builder(read_problem(source), cache_dir=tmp_path / "c").build([{"CHUNK": 4}])
    assert build.ok, build.error
    assert _threads(build.executable) == "threads=2 max=2 chunk=4"
