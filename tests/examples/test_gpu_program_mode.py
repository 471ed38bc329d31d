"""Program mode on a real GPU: tune a CUDA example end to end. Skipped without a GPU."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from annotune.annotate import read_problem
from annotune.run.device import gpu_name
from annotune.run.program import RunSpec
from annotune.session.options import TuneOptions
from annotune.session.tuner import tune

pytestmark = pytest.mark.gpu


@pytest.fixture
def gpu() -> str:
    name = gpu_name()
    if name is None or shutil.which("nvcc") is None:
        pytest.skip("needs an NVIDIA GPU (nvidia-smi) and nvcc")
    return name


def test_tune_a_cuda_example_in_program_mode(gpu, tmp_path, data_dir):
    examples = data_dir.parent.parent / "examples" / "cuda"
    shutil.copytree(examples / "stencil2d", tmp_path / "stencil2d")
    shutil.copytree(examples / "common", tmp_path / "common")
    problem = read_problem(tmp_path / "stencil2d" / "stencil2d.cu")
    report = tune(
        problem,
        TuneOptions(
            strategy="iterml",
            budget=12,
            mode="program",
            run=RunSpec(warmup=1, repeats=3, timeout=60),
        ),
    )
    assert report.device == gpu
    assert report.invalid == 0
    assert report.best is not None and 0 < report.best.time <= report.default.time
    binary = tmp_path / "tuned"
    subprocess.run(
        [
            "nvcc",
            "-O3",
            "-include",
            str(report.header),
            str(tmp_path / "stencil2d" / "stencil2d.cu"),
            "-o",
            str(binary),
        ],
        check=True,
    )
    out = subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout
    assert "time_ms" in out
