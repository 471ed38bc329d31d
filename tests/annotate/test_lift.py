"""`annotune lift`: each rewrite, idempotence, unchanged parameters, and compilers that obey it."""

from __future__ import annotations

import shutil
import stat
import subprocess
import textwrap
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.annotate.lift import plan_lift, write_lift
from annotune.core.diagnostics import AnnotuneError

HELPER = (
    "#ifndef ANNOTUNE_PRAGMA // from annotune lift: a pragma whose numbers are macros\n"
    "#define ANNOTUNE_PRAGMA_(...) _Pragma(#__VA_ARGS__)\n"
    "#define ANNOTUNE_PRAGMA(...) ANNOTUNE_PRAGMA_(__VA_ARGS__)\n"
    "#endif\n"
)

ACC_SOURCE = """\
void scale(int n, float *restrict a) {
#pragma acc parallel loop vector_length(128) // @tune(VL) values(32, 64, 128)
  for (int i = 0; i < n; ++i) a[i] *= 2.0f;
}
"""


def write(path: Path, text: str) -> Path:
    path.write_bytes(textwrap.dedent(text).encode())
    return path


def lifted(path: Path) -> str:
    """Lift `path` in place and return its new text, checking the rescan on the way: the same
    parameters, values and defaults, all guarded now, former literals as defines."""
    before = {p.name: p for p in read_problem(path).params}
    plan = plan_lift(path)
    assert plan.changed
    write_lift(plan)
    after = {p.name: p for p in read_problem(path).params}
    assert list(after) == list(before)
    for name, param in after.items():
        old = before[name]
        assert (param.values, param.default, param.domain) == (old.values, old.default, old.domain)
        assert param.guarded
        assert param.origin == ("define" if old.origin == "literal" else old.origin)
    assert not plan_lift(path).changed  # lifting twice changes nothing
    return path.read_bytes().decode()


# --- each rewrite -------------------------------------------------------------------------------


def test_guards_an_unguarded_define_and_keeps_its_annotation(tmp_path):
    source = write(
        tmp_path / "k.cu",
        """\
        // block size
        #define BLOCK 32 // @tune values(16, 32)
        int threads = BLOCK;
        """,
    )
    assert lifted(source) == (
        "// block size\n"
        "#ifndef BLOCK\n"
        "#define BLOCK 32 // @tune values(16, 32)\n"
        "#endif\n"
        "int threads = BLOCK;\n"
    )


def test_guard_covers_an_annotation_on_the_line_above(tmp_path):
    source = write(
        tmp_path / "k.c",
        """\
          /* @tune pow2(1, 8) */
          #define TILE 4
        int t = TILE;
        """,
    )
    assert lifted(source) == (
        "  #ifndef TILE\n  /* @tune pow2(1, 8) */\n  #define TILE 4\n  #endif\nint t = TILE;\n"
    )


def test_guards_a_backslash_continued_define(tmp_path):
    source = write(
        tmp_path / "k.c",
        """\
        #define WIDTH \\
          64 /* @tune values(32, 64) */
        int w = WIDTH;
        """,
    )
    assert lifted(source) == (
        "#ifndef WIDTH\n#define WIDTH \\\n  64 /* @tune values(32, 64) */\n#endif\nint w = WIDTH;\n"
    )


def test_guards_defines_declared_by_config_and_annotune_param(tmp_path):
    (tmp_path / "annotune.toml").write_text(
        '[[file]]\npath = "k.c"\n[file.params]\nDIM_X = "pow2(8, 64)"\n'
    )
    source = write(
        tmp_path / "k.c",
        """\
        #pragma annotune param DIM_Y values(1, 2)
        #define DIM_X 32
        #define DIM_Y 2
        int n = DIM_X * DIM_Y;
        """,
    )
    assert lifted(source) == (
        "#pragma annotune param DIM_Y values(1, 2)\n"
        "#ifndef DIM_X\n#define DIM_X 32\n#endif\n"
        "#ifndef DIM_Y\n#define DIM_Y 2\n#endif\n"
        "int n = DIM_X * DIM_Y;\n"
    )


def test_lifts_an_unroll_literal_into_a_guarded_define_and_a_pragma_macro(tmp_path):
    source = write(
        tmp_path / "k.cu",
        """\
        __global__ void k(float *a) {
          float s = 0;
          #pragma unroll 4 // @tune(UNROLL) values(1, 2, 4)
          for (int i = 0; i < 16; ++i) s += a[i];
          a[0] = s;
        }
        """,
    )
    assert lifted(source) == HELPER + (
        "__global__ void k(float *a) {\n"
        "  float s = 0;\n"
        "  #ifndef UNROLL\n"
        "  #define UNROLL 4 // @tune values(1, 2, 4)\n"
        "  #endif\n"
        "  ANNOTUNE_PRAGMA(unroll UNROLL)\n"
        "  for (int i = 0; i < 16; ++i) s += a[i];\n"
        "  a[0] = s;\n"
        "}\n"
    )


def test_lifts_an_acc_clause_literal_in_place(tmp_path):
    source = write(tmp_path / "k.c", ACC_SOURCE)
    assert lifted(source) == (
        "void scale(int n, float *restrict a) {\n"
        "#ifndef VL\n"
        "#define VL 128 // @tune values(32, 64, 128)\n"
        "#endif\n"
        "#pragma acc parallel loop vector_length(VL)\n"
        "  for (int i = 0; i < n; ++i) a[i] *= 2.0f;\n"
        "}\n"
    )


def test_lifts_several_literals_of_one_pragma_in_one_edit(tmp_path):
    source = write(
        tmp_path / "k.c",
        """\
        void f(int n, float *a) {
        // @tune(G: num_gangs) values(32, 64) @tune(VL: vector_length) values(64, 128)
        #pragma acc parallel loop num_gangs(64) vector_length(128) /* note */
          for (int i = 0; i < n; ++i) a[i] = 0;
        }
        """,
    )
    assert lifted(source) == (
        "void f(int n, float *a) {\n"
        "#ifndef G\n#define G 64 // @tune values(32, 64)\n#endif\n"
        "#ifndef VL\n#define VL 128 // @tune values(64, 128)\n#endif\n"
        "#pragma acc parallel loop num_gangs(G) vector_length(VL) /* note */\n"
        "  for (int i = 0; i < n; ++i) a[i] = 0;\n"
        "}\n"
    )


def test_keeps_crlf_line_endings(tmp_path):
    source = tmp_path / "k.cu"
    source.write_bytes(
        b"#define BLOCK 32 // @tune values(16, 32)\r\n"
        b"__global__ void k(float *a) {\r\n"
        b"#pragma unroll 2 // @tune(U) values(1, 2)\r\n"
        b"  for (int i = 0; i < 4; ++i) a[i] = BLOCK;\r\n"
        b"}\r\n"
    )
    text = lifted(source)
    assert "\n" not in text.replace("\r\n", "")
    assert "#ifndef BLOCK\r\n#define BLOCK 32 // @tune values(16, 32)\r\n#endif\r\n" in text
    assert "#define U 2 // @tune values(1, 2)\r\n#endif\r\nANNOTUNE_PRAGMA(unroll U)\r\n" in text


def test_helper_goes_below_an_include_guard_of_a_header(tmp_path):
    header = write(
        tmp_path / "k.cuh",
        """\
        // kernels
        #ifndef K_CUH
        #define K_CUH
        __device__ void f(float *a) {
        #pragma unroll 2 // @tune(U) values(1, 2)
          for (int i = 0; i < 4; ++i) a[i] = 0;
        }
        #endif
        """,
    )
    source = write(tmp_path / "k.cu", '#include "k.cuh"\n')
    plan = plan_lift(source)
    assert [(f.path, f.changed) for f in plan.files] == [(str(source), False), (str(header), True)]
    write_lift(plan)
    text = header.read_text()
    assert text.startswith("// kernels\n#ifndef K_CUH\n#define K_CUH\n" + HELPER + "__device__")
    assert not plan_lift(source).changed


def test_an_already_guarded_file_is_left_alone(data_dir, tmp_path):
    source = write(tmp_path / "k.cu", "#ifndef B\n#define B 4 // @tune values(4, 8)\n#endif\n")
    plan = plan_lift(source)
    assert not plan.changed
    assert plan.diff() == ""
    assert plan.to_json() == {"files": [{"file": str(source), "changed": False}], "lifted": []}


# --- writing ------------------------------------------------------------------------------------


def test_nothing_is_written_without_write_lift_and_the_mode_is_kept(tmp_path):
    source = write(tmp_path / "k.c", ACC_SOURCE)
    source.chmod(0o640)
    plan = plan_lift(source)
    assert source.read_text() == ACC_SOURCE
    assert plan.diff().startswith(f"--- a/{source}\n+++ b/{source}\n")
    assert write_lift(plan) == [str(source)]
    assert stat.S_IMODE(source.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["k.c"]  # no temporary file left


def test_a_file_changed_after_planning_is_not_overwritten(tmp_path):
    source = write(tmp_path / "k.c", ACC_SOURCE)
    plan = plan_lift(source)
    source.write_text(ACC_SOURCE + "// edited\n")
    with pytest.raises(AnnotuneError, match="changed while annotune lift"):
        write_lift(plan)
    assert source.read_text() == ACC_SOURCE + "// edited\n"


# --- the compilers obey the lifted forms ----------------------------------------------------------


def _preprocess(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def stencil(data_dir, tmp_path) -> Path:
    shutil.copytree(data_dir / "stencil", tmp_path / "stencil")
    return tmp_path / "stencil" / "stencil.cu"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_nvcc_obeys_d_and_a_forced_header_after_lift(stencil):
    def expanded(*flags: str) -> str:
        return _preprocess(["nvcc", "-E", *flags, str(stencil)])

    original = expanded("-DUNROLL=1", "-DBLOCK_Y=16")
    assert "blockIdx.y * 16" not in original  # the unguarded define wins before lifting
    assert "#pragma unroll 1" not in original

    write_lift(plan_lift(stencil))
    lifted_text = expanded("-DUNROLL=1", "-DBLOCK_Y=16")
    assert "#pragma unroll 1" in lifted_text
    assert "blockIdx.y * 16 + threadIdx.y" in lifted_text
    tuned = stencil.parent / "tuned.h"
    tuned.write_text("#define UNROLL 1\n#define BLOCK_Y 8\n")
    forced = expanded("-include", str(tuned))
    assert "#pragma unroll 1" in forced
    assert "blockIdx.y * 8 + threadIdx.y" in forced
    defaults = expanded()
    assert "#pragma unroll 3" in defaults
    assert "blockIdx.y * 4 + threadIdx.y" in defaults


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_nvcc_unrolls_by_the_lifted_macro(stencil, tmp_path):
    write_lift(plan_lift(stencil))

    def loads(unroll: int) -> int:
        ptx = tmp_path / f"unroll{unroll}.ptx"
        _preprocess(["nvcc", "-ptx", f"-DUNROLL={unroll}", str(stencil), "-o", str(ptx)])
        return ptx.read_text().count("ld.global")

    assert (loads(1), loads(3)) == (3, 9)  # a rolled loop of 3 loads, then all 9 unrolled


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_gcc_openacc_obeys_d_after_lift(tmp_path):
    source = write(tmp_path / "scale.c", ACC_SOURCE)
    command = ["gcc", "-fopenacc", "-E", "-DVL=64", str(source)]
    assert "vector_length(64)" not in _preprocess(command)
    write_lift(plan_lift(source))
    assert "#pragma acc parallel loop vector_length(64)" in _preprocess(command)
    assert "vector_length(128)" in _preprocess(command[:3] + [str(source)])
    _preprocess(["gcc", "-fopenacc", "-c", str(source), "-o", str(tmp_path / "scale.o")])


def test_writing_through_a_symbolic_link_keeps_the_link(tmp_path):
    real = write(tmp_path / "real.c", ACC_SOURCE)
    link = tmp_path / "link.c"
    link.symlink_to(real.name)
    write_lift(plan_lift(link))
    assert link.is_symlink()
    assert "vector_length(VL)" in real.read_text()


OMP_SOURCE = """\
#include <omp.h>
#include <stdio.h>
int main(void) {
  int used = 0;
  long sum = 0;
#pragma omp parallel num_threads(3) // @tune(NT: num_threads) values(1, 2, 3)
  {
#pragma omp single
    used = omp_get_num_threads();
  }
// @tune(CHUNK: schedule) values(4, 16)
#pragma omp parallel for schedule(dynamic, 16) reduction(+ : sum)
  for (int i = 0; i < 100; ++i) sum += i;
  printf("used=%d sum=%ld\\n", used, sum);
  return 0;
}
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_openmp_clause_literals_lift_and_gcc_obeys_d(tmp_path):
    source = write(tmp_path / "omp.c", OMP_SOURCE)
    text = lifted(source)
    assert "#pragma omp parallel num_threads(NT)\n" in text
    assert "#pragma omp parallel for schedule(dynamic, CHUNK) reduction(+ : sum)\n" in text
    assert "#define CHUNK 16 // @tune values(4, 16)" in text
    expanded = _preprocess(["gcc", "-fopenmp", "-E", "-DNT=2", "-DCHUNK=4", str(source)])
    assert "#pragma omp parallel num_threads(2)" in expanded
    assert "#pragma omp parallel for schedule(dynamic, 4)" in expanded
    binary = tmp_path / "omp"
    _preprocess(["gcc", "-fopenmp", "-DNT=2", str(source), "-o", str(binary)])
    assert _preprocess([str(binary)]) == "used=2 sum=4950\n"
    _preprocess(["gcc", "-fopenmp", str(source), "-o", str(binary)])
    assert _preprocess([str(binary)]) == "used=3 sum=4950\n"  # the default, unchanged
