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
from annotune.emit.sizes import read_size_table
from annotune.run.device import DEVICE_ENV

EXAMPLES = Path(__file__).parents[2] / "examples"
SOURCES = sorted(
    p for p in EXAMPLES.rglob("*") if p.suffix in (".cu", ".c", ".cpp") and p.parent.name != "tuned"
)


VENDORED = EXAMPLES / "vendored"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_example_scans_with_a_nonempty_space(source, monkeypatch):
    if source.is_relative_to(VENDORED / "vendor"):  # configured from the user's own project
        monkeypatch.chdir(VENDORED / "my-project")
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
    text = header.read_text()
    table = read_size_table(text, str(header))
    if table is None:
        values = {name: value for name, value in _DEFINE.findall(text)}
        assert set(values) - {f"ANNOTUNE_TUNED_{header.stem.upper()}_H"} == {
            p.name for p in problem.params
        }
        configs = [{p.name: type(p.values[0])(values[p.name]) for p in problem.params}]
    else:
        configs = [dict(entry.params) for entry in table.entries]
    space = problem_space(problem)
    assert list(space.names) == [p.name for p in problem.params]
    for config in configs:
        row = [[p.values.index(config[p.name]) for p in problem.params]]
        assert space.is_legal(np.array(row)).all(), config
    device = _DEVICE_LINE.search(header.read_text()).group(1)
    assert slugify(device) == header.parent.name
    monkeypatch.setenv(DEVICE_ENV, device)
    result = cli("build", source, "-o", tmp_path / "out.h")
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "out.h").read_text() == header.read_text()


MATMUL_SIZES = EXAMPLES / "openacc" / "matmul" / "tuned" / "cpu-intel-xeon-processor" / "matmul.h"


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_the_matmul_size_aware_header_compiles_and_selects_per_size(tmp_path):
    """The shipped header tuned at three sizes: each size compiles with its own values, a size
    between takes the nearest's, no N at all the source's default (512), and it runs."""
    source = EXAMPLES / "openacc" / "matmul" / "matmul.c"
    table = read_size_table(MATMUL_SIZES.read_text(), str(MATMUL_SIZES))
    assert table is not None and table.name == "N"
    assert [e.size for e in table.entries if not e.predicted] == [128, 256, 512]
    compile_ = ["gcc", "-O2", "-fopenacc", "-include", str(MATMUL_SIZES)]
    cases = [(f"-DN={e.size}", e) for e in table.entries]
    cases += [("-DN=181", table.nearest(181)), ("-DN=182", table.nearest(182))]
    cases += [(None, table.nearest(512))]
    for define, entry in cases:
        flags = [define] if define else []
        macros = subprocess.run(
            [*compile_, *flags, "-dM", "-E", str(source)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        defined = dict(_DEFINE.findall(macros))
        assert {name: int(defined[name]) for name in entry.params} == dict(entry.params), define
    binary = tmp_path / "matmul"
    subprocess.run([*compile_, "-DN=200", str(source), "-o", str(binary), "-lm"], check=True)
    assert subprocess.run([binary], capture_output=True, text=True, check=True).stdout.startswith(
        "time_ms "
    )
