"""`annotune build --per-arch`: every committed per-GPU header in one, each GPU placed by its
compute capability from the GPU tables; bad input is a clear message, never a traceback."""

from __future__ import annotations

import os
import re
import shutil

import pytest

from annotune.annotate import read_problem
from annotune.emit import render_header, tuned_header_path

SOURCE = """\
#ifndef BLOCK_X
#define BLOCK_X 32 // @tune pow2(16, 256)
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 4 // @tune values(1, 2, 4, 8)
#endif

__global__ void fill(int *x) { x[blockIdx.x * BLOCK_X * BLOCK_Y] = BLOCK_X; }

int main() {
  int *x = 0;
  fill<<<8, dim3(BLOCK_X, BLOCK_Y)>>>(x);
  return 0;
}
"""
A100 = "NVIDIA A100-PCIE-40GB"
H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture
def source(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "fill.cu"
    path.write_text(SOURCE)
    return path


def tune(source, device, block_x, *, measurements=30, predicted=False, out_dir=None):
    """Commit the header `annotune tune` writes for `device`."""
    problem = read_problem(source)
    text = render_header(
        problem,
        {"BLOCK_X": block_x, "BLOCK_Y": 2},
        device=device,
        space_size=20,
        measurements=measurements,
        default_time=1.0,
        best_time=0.5,
        tool_version="0.1.0",
        predicted=predicted,
    )
    path = tuned_header_path(source, device, out_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def branches(text: str) -> dict[str, str]:
    """`#if` condition of the device passes -> BLOCK_X there."""
    found = re.findall(
        r"#(?:el)?if (__CUDA_ARCH__ >= \d+)\n/\*.*\*/\n#ifndef BLOCK_X\n#define "
        r"BLOCK_X (\S+)",
        text,
    )
    return dict(found)


def test_every_gpus_header_in_one_placed_by_capability(cli, source, tmp_path):
    tune(source, A100, 128)
    tune(source, H100, 64)
    out = tmp_path / "build" / "fill.arch.h"
    data = cli.json("build", source, "--per-arch", "-o", out, "--json")
    assert [(a["arch"], a["device"], a["kind"]) for a in data["architectures"]] == [
        (900, H100, "measured"),
        (800, A100, "measured"),
    ]
    assert data["changed"] is True and data["host"] is None
    text = out.read_text()
    assert branches(text) == {"__CUDA_ARCH__ >= 900": "64", "__CUDA_ARCH__ >= 800": "128"}
    assert "annotune_fill_params_for(int major, int minor)" in text

    before = os.stat(out).st_mtime_ns
    again = cli("build", source, "--per-arch", "-o", out)
    assert again.exit_code == 0 and again.stderr == "" and again.stdout == ""
    assert os.stat(out).st_mtime_ns == before  # unchanged: make rebuilds nothing


def test_out_dir_host_device_and_a_tie_said(cli, source, tmp_path):
    headers = tmp_path / "headers"
    tune(source, A100, 128, measurements=10, out_dir=headers)
    tune(source, "NVIDIA A30", 16, measurements=90, predicted=True, out_dir=headers)
    out = tmp_path / "fill.arch.h"
    result = cli(
        "build", source, "--per-arch", "--out-dir", headers, "--host-device", A100, "-o", out
    )
    assert result.exit_code == 0, result.stderr
    assert "sm_80 has 2 tuned GPUs: using 'NVIDIA A100-PCIE-40GB'" in result.stderr
    text = out.read_text()
    assert f"Host pass: {A100} (--host-device)." in text
    assert (
        "#if !defined(__CUDA_ARCH__)\n/* Host pass: NVIDIA A100-PCIE-40GB (--host-device). */\n"
        "#ifndef BLOCK_X\n#define BLOCK_X 128" in text
    )


def test_a_gpu_in_no_table_takes_its_capability_from_its_name_with_a_warning(cli, source, tmp_path):
    tune(source, "NVIDIA GeForce RTX 5095", 256)  # no such GPU: Blackwell by its name
    tune(source, "Mystery Accelerator 9", 16)  # no vendor, no architecture: left out
    out = tmp_path / "fill.arch.h"
    result = cli("build", source, "--per-arch", "-o", out)
    assert result.exit_code == 0, result.stderr
    assert (
        "'NVIDIA GeForce RTX 5095'" in result.stderr
        and "12.0, comes from its name" in result.stderr
    )
    assert "'Mystery Accelerator 9', which has no known NVIDIA compute capability" in result.stderr
    assert branches(out.read_text()) == {"__CUDA_ARCH__ >= 1200": "256"}


def test_a_users_gpu_table_gives_the_capability(cli, source, tmp_path):
    tune(source, "Lab Card X", 48)
    table = tmp_path / "gpus.toml"
    table.write_text('[[gpu]]\nname = "Lab Card X"\nvendor_nvidia = 1\ncompute_capability = 8.9\n')
    out = tmp_path / "fill.arch.h"
    result = cli("build", source, "--per-arch", "--gpus", table, "-o", out)
    assert result.exit_code == 0, result.stderr
    assert "Lab Card X" not in result.stderr  # the user said its capability: nothing guessed
    assert branches(out.read_text()) == {"__CUDA_ARCH__ >= 890": "48"}


def test_no_tuned_header_at_all_writes_the_defaults_with_a_warning(cli, source, tmp_path):
    out = tmp_path / "fill.arch.h"
    result = cli("build", source, "--per-arch", "-o", out)
    assert result.exit_code == 0, result.stderr
    assert "no tuned header of fill.cu" in result.stderr and "defaults" in result.stderr
    text = out.read_text()
    assert branches(text) == {} and "annotune_fill_params_current(void)" in text


def test_a_foreign_header_is_an_error_naming_it(cli, source, tmp_path):
    foreign = tuned_header_path(source, A100)
    foreign.parent.mkdir(parents=True)
    foreign.write_text("#define BLOCK_X 64\n")
    out = tmp_path / "fill.arch.h"
    result = cli("build", source, "--per-arch", "-o", out)
    assert result.exit_code == 2
    assert f"{foreign}:1:1: error: {foreign} is not a tuned header written by annotune" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr and not out.exists()


def test_a_value_the_compiler_would_not_see_is_refused(cli, data_dir, tmp_path, monkeypatch):
    shutil.copytree(data_dir / "stencil", tmp_path / "src")
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "src" / "stencil.cu"
    problem = read_problem(source)
    text = render_header(
        problem,
        {"BLOCK_X": 64, "BLOCK_Y": 8, "UNROLL": 3},  # BLOCK_Y is an unguarded #define
        device=H100,
        space_size=42,
        measurements=5,
        default_time=None,
        best_time=None,
        tool_version="0.1.0",
    )
    header = tuned_header_path(source, H100)
    header.parent.mkdir(parents=True)
    header.write_text(text)
    result = cli("build", source, "--per-arch", "-o", tmp_path / "out.h")
    assert result.exit_code == 2
    assert "stencil.cuh:8:9: error: BLOCK_Y is tuned to 8" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--per-arch", "--device", A100], "--device picks one"),
        (["--host-device", A100], "--host-device goes with --per-arch"),
        (["--per-arch", "--shadow-dir", "shadow"], "cannot go with --shadow-dir"),
        (["--per-arch", "--host-device", "NVIDIA V100"], "none of the tuned GPUs"),
    ],
)
def test_options_that_do_not_go_together(cli, source, tmp_path, args, message):
    tune(source, A100, 128)
    result = cli("build", source, *args, "-o", tmp_path / "out.h")
    assert result.exit_code == 2 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_a_source_that_is_not_cuda_is_refused(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "matmul.c"
    source.write_text(
        "#ifndef TILE\n#define TILE 8 // @tune values(4, 8, 16)\n#endif\n"
        "int main(void) { return TILE; }\n"
    )
    result = cli("build", source, "--per-arch", "-o", tmp_path / "out.h")
    assert result.exit_code == 2
    assert "--per-arch is for CUDA sources, and matmul.c is c" in result.stderr
    assert "--device NAME" in result.stderr
