"""The front end on small sources: guards, comments above, pragmas, uses, languages."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from annotune.annotate import problem_space, read_problem
from annotune.core.diagnostics import AnnotuneError


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def params(problem):
    return {p.name: p for p in problem.params}


def test_guards_ifndef_and_if_not_defined_but_not_else(tmp_path):
    source = write(
        tmp_path,
        "g.c",
        """
        #ifndef A
        #define A 4 // @tune values(1, 4)
        #endif
        #if !defined(B)
        #define B 2 // @tune values(1, 2)
        #endif
        #ifndef C
        #else
        #define C 1 // @tune values(1, 2)
        #endif
        #ifndef OTHER
        #define D 8 // @tune values(8, 16)
        #endif
        """,
    )
    found = params(read_problem(source))
    assert found["A"].guarded and found["B"].guarded
    assert not found["C"].guarded and not found["D"].guarded


def test_comment_on_the_line_above_a_define(tmp_path):
    source = write(
        tmp_path,
        "a.c",
        """
        // @tune range(1, 4)
        #define TILE 2
        """,
    )
    (tile,) = read_problem(source).params
    assert tile.values == (1, 2, 3, 4) and tile.default == 2
    assert (tile.location.line, tile.location.column) == (2, 9)


def test_openacc_clauses_pick_the_literal(tmp_path):
    source = write(
        tmp_path,
        "acc.c",
        """
        void f(int n, float *x) {
        #pragma acc parallel loop num_gangs(256) vector_length(128) \\
            /* @tune(VL: vector_length) pow2(32, 512) */ /* @tune(G: num_gangs) values(128, 256) */
          for (int i = 0; i < n; ++i) x[i] *= 2.0f;
        }
        """,
    )
    found = params(read_problem(source))
    assert found["VL"].default == 128 and found["VL"].origin == "literal"
    assert found["VL"].location.column == 56
    assert found["G"].default == 256
    assert found["VL"].uses[0].kind == "pragma" and found["VL"].uses[0].function == "f"


def test_ambiguous_pragma_literal_asks_for_a_clause(tmp_path):
    source = write(
        tmp_path,
        "acc.c",
        "#pragma acc parallel num_gangs(4) vector_length(128) // @tune(VL) pow2(32, 512)\n",
    )
    with pytest.raises(
        AnnotuneError, match=r"2 number literals .*num_gangs\(4\).*@tune\(VL: clause\)"
    ):
        read_problem(source)


def test_pragma_param_takes_its_default_from_a_define(tmp_path):
    source = write(
        tmp_path,
        "p.cpp",
        """
        #pragma annotune param WPT values(1, 2, 4, 8)
        #ifndef WPT
        #define WPT 4
        #endif
        #pragma annotune param VEC bool
        int work() { return WPT * 3; }
        """,
    )
    found = params(read_problem(source))
    assert found["WPT"].default == 4 and found["WPT"].guarded and found["WPT"].origin == "pragma"
    assert found["VEC"].default == 0 and found["VEC"].guarded  # no #define: -D sets it
    assert [(u.kind, u.function) for u in found["WPT"].uses] == [("code", "work")]


def test_constraint_continued_over_lines_locates_errors_on_the_right_line(tmp_path):
    source = write(
        tmp_path,
        "c.cu",
        """
        #define A 4 // @tune values(1, 4)
        #pragma annotune constraint A > 0 && \\
            A < Q
        """,
    )
    problem = read_problem(source)
    with pytest.raises(AnnotuneError) as caught:
        problem_space(problem)
    assert "unknown parameter 'Q'" in caught.value.message
    assert (caught.value.location.line, caught.value.location.column) == (3, 9)


def test_headers_in_subdirectories_and_languages(tmp_path):
    write(tmp_path, "inc/params.h", "#define N 16 /* @tune pow2(4, 64) */\n")
    source = write(tmp_path, "main.c", '#include "inc/params.h"\n#include <stdio.h>\nint a[N];\n')
    problem = read_problem(source)
    (n,) = problem.params
    assert n.location.file.endswith("inc/params.h")
    assert problem.language == "c"
    assert [u.kind for u in n.uses] == ["code"]


def test_missing_local_header_is_reported_not_fatal(tmp_path):
    source = write(tmp_path, "m.cu", '#include "gone.cuh"\n#define A 1 // @tune bool\n')
    problem = read_problem(source)
    ((location, name),) = problem.missing_includes
    assert name == "gone.cuh" and location.line == 1


def test_preprocessor_and_launch_uses(tmp_path):
    source = write(
        tmp_path,
        "u.cu",
        """
        #define BX 64 // @tune pow2(32, 256)
        #if BX > 128
        #define BIG 1
        #endif
        __global__ void k(float *x) { x[threadIdx.x] = BX; }
        void run(float *x) { k<<<1, BX>>>(x); }
        """,
    )
    (bx,) = read_problem(source).params
    kinds = [(u.kind, u.function, u.kernel) for u in bx.uses]
    assert kinds == [("preprocessor", None, False), ("code", "k", True), ("launch", "run", False)]


def test_cuda_builtins_in_device_code_are_no_uses_of_a_host_variable_named_so(tmp_path):
    """`int blockDim = 256;` in `main` is a knob; the kernel's `blockDim.x` and a device
    function's `warpSize` are CUDA's own, not uses of it (nor of a knob named `warpSize`)."""
    source = write(
        tmp_path,
        "b.cu",
        """
        __device__ int lane() { return threadIdx.x % warpSize + blockDim.x * 0; }
        __global__ void fill(float *a) { a[blockIdx.x * blockDim.x + threadIdx.x] = lane(); }
        int main() {
          int blockDim = 256;
          fill<<<4, blockDim>>>(0);
          return 0;
        }
        """,
    )
    config = '[[file]]\npath = "b.cu"\n[file.params]\nblockDim = "values(128, 256)"\n'
    write(tmp_path, "annotune.toml", config)
    (block_dim,) = read_problem(source).params
    uses = [(u.kind, u.function, u.location.line) for u in block_dim.uses]
    assert uses == [("code", "main", 4), ("launch", "main", 5)]


def test_no_parameters_is_an_error(tmp_path):
    source = write(tmp_path, "plain.c", "int main(void) { return 0; }\n")
    with pytest.raises(AnnotuneError, match="no tunable parameters"):
        read_problem(source)


def test_prose_mentioning_tune_is_not_an_annotation(tmp_path):
    source = write(tmp_path, "d.c", "// see the @tune docs\n#define A 1 // @tune bool\n")
    assert [p.name for p in read_problem(source).params] == ["A"]


def test_invalid_utf8_in_the_source_is_not_fatal(tmp_path):
    source = tmp_path / "latin1.c"
    source.write_bytes(b"/* caf\xe9 */\n#define A 3 // @tune values(1, 3)\nint \xff = 1;\n")
    (a,) = read_problem(source).params
    assert (a.name, a.default, a.location.line) == ("A", 3, 2)


def test_a_directory_is_not_a_source(tmp_path):
    with pytest.raises(AnnotuneError, match="is a directory"):
        read_problem(tmp_path)


def test_program_arguments_from_a_pragma(tmp_path):
    source = write(
        tmp_path,
        "args.c",
        """
        #pragma annotune args 1024 "input data.txt" --verbose
        #define A 1 // @tune bool
        """,
    )
    assert read_problem(source).settings.args == ("1024", "input data.txt", "--verbose")


def test_the_directive_families_a_source_uses(tmp_path):
    write(tmp_path, "inner.h", "#pragma omp declare simd\nint f(int);\n")
    found = {
        name: read_problem(write(tmp_path, name, text + "#define A 1 // @tune bool\n")).pragmas
        for name, text in {
            "none.c": "#pragma once\n#pragma GCC unroll 2\n",
            "header.c": '#include "inner.h"\n',
            "acc.c": "#pragma acc routine seq\n",
            "both.cpp": "#include <openacc.h>\n#pragma omp parallel\n",
            "runtime.c": "#include <omp.h>\n",
            "skipped.c": "#ifdef USE_OPENMP\n#pragma omp parallel for\n#endif\n",
        }.items()
    }
    assert found == {
        "none.c": frozenset(),
        "skipped.c": frozenset(),  # the compiler never sees that pragma
        "header.c": {"omp"},
        "acc.c": {"acc"},
        "both.cpp": {"omp", "acc"},
        "runtime.c": {"omp"},
    }


def test_openmp_clauses_pick_the_literal(tmp_path):
    source = write(
        tmp_path,
        "omp.c",
        """
        void f(int n, float *x) {
        #pragma omp parallel for num_threads(4) schedule(dynamic, 16) collapse(1) \\
            /* @tune(T: num_threads) values(2, 4) */ /* @tune(CHUNK: schedule) pow2(1, 64) */ \\
            /* @tune(C: collapse) values(1) */
          for (int i = 0; i < n; ++i) x[i] *= 2.0f;
        #pragma omp simd simdlen(8) // @tune(SL: simdlen) values(4, 8)
          for (int i = 0; i < n; ++i) x[i] += 1.0f;
        }
        """,
    )
    found = params(read_problem(source))
    assert {name: p.default for name, p in found.items()} == {"T": 4, "CHUNK": 16, "C": 1, "SL": 8}
    data = source.read_bytes()
    chunk = found["CHUNK"]
    assert data[chunk.value_span.start : chunk.value_span.end] == b"16"
    assert (chunk.location.line, chunk.location.column) == (2, 59)
    assert chunk.origin == "literal" and chunk.uses[0].kind == "pragma"


def test_a_clause_with_several_literals_is_named_as_written(tmp_path):
    source = write(
        tmp_path,
        "omp.c",
        "#pragma omp parallel for schedule(dynamic, 16) num_threads(2) // @tune(X) values(1)\n",
    )
    with pytest.raises(AnnotuneError, match=r"\(schedule\(dynamic, 16\), num_threads\(2\)\)"):
        read_problem(source)
    source.write_text("#pragma omp parallel for schedule(static) // @tune(X: schedule) values(1)\n")
    with pytest.raises(AnnotuneError, match="no number literal after 'schedule'"):
        read_problem(source)
