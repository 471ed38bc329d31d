"""The OpenACC examples (27-point stencil, lid-driven cavity) on the host with gcc -fopenacc.

Each builds with small problem sizes, runs and verifies itself (a non-zero exit is a wrong result),
through its Makefile too; and one is tuned end to end with a tiny budget, its header compiled in.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import annotune

ROOT = Path(__file__).parents[2]
OPENACC = ROOT / "examples" / "openacc"
INCLUDE = Path(annotune.__file__).parent / "include"

# Small problems: each run takes milliseconds.
SMALL = {
    "stencil27": ["-DN=34", "-DSWEEPS=4"],
    "ldc": ["-DN=32", "-DSTEPS=60", "-DDT=0.005"],
}

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")


def build(source: Path, output: Path, *flags: str, timing: bool = True) -> Path:
    include = [f"-I{INCLUDE}"] if timing else []
    subprocess.run(
        ["gcc", "-O2", "-fopenacc", *include, *flags, str(source), "-o", str(output), "-lm"],
        check=True,
        capture_output=True,
        text=True,
    )
    return output


def run(binary: Path) -> str:
    done = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout


def reported(stdout: str) -> tuple[float, float]:
    time_ms = re.search(r"^annotune-time-ms: (\S+)$", stdout, re.MULTILINE)
    check = re.search(r"^annotune-check: (\S+)$", stdout, re.MULTILINE)
    assert time_ms and check, stdout
    return float(time_ms.group(1)), float(check.group(1))


@needs_gcc
@pytest.mark.parametrize(
    ("name", "flags"),
    [
        ("stencil27", SMALL["stencil27"]),
        # odd sizes leave partial blocks and a partial group of rows
        ("stencil27", ["-DN=37", "-DBLOCK_I=8", "-DBLOCK_J=8", "-DBLOCK_K=2", "-DROWS=4"]),
        ("ldc", SMALL["ldc"]),
        ("ldc", ["-DN=33", "-DSTEPS=40", "-DDT=0.005", "-DBLOCK_I=4", "-DBLOCK_J=2",
                 "-DNUM_WORKERS=1", "-DCOLLAPSE=1"]),
    ],
    ids=["stencil27-default", "stencil27-blocked", "ldc-default", "ldc-blocked"],
)  # fmt: skip
def test_example_builds_runs_and_verifies(tmp_path, name, flags):
    stdout = run(build(OPENACC / name / f"{name}.c", tmp_path / name, *flags))
    time_ms, check = reported(stdout)
    assert time_ms >= 0 and check > 0
    assert re.search(rf"^{name}: .* ok$", stdout, re.MULTILINE), stdout


@needs_gcc
def test_blocking_does_not_change_the_answer(tmp_path):
    """Every block shape computes the same numbers: the check values agree across variants."""
    source = OPENACC / "stencil27" / "stencil27.c"
    checks = {
        reported(run(build(source, tmp_path / f"s{k}", "-DN=37", *flags)))[1]
        for k, flags in enumerate(
            [[], ["-DBLOCK_J=32", "-DBLOCK_K=128", "-DROWS=2", "-DBLOCK_I=256"], ["-DBLOCK_J=1"]]
        )
    }
    assert len(checks) == 1


@needs_gcc
@pytest.mark.parametrize("name", ["stencil27", "ldc"])
def test_example_builds_without_annotune(tmp_path, name):
    """Without annotune's timing header the program times itself."""
    source = OPENACC / name / f"{name}.c"
    stdout = run(build(source, tmp_path / name, *SMALL[name], timing=False))
    assert re.search(r"^time_ms [0-9.]+$", stdout, re.MULTILINE), stdout
    assert "annotune-check" not in stdout


@needs_gcc
@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("with_annotune", [True, False], ids=["annotune", "no-annotune"])
def test_makefile_builds_the_example(tmp_path, with_annotune):
    """`make` writes build/ldc.tuned.h (the defaults: no header for this device) and compiles."""
    work = tmp_path / "ldc"
    shutil.copytree(OPENACC / "ldc", work, ignore=shutil.ignore_patterns("ldc", "build", ".*"))
    shutil.copy(OPENACC / "example.mk", tmp_path / "example.mk")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "ANNOTUNE_DEVICE": "test-host",
    }
    # without annotune: neither the command nor the importable package (for the include path)
    annotune_cmd = f"{sys.executable} -m annotune" if with_annotune else "no-such-annotune"
    python = sys.executable if with_annotune else "false"
    done = subprocess.run(
        [
            "make",
            "-C",
            str(work),
            f"ANNOTUNE={annotune_cmd}",
            f"PYTHON={python}",
            "ACCFLAGS=-O2 -fopenacc " + " ".join(SMALL["ldc"]),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    header = (work / "build" / "ldc.tuned.h").read_text()
    if with_annotune:
        assert "#define BLOCK_I 8" in header
        stdout = run(work / "ldc")
        reported(stdout)  # the include path found annotune's timing header
    else:
        assert "not found" in done.stdout
        assert re.search(r"^time_ms ", run(work / "ldc"), re.MULTILINE)


@pytest.mark.slow
@needs_gcc
def test_tune_stencil27_end_to_end(tmp_path, cli):
    """A tiny tuning run writes a header that compiles into the program and verifies (one
    timed run per configuration and no final check: what is timed is not the claim)."""
    text = (OPENACC / "stencil27" / "stencil27.c").read_text()
    small, count = re.subn(r"#define N 130\n", "#define N 26\n", text)
    assert count == 1
    small = small.replace("#define SWEEPS 8\n", "#define SWEEPS 2\n")
    source = tmp_path / "stencil27.c"
    source.write_text(small)
    result = cli(
        "tune", source, "--budget", "4", "--repeats", "1", "--max-repeats", "1", "--warmup", "0",
        "--recheck", "0", "--device", "test-host", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["evaluations"] >= 1
    header = Path(summary["header"])
    if not header.is_absolute():
        header = tmp_path / header
    assert header.exists() and header.parent.parent.name == "tuned"
    best = summary["best"]["params"]
    for name, value in best.items():
        assert re.search(rf"#define {name} {value}\b", header.read_text()), name
    binary = build(source, tmp_path / "stencil27-tuned", "-include", str(header))
    time_ms, check = reported(run(binary))
    assert check > 0


@needs_gcc
def test_ldc_reaches_the_ghia_benchmark(tmp_path):
    """Run to a steady state (t = 18), the centre line matches Ghia et al.'s Re = 100 solution."""
    source = OPENACC / "ldc" / "ldc.c"
    flags = ["-DN=48", "-DSTEPS=3000", "-DDT=0.006"]
    stdout = run(build(source, tmp_path / "ldc", *flags))
    assert "centre line within" in stdout and "of Ghia et al." in stdout, stdout
