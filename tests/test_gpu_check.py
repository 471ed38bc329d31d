"""benchmarks/gpu_check.sh on a machine without a GPU: it checks what needs none (every
variant of the CUDA example compiled in program and kernel mode), prints its table, and
exits 2 with the reason, so a lent machine's run and this one read the same way."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from annotune.run.device import gpu_name

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"


@pytest.mark.slow
@pytest.mark.skipif(gpu_name() is not None, reason="a GPU is here: the script tunes on it")
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_without_a_gpu_it_checks_what_it_can_and_exits_2(tmp_path):
    scripts = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{scripts}{os.pathsep}{os.environ['PATH']}"}
    env.pop("HECBENCH", None)
    done = subprocess.run(
        ["bash", str(SCRIPT), str(tmp_path / "logs")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-3000:]
    assert "no GPU: nvidia-smi lists none" in done.stderr
    table = {
        line.split("|")[1].strip(): line.split("|")[4].strip()
        for line in done.stdout.splitlines()
        if line.startswith("| ") and not line.startswith("| step")
    }
    assert table["compile-program"] == "ok" and table["compile-kernel"] == "ok"
    for step in ("pytest-gpu", "program-mode", "kernel-mode", "energy", "check-measure", "ray"):
        assert table[step] == "not run: no GPU"
    assert (tmp_path / "logs" / "compile-kernel.log").is_file()
