"""`tune --mode kernel --compile-only` evaluates each configuration's launch as a launch would
(issue 46, points 6 and 8): a grid that divides by zero, a block of 2,048 threads, more shared
memory than the architecture gives a block, or a block needing more registers than a
multiprocessor has (by the compiler's report) makes that configuration invalid, counted and
shown with its reason; none able to launch is exit 2 at the declaration. The compiling tests
skip only where NVRTC (and nvcc, its fallback) is missing."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.builder.nvrtc import nvrtc_unavailable
from annotune.core.diagnostics import AnnotuneError
from annotune.session.compile_only import compile_configurations
from annotune.session.options import TuneOptions

needs_nvrtc = pytest.mark.skipif(
    shutil.which("nvcc") is None or bool(nvrtc_unavailable()),
    reason=nvrtc_unavailable() or "nvcc is not installed",
)

SCALE = """\
#define N (1 << 20)
#define TILE 128

__global__ void scale(const float *in, float *out, int n, float a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * in[i];
}

int main() { return 0; }
"""


def vendored(tmp_path: Path, grid: str, block: str = "TILE", domain: str = "pow2(32, 512)") -> Path:
    """scale.cu, its knob and kernel declared in the config beside it (line 9: `grid`)."""
    source = tmp_path / "scale.cu"
    source.write_text(SCALE)
    (tmp_path / "annotune.toml").write_text(
        textwrap.dedent(
            f"""\
            [[file]]
            path = "scale.cu"

            [file.params]
            TILE = "{domain}"

            [[file.kernel]]
            name = "scale"
            grid = "{grid}"
            block = "{block}"
            args = ["in(N)", "out(N)", "N", "2.0"]
            """
        )
    )
    return source


def test_a_grid_dividing_by_zero_for_every_configuration_is_an_error_at_the_declaration(
    cli, tmp_path
):
    source = vendored(tmp_path, "N / (TILE - TILE)")
    result = cli("tune", source, "--mode", "kernel", "--compile-only", "--budget", "3")
    assert result.exit_code == 2, result.stdout
    config = tmp_path / "annotune.toml"
    assert f"{config}:9:9: error: kernel 'scale' cannot launch for all 3 configurations " in (
        result.stderr
    )
    assert "grid(...) is undefined in C here (N / (TILE - TILE))" in result.stderr
    assert 'grid = "N / (TILE - TILE)"' in result.stderr  # the config's line, shown
    assert "compiled" not in result.stdout
    assert not list(tmp_path.glob(".annotune/**/*.cubin"))  # nothing was compiled


def test_every_configuration_is_refused_before_anything_is_compiled(tmp_path):
    problem = read_problem(vendored(tmp_path, "N / (TILE - TILE)"))
    options = TuneOptions(budget=None, jobs=1, mode="kernel", cache_dir=tmp_path / "cache")
    with pytest.raises(AnnotuneError, match="cannot launch for all 5 configurations") as raised:
        compile_configurations(problem, options, arch="sm_90")
    where = raised.value.location
    assert where is not None and (Path(where.file).name, where.line, where.column) == (
        "annotune.toml",
        9,
        9,
    )
    assert not (tmp_path / "cache").exists()


@needs_nvrtc
def test_a_grid_dividing_by_zero_for_the_default_only_invalidates_it_alone(cli, tmp_path):
    source = vendored(tmp_path, "N / TILE / (TILE != 128)")  # the default, 128, divides by 0
    args = ("tune", source, "--mode", "kernel", "--compile-only", "--budget", "5", "--jobs", "2")
    result = cli(*args)
    assert result.exit_code == 0, result.stderr
    assert "compiled      4 of 5 configurations (5 legal)" in result.stdout
    assert "0 failed, 1 cannot launch on sm_75," in result.stdout
    assert (
        "invalid       1 launch_error, e.g. {'TILE': 128}: grid(...) is undefined in C here "
        "(N / TILE / (TILE != 128))"
    ) in result.stdout
    report = json.loads(cli(*args, "--json").stdout)
    assert (report["compiled"], report["failed"], report["cannot_launch"]) == (4, 0, 1)
    (kind,) = report["failures"]
    assert kind["status"] == "launch_error" and kind["params"] == {"TILE": 128}
    assert report["kernels"]["_Z5scalePKfPfif"]["compiled"] == 4  # the default never compiled


@needs_nvrtc
def test_a_block_of_2048_threads_is_invalid_with_its_reason(tmp_path):
    problem = read_problem(
        vendored(tmp_path, "(N + TILE - 1) / TILE", domain="values(128, 1024, 2048)")
    )
    options = TuneOptions(budget=None, jobs=2, mode="kernel", cache_dir=tmp_path / "cache")
    report = compile_configurations(problem, options, arch="sm_90")
    assert (report.compiled, report.failed, report.cannot_launch) == (2, 0, 1)
    (kind,) = report.failures
    assert kind.status == "launch_error" and kind.params == {"TILE": 2048}
    assert kind.error == "a block of 2048 threads: at most 1024 a block"


@needs_nvrtc
def test_dynamic_shared_memory_beyond_the_architectures_is_invalid(tmp_path):
    source = vendored(tmp_path, "(N + TILE - 1) / TILE", domain="values(64, 128)")
    config = tmp_path / "annotune.toml"
    config.write_text(config.read_text() + 'shared = "TILE * 1024"\n')  # 64 or 128 KB
    problem = read_problem(source)
    options = TuneOptions(budget=None, jobs=2, mode="kernel", cache_dir=tmp_path / "cache")
    on_h100 = compile_configurations(problem, options, arch="sm_90")
    assert (on_h100.compiled, on_h100.cannot_launch) == (2, 0)
    on_rtx = compile_configurations(problem, options, arch="sm_86")
    assert (on_rtx.compiled, on_rtx.cannot_launch) == (1, 1)
    (kind,) = on_rtx.failures
    assert kind.params == {"TILE": 128} and kind.error == (
        "131072 bytes of dynamic shared memory: sm_86 allows a block at most 101376 bytes"
    )


# A kernel of 168 to 184 registers (NVRTC 13, sm_75 to sm_90): blocks of 512 or 1,024 threads
# need more registers than a multiprocessor has.
HEAVY = """\
#define N 4096
#define R 160
#ifndef BLOCK
#define BLOCK 256 // @tune values(256, 512, 1024)
#endif
#pragma annotune kernel heavy grid(N / BLOCK) block(BLOCK) args(in(N * R), out(N), N)
__global__ void heavy(const float *in, float *out, int n) {
  float v[R];
  int t = blockIdx.x * BLOCK + threadIdx.x;
#pragma unroll
  for (int i = 0; i < R; i++) v[i] = in[t + i * n];
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < R; i++)
#pragma unroll
    for (int j = i; j < R; j += 37) s = fmaf(v[i], v[j], s * v[(i + j) % R]);
  out[t] = s;
}
int main() { return 0; }
"""


@needs_nvrtc
def test_a_block_needing_more_registers_than_a_multiprocessor_has_is_invalid(tmp_path):
    source = tmp_path / "heavy.cu"
    source.write_text(HEAVY)
    problem = read_problem(source)
    options = TuneOptions(budget=None, jobs=2, mode="kernel", cache_dir=tmp_path / "cache")
    report = compile_configurations(problem, options, arch="sm_90")
    (kernel,) = report.kernels
    registers = kernel.registers[0]
    assert registers > 128, "the kernel no longer needs many registers: make it need more"
    assert (report.compiled, report.failed, report.cannot_launch) == (1, 0, 2)
    assert kernel.compiled == 3  # the refused ones compiled: their registers say why
    (kind,) = report.failures  # one kind: the same reason, numbers aside
    assert kind.count == 2 and kind.status == "launch_error"
    threads = kind.params["BLOCK"]
    assert threads in (512, 1024)
    assert kind.error.startswith(f"a block of {threads} threads of {registers} registers needs ")
    most = 65536 // (-(-registers * 32 // 256) * 256) // 4 * 4 * 32  # 4 sub-partitions' warps
    assert 256 <= most < 512
    assert f"a multiprocessor has 65536, enough for blocks of at most {most} threads" in kind.error


@needs_nvrtc
def test_no_block_the_registers_allow_is_an_error_at_the_block_clause(cli, tmp_path):
    source = tmp_path / "heavy.cu"
    source.write_text(HEAVY.replace("values(256, 512, 1024)", "values(512, 1024)"))
    source.write_text(source.read_text().replace("#define BLOCK 256", "#define BLOCK 512"))
    result = cli("tune", source, "--mode", "kernel", "--compile-only", "--arch", "sm_90")
    assert result.exit_code == 2, result.stdout
    column = HEAVY.splitlines()[5].index("block(") + 1
    assert f"{source}:6:{column}: error: kernel 'heavy' cannot launch for all 2 " in result.stderr
    assert "registers needs" in result.stderr and "a multiprocessor has 65536" in result.stderr
