"""The shipped examples scan cleanly, build, and (on the host) run and verify their result."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from annotune.annotate import problem_space, read_problem
from annotune.annotate.summary import summarize_space
from annotune.emit import slugify
from annotune.run.device import DEVICE_ENV

EXAMPLES = Path(__file__).parents[2] / "examples"
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


HEADERS = sorted(EXAMPLES.glob("*/*/tuned/*/*.h"))
_DEVICE_LINE = re.compile(r"^ \* device: +(.+)$", re.M)
_DEFINE = re.compile(r"^#define (\w+) (\S+)", re.M)


@pytest.mark.parametrize("header", HEADERS, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_committed_header_is_legal_and_served_for_its_device(header, cli, tmp_path, monkeypatch):
    """A header tuned on a GPU or host stays a legal point of its example's current space, and
    `annotune build` hands it out on that device."""
    example = header.parents[2]
    source = next(p for p in SOURCES if p.parent == example and p.stem == header.stem)
    problem = read_problem(source)
    values = {name: value for name, value in _DEFINE.findall(header.read_text())}
    assert set(values) - {f"ANNOTUNE_TUNED_{header.stem.upper()}_H"} == {
        p.name for p in problem.params
    }
    space = problem_space(problem)
    config = {p.name: type(p.values[0])(values[p.name]) for p in problem.params}
    assert list(space.names) == [p.name for p in problem.params]
    row = [[p.values.index(config[p.name]) for p in problem.params]]
    assert space.is_legal(np.array(row)).all(), config
    device = _DEVICE_LINE.search(header.read_text()).group(1)
    assert slugify(device) == header.parent.name
    monkeypatch.setenv(DEVICE_ENV, device)
    result = cli("build", source, "-o", tmp_path / "out.h")
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "out.h").read_text() == header.read_text()
