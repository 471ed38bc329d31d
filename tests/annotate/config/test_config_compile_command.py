"""The config's compile command decides what libclang reads as active, as it does for the
compiler: its language, predefined macros, -D/-U flags, include directories and forced includes;
and `defines` are -D flags of that command. Shaped like HeCBench's halo-finder (.cxx built with
`nvcc -x cu`) and leukocyte (.c built with `--x cu -I./meschach_lib`)."""

from __future__ import annotations

import shlex
import textwrap
from pathlib import Path

import pytest

from annotune.annotate import read_problem, read_problem_and_source
from annotune.annotate.summary import scan_warnings
from annotune.core.diagnostics import AnnotuneError

# A tunable whose every use is under __CUDACC__, as halo-finder's TILEX in RCBForceTree.cxx.
UNDER_CUDACC = """
#ifdef __CUDACC__
#define TILE 4
__global__ void tiled(float *x) { x[threadIdx.x * TILE] = 0; }
#endif
int main() { return 0; }
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def config(directory: Path, path: str, lines: str, params: str = 'TILE = "values(2, 4)"') -> Path:
    return write(
        directory / "annotune.toml",
        f"[[file]]\npath = {path!r}\n{textwrap.dedent(lines).strip()}\n[file.params]\n{params}\n",
    )


def warnings(source: Path) -> list[str]:
    problem, parsed = read_problem_and_source(source)
    return [message for _, message in scan_warnings(problem, parsed)]


def used(source: Path) -> bool:
    """Whether the source's one tunable is used in code the preprocessor keeps."""
    problem, parsed = read_problem_and_source(source)
    (param,) = problem.params
    return any(parsed.is_active(use.location) for use in param.uses)


@pytest.mark.parametrize(
    "compile_command",
    [
        "nvcc -O3 -x cu -c {source} -o {output}",  # halo-finder
        "nvcc -O3 --x cu -c {source} -o {output}",  # leukocyte
        "nvcc -O3 -c {source} -o {output} --x=cu",  # nvcc's -x names every file's language
        "clang++ -xcuda {source} -o {output}",
    ],
)
def test_a_cpp_file_compiled_as_cuda_is_read_as_cuda(tmp_path, compile_command):
    source = write(tmp_path / "RCBForceTree.cxx", UNDER_CUDACC)
    config(tmp_path, "RCBForceTree.cxx", f"compile = {compile_command!r}")
    assert read_problem(source).language == "cuda"
    assert used(source) and not warnings(source)

    # gcc's -x names the language of the files after it only
    config(tmp_path, "RCBForceTree.cxx", 'compile = "g++ -O2 {source} -o {output} -x cu"')
    assert read_problem(source).language == "c++"
    assert any("not used in active code" in w for w in warnings(source))


def test_a_cu_file_is_read_with_the_macros_nvcc_defines_unless_undefined(tmp_path):
    source = write(
        tmp_path / "k.cu",
        """
        #if defined(__CUDACC__) && defined(__NVCC__)
        #ifndef BLOCK
        #define BLOCK 128 // @tune values(64, 128)
        #endif
        __global__ void k(float *x) { x[threadIdx.x] = BLOCK; }
        #endif
        """,
    )
    assert used(source) and not warnings(source)
    config(tmp_path, "k.cu", 'compile = "nvcc -U__CUDACC__ {source} -o {output}"', "")
    assert not used(source)


def test_nvcc_defines_nvcc_but_not_cudacc_for_a_cpp_file(tmp_path):
    source = write(
        tmp_path / "host.cpp",
        """
        #define A 1
        #define B 1
        #ifdef __NVCC__
        int a = A;
        #endif
        #ifdef __CUDACC__
        int b = B;
        #endif
        """,
    )
    config(tmp_path, "host.cpp", 'compile = "nvcc"', 'A = "values(1, 2)"')
    assert read_problem(source).language == "c++" and used(source)
    config(tmp_path, "host.cpp", 'compile = "nvcc"', 'B = "values(1, 2)"')
    assert not used(source)


def test_a_cpp_driver_reads_a_c_file_as_cpp(tmp_path):
    source = write(
        tmp_path / "k.c",
        """
        #ifdef __cplusplus
        #define WIDTH 8
        #else
        #define WIDTH 4
        #endif
        int width(void) { return WIDTH; }
        """,
    )
    for compile_command, language, width in [
        ("g++", "c++", 8),  # a preset
        ("g++-12 -O2 {source} -o {output}", "c++", 8),
        ("gcc", "c", 4),
        ("nvcc", "c", 4),  # nvcc has the host compiler compile a .c as C
    ]:
        config(tmp_path, "k.c", f"compile = {compile_command!r}", 'WIDTH = "values(4, 8)"')
        problem = read_problem(source)
        assert (problem.language, problem.params[0].default) == (language, width)


HEADER_USER = """
#include "matrix.h"
__global__ void k(float *x) { x[threadIdx.x] = ROWS; }
"""


@pytest.mark.parametrize(
    "flag",
    ["-I./meschach_lib", "-I meschach_lib", "--include-path=meschach_lib", "-iquote meschach_lib"],
)
def test_the_compile_commands_include_directories_are_searched(tmp_path, monkeypatch, flag):
    """Relative to the config's directory, as the compiler is given them, whatever the cwd."""
    source = write(tmp_path / "prog" / "track.c", HEADER_USER)
    header = write(tmp_path / "prog" / "meschach_lib" / "matrix.h", "#define ROWS 16\n")
    config(
        tmp_path / "prog",
        "track.c",
        f'compile = "nvcc --x cu {flag} -c {{source}} -o {{output}}"',
        'ROWS = "values(16, 32)"',
    )
    monkeypatch.chdir(tmp_path)
    problem, parsed = read_problem_and_source(source)
    assert not parsed.missing_local_includes and not warnings(source)
    (rows,) = problem.params
    assert rows.location.file == str(header) and rows.uses
    assert problem.include_dirs == ()  # the command has them: the builder adds none


def test_a_system_include_directory_is_searched_but_not_the_projects(tmp_path):
    source = write(
        tmp_path / "k.cu",
        """
        #include <config.h>
        #ifdef USE_TILES
        #define TILE 4
        __global__ void tiled(float *x) { x[threadIdx.x * TILE] = 0; }
        #endif
        """,
    )
    write(tmp_path / "sys" / "config.h", "#define USE_TILES\n")
    config(tmp_path, "k.cu", 'compile = "nvcc -isystem sys {source} -o {output}"')
    assert used(source) and read_problem(source).files == (str(source),)


@pytest.mark.parametrize("option", ["-include", "-imacros", "--pre-include"])
def test_a_forced_include_decides_what_is_active(tmp_path, option):
    source = write(tmp_path / "k.cu", UNDER_CUDACC.replace("__CUDACC__", "USE_TILES"))
    write(tmp_path / "build" / "options.h", "#define USE_TILES 1\n")
    config(tmp_path, "k.cu", f'compile = "nvcc {option} build/options.h {{source}} -o {{output}}"')
    assert used(source) and not warnings(source)


def test_a_missing_forced_include_is_an_error_at_the_compile_command(tmp_path):
    source = write(tmp_path / "k.cu", UNDER_CUDACC)
    toml = config(tmp_path, "k.cu", 'compile = "nvcc -include nowhere.h {source} -o {output}"')
    with pytest.raises(AnnotuneError, match="-include .*nowhere.h: no such file") as caught:
        read_problem(source)
    where = caught.value.location
    assert (where.file, where.line, where.column) == (str(toml), 3, 12)


def test_d_and_u_flags_count_in_order(tmp_path):
    source = write(tmp_path / "k.cu", UNDER_CUDACC.replace("__CUDACC__", "USE_TILES"))
    for flags, active in [
        ("-DUSE_TILES -UUSE_TILES", False),
        ("-UUSE_TILES -D USE_TILES=2", True),
        ("--define-macro=USE_TILES", True),
        ("--define-macro=USE_TILES --undefine-macro USE_TILES", False),
    ]:
        config(tmp_path, "k.cu", f'compile = "nvcc {flags} {{source}} -o {{output}}"')
        assert used(source) is active, flags


# --- `defines`: -D flags of the compile command ------------------------------------------------


def test_defines_are_added_to_the_compile_command_before_the_source(tmp_path):
    source = write(tmp_path / "k.cu", UNDER_CUDACC.replace("__CUDACC__", "USE_TILES"))
    config(
        tmp_path,
        "k.cu",
        """
        compile = "nvcc -O3 -DN=64 {source} -o {output}"
        defines = ["USE_TILES", "N=64", "SQUARE(x)=((x)*(x))"]
        """,
    )
    assert used(source)  # libclang read it with them
    assert shlex.join(read_problem(source).settings.compile) == (
        "nvcc -O3 -DN=64 -DUSE_TILES '-DSQUARE(x)=((x)*(x))' '{source}' -o '{output}'"
    )


@pytest.mark.parametrize(
    ("lines", "line", "column", "message"),
    [
        (
            'compile = "nvcc -DN=32 {source} -o {output}"\ndefines = ["N=64"]',
            4,
            13,
            r"N is set here and by the compile command \(-D N=32\)",
        ),
        (
            'compile = "nvcc -UN {source} -o {output}"\ndefines = ["X", "N"]',
            4,
            18,
            r"N is set here and by the compile command \(-U N\)",
        ),
        (
            'compile = "nvcc {source} -o {output}"\ndefines = ["-O3"]',
            4,
            13,
            "'-O3' is not a macro definition",
        ),
        ('compile = "nvcc"\ndefines = ["X"]', 4, 1, "'compile' must be a command template"),
        ('defines = ["X"]', 3, 1, "'compile' must be a command template"),
    ],
)
def test_defines_mistakes_point_into_the_toml(tmp_path, lines, line, column, message):
    source = write(tmp_path / "k.cu", UNDER_CUDACC)
    toml = config(tmp_path, "k.cu", lines)
    with pytest.raises(AnnotuneError, match=message) as caught:
        read_problem(source)
    where = caught.value.location
    assert (where.file, where.line, where.column) == (str(toml), line, column)


@pytest.mark.parametrize(
    ("compile_line", "column", "message"),
    [
        ('compile = "gcc -O2 k.c -o {output}"', 12, "needs a {source} argument"),
        ('compile = "gcc {source} -o prog"', 12, "needs a {output} argument"),
        ('compile = "gcc {src} {source} -o {output}"', 16, r"unknown placeholder \{src\}"),
        ('compile = ["gcc", "{src}", "-o", "{output}"]', 20, r"unknown placeholder \{src\}"),
        (
            'compile = "gcc {source} -o {output} -o prog"',
            37,
            r"where the last -o says \(prog\), not to \{output\}",
        ),
    ],
)
def test_compile_template_mistakes_point_into_the_toml(tmp_path, compile_line, column, message):
    """Found when the config is read, at `compile` (the argument at fault where one is), not
    by the builder at the first tune, which cannot say where the command was written."""
    source = write(tmp_path / "k.c", "#define TILE 4\nint main(void) { return TILE; }\n")
    toml = config(tmp_path, "k.c", compile_line)
    with pytest.raises(AnnotuneError, match=message) as caught:
        read_problem(source)
    where = caught.value.location
    assert (where.file, where.line, where.column) == (str(toml), 3, column)


def test_output_twice_as_gcc_accepts_it_is_a_template(tmp_path):
    source = write(tmp_path / "k.c", "#define TILE 4\nint main(void) { return TILE; }\n")
    config(tmp_path, "k.c", 'compile = "gcc {source} -o {output} -o {output}"')
    assert read_problem(source).settings.compile[-2:] == ("-o", "{output}")
