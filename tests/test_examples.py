"""The shipped examples scan cleanly, build, and (on the host) run and verify their result."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.annotate.summary import summarize_space

EXAMPLES = Path(__file__).parents[1] / "examples"
SOURCES = sorted(
    p for p in EXAMPLES.rglob("*") if p.suffix in (".cu", ".c", ".cpp") and p.parent.name != "tuned"
)


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_example_scans_with_a_nonempty_space(source):
    problem = read_problem(source)
    assert problem.params
    summary = summarize_space(problem)
    assert summary.legal and summary.legal > 1


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_openacc_matmul_builds_runs_and_verifies(tmp_path):
    binary = tmp_path / "matmul"
    source = EXAMPLES / "openacc" / "matmul" / "matmul.c"
    subprocess.run(
        ["gcc", "-O2", "-fopenacc", "-DN=128", str(source), "-o", str(binary), "-lm"], check=True
    )
    output = subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout
    assert output.startswith("time_ms ")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_cuda_stencil_compiles_with_nvcc(tmp_path):
    source = EXAMPLES / "cuda" / "stencil2d" / "stencil2d.cu"
    subprocess.run(
        ["nvcc", "-O3", "-DBLOCK_X=64", "-DBLOCK_Y=4", str(source), "-o", str(tmp_path / "s")],
        check=True,
    )
    assert (tmp_path / "s").exists()
