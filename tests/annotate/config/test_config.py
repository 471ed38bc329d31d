"""Declarations in annotune.toml / [tool.annotune] for sources that must not be edited."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.annotate.config import find_config
from annotune.core.diagnostics import AnnotuneError

THIRD_PARTY = """
#define DIM_THREAD_BLOCK_X 32
#define DIM_THREAD_BLOCK_Y 8
__global__ void k(float *a) { a[threadIdx.x] = 0; }
int main() { k<<<1, DIM_THREAD_BLOCK_X * DIM_THREAD_BLOCK_Y>>>(0); }
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def test_annotune_toml_names_file_and_macros(tmp_path):
    source = write(tmp_path / "polybench" / "2mm.cu", THIRD_PARTY)
    write(
        tmp_path / "annotune.toml",
        """
        [[file]]
        path = "polybench/2mm.cu"
        constraints = ["DIM_THREAD_BLOCK_X * DIM_THREAD_BLOCK_Y <= 1024"]
        [file.params]
        DIM_THREAD_BLOCK_X = "pow2(1, 1024)"
        DIM_THREAD_BLOCK_Y = { domain = "range(1, 32)", default = 8 }
        """,
    )
    problem = read_problem(source)
    x, y = problem.params
    assert (x.name, x.origin, x.default, x.guarded) == ("DIM_THREAD_BLOCK_X", "config", 32, False)
    assert (x.location.file, x.location.line) == (str(source), 1)
    assert len(x.values) == 11 and y.values == tuple(range(1, 33))
    assert problem.constraints[0].origin == "config"
    assert problem.config_file == str(tmp_path / "annotune.toml")
    assert any(u.kind == "launch" for u in x.uses)


def test_pyproject_tool_table_is_found_from_a_subdirectory(tmp_path):
    source = write(tmp_path / "src" / "k.cu", THIRD_PARTY)
    write(
        tmp_path / "pyproject.toml",
        """
        [project]
        name = "x"
        [[tool.annotune.file]]
        path = "src/k.cu"
        [tool.annotune.file.params]
        DIM_THREAD_BLOCK_Y = "values(4, 8)"
        """,
    )
    assert find_config(source) == tmp_path / "pyproject.toml"
    (y,) = read_problem(source).params
    assert y.values == (4, 8)


@pytest.mark.parametrize(
    ("params_text", "line", "message"),
    [
        ('DIM_THREAD_BLOCK_X = "values(1, 2"', 4, "expected ',' or ')'"),
        ('DIM_THREAD_BLOCK_X = "values(1, 2)"', 4, "the default of DIM_THREAD_BLOCK_X, 32,"),
        ('NOT_THERE = "values(1, 2)"', 4, "'NOT_THERE' is not #defined"),
        ('DIM_THREAD_BLOCK_X = { domain = "bool", deflt = 1 }', 4, "unknown key 'deflt'"),
    ],
)
def test_config_errors_point_into_the_toml(tmp_path, params_text, line, message):
    source = write(tmp_path / "k.cu", THIRD_PARTY)
    config = write(
        tmp_path / "annotune.toml",
        f'[[file]]\npath = "k.cu"\n[file.params]\n{params_text}\n',
    )
    with pytest.raises(AnnotuneError) as caught:
        read_problem(source)
    assert message in caught.value.message
    assert caught.value.location.file == str(config)
    assert caught.value.location.line == line


def test_invalid_toml_is_located(tmp_path):
    source = write(tmp_path / "k.cu", THIRD_PARTY)
    write(tmp_path / "annotune.toml", '[[file]]\npath = "k.cu\n')
    with pytest.raises(AnnotuneError, match="invalid TOML") as caught:
        read_problem(source)
    assert caught.value.location.line == 2


@pytest.mark.parametrize(
    ("name", "text", "where", "message"),
    [
        ("annotune.toml", '[fille]\npath = "k.cu"\n', (1, 2), "'fille' in annotune.toml"),
        # A text search would stop at the "pth" inside the strings above the key.
        (
            "annotune.toml",
            '[[file]]\npath = "k.cu"\nargs = ["pth", "pth = 1"]\n[[file]]\npth = "k.cu"\n',
            (5, 1),
            "'pth' in [[file]] (did you mean 'path'?)",
        ),
        ("pyproject.toml", "[tool.annotune]\nfiles = 3\n", (2, 1), "did you mean 'file'?"),
        (
            "annotune.toml",
            '[[file]]\npath = "k.cu"\n[file.params]\n'
            'DIM_THREAD_BLOCK_Y = "bool"\nDIM_THREAD_BLOCK_X = { domain = "bool", deflt = 1 }\n',
            (5, 41),
            "'deflt' in parameter DIM_THREAD_BLOCK_X (did you mean 'default'?)",
        ),
        (
            "annotune.toml",
            'file = [\n  { path = "other.cu" },\n  { path = "k.cu", incude = ["inc"] },\n]\n',
            (3, 20),
            "did you mean 'include'?",
        ),
        (
            "annotune.toml",
            '[[file]]\npath = "k.cu"\n[file.params.X]\ndomain = "bool"\nfrobnicate = 1\n',
            (5, 1),
            "unknown key 'frobnicate' in parameter X (expected: add, arg, clause, default, dim3, "
            "domain, function, independent, launch, line)",
        ),
    ],
)
def test_unknown_keys_are_errors_at_their_line_with_the_nearest_known_key(
    tmp_path, name, text, where, message
):
    source = write(tmp_path / "k.cu", THIRD_PARTY)
    config = tmp_path / name
    config.write_text(text)
    with pytest.raises(AnnotuneError, match="unknown key") as caught:
        read_problem(source)
    assert message in caught.value.message
    location = caught.value.location
    assert (location.file, location.line, location.column) == (str(config), *where)


def test_relative_paths_are_read_from_the_config_files_directory(tmp_path, monkeypatch):
    project = tmp_path / "project"
    write(project / "src" / "k.cu", '#include "params.h"\n' + THIRD_PARTY)
    write(project / "inc" / "params.h", "#define TILE 4\n")
    write(project / "common" / "force.h", "")
    write(project / "common" / "util.cu", "")
    (project / "data").mkdir()
    write(
        project / "annotune.toml",
        """
        [[file]]
        path = "src/k.cu"
        include = ["inc"]
        compile = "nvcc -O3 -Icommon -include common/force.h {source} common/util.cu -o {output}"
        run_dir = "data"
        [file.params]
        TILE = "values(2, 4)"
        """,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    problem = read_problem(
        Path("../project/src/k.cu"), config_path=Path("../project/annotune.toml")
    )

    assert problem.param("TILE").default == 4  # params.h was found through include
    assert problem.include_dirs == (str(project / "inc"),)
    assert problem.settings.compile == (
        "nvcc",
        "-O3",
        f"-I{project / 'common'}",
        "-include",
        str(project / "common" / "force.h"),
        "{source}",
        str(project / "common" / "util.cu"),
        "-o",
        "{output}",
    )
    assert problem.settings.run_dir == str(project / "data")


def test_include_directories_reach_libclang_for_angle_bracket_headers(tmp_path):
    source = write(tmp_path / "src" / "k.cu", "#include <tuning.h>\n" + THIRD_PARTY)
    write(tmp_path / "utilities" / "tuning.h", "#define TILE 8\n")
    write(
        tmp_path / "annotune.toml",
        """
        [[file]]
        path = "src/k.cu"
        include = ["utilities"]
        [file.params]
        TILE = "pow2(1, 64)"
        """,
    )
    (tile,) = read_problem(source).params
    assert (tile.default, tile.location.file) == (8, str(tmp_path / "utilities" / "tuning.h"))


@pytest.mark.parametrize(
    ("entry", "line", "message"),
    [
        ('run_dir = "nowhere"', 3, "run_dir: no such directory"),
        ('compile = "nvcc \'{source} -o {output}"', 3, "cannot split the compile command"),
    ],
)
def test_run_dir_and_compile_mistakes_are_located(tmp_path, entry, line, message):
    source = write(tmp_path / "k.cu", THIRD_PARTY)
    write(tmp_path / "annotune.toml", f'[[file]]\npath = "k.cu"\n{entry}\n')
    with pytest.raises(AnnotuneError, match=message) as caught:
        read_problem(source)
    assert caught.value.location.line == line


SIZES = """
# ifdef MINI_DATASET
#  define N 32
# else
#  define N 64
# endif
"""


@pytest.mark.parametrize(
    ("compile_line", "default", "line"),
    [("", 64, 4), ('compile = "nvcc -DMINI_DATASET {source} -o {output}"', 32, 2)],
)
def test_the_default_is_the_definition_the_compiler_sees(tmp_path, compile_line, default, line):
    source = write(tmp_path / "k.cu", '#include "sizes.h"\nint a[N];\n')
    header = write(tmp_path / "sizes.h", SIZES)
    write(
        tmp_path / "annotune.toml",
        f'[[file]]\npath = "k.cu"\n{compile_line}\n[file.params]\nN = "values(32, 64, 128)"\n',
    )
    (n,) = read_problem(source).params
    assert n.default == default
    assert (n.location.file, n.location.line) == (str(header), line)
    span = n.value_span  # what a rewritten copy edits
    assert header.read_bytes()[span.start : span.end] == str(default).encode()


def test_time_unit_and_the_environment_of_the_runs_are_read(tmp_path):
    source = write(tmp_path / "k.cu", THIRD_PARTY)
    config = write(
        tmp_path / "annotune.toml",
        """
        [[file]]
        path = "k.cu"
        time_regex = 'took ([0-9.]+) s'
        time_unit = "s"
        [file.params]
        THREADS = { domain = "values(1, 2, 4)", default = 1 }
        [file.env]
        OMP_PROC_BIND = "close"
        OMP_NUM_THREADS = "{THREADS}"
        """,
    )
    settings = read_problem(source).settings
    assert settings.time_unit == "s"
    assert [(e.name, e.value) for e in settings.env] == [
        ("OMP_PROC_BIND", "close"),
        ("OMP_NUM_THREADS", "{THREADS}"),
    ]
    where = settings.env[1].location
    assert (where.file, where.line, where.column) == (str(config), 9, 20)


@pytest.mark.parametrize(
    ("entry", "where", "message"),
    [
        ('time_unit = "min"', (3, 14), "time_unit must be one of s, ms, us, ns, not 'min'"),
        ("[file.env]\nOMP_NUM_THREADS = 4", (4, 19), 'e.g. OMP_NUM_THREADS = "4"'),
        ('[file.env]\n"OMP THREADS" = "4"', (4, 1), "is not an environment variable's name"),
        ('[file.env]\nX = "a{1st}"', (4, 7), "{1st} in env X names no parameter"),
        ('[file.env]\nX = "{T"', (4, 6), "'{' in env X opens a placeholder that no '}' closes"),
        ('[file.env]\nX = "a}"', (4, 7), "'}' in env X closes no placeholder"),
        ('args = ["-n", "{T"]', (3, 16), "'{' in argument '{T' opens a placeholder"),
        ('args = ["-n", "x{}"]', (3, 17), "{} in argument 'x{}' names no parameter"),
        ("env = 3", (3, 1), "'env' must be a table"),
    ],
)
def test_time_unit_and_env_mistakes_are_located(tmp_path, entry, where, message):
    source = write(tmp_path / "k.cu", THIRD_PARTY)
    write(tmp_path / "annotune.toml", f'[[file]]\npath = "k.cu"\n{entry}\n')
    with pytest.raises(AnnotuneError) as caught:
        read_problem(source)
    assert message in caught.value.message
    assert (caught.value.location.line, caught.value.location.column) == where


@pytest.mark.parametrize("compile_value", ['""', "'   '", "[]"])
def test_an_empty_compile_command_is_an_error_at_its_value(tmp_path, compile_value):
    source = write(tmp_path / "k.cu", THIRD_PARTY)
    write(tmp_path / "annotune.toml", f'[[file]]\npath = "k.cu"\ncompile = {compile_value}\n')
    with pytest.raises(AnnotuneError) as caught:
        read_problem(source)
    assert "the compile command is empty" in caught.value.message
    at = caught.value.location
    assert (at.line, at.column) == (3, 11 if compile_value == "[]" else 12)  # inside its quotes
