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
        ('DIM_THREAD_BLOCK_X = "values(1, 2)"', 4, "default value 32"),
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
