"""`annotune tune --mode kernel` is never quietly program mode: no declared kernel, or
`--kernel` naming one that is not declared, is an error before anything is compiled.

The compile-only cases go through `compile_configurations`; the tune cases need the session to
call `annotate.kernel.chosen_kernel` before it checks for a GPU (issue 36, point 2).
"""

from __future__ import annotations

import pytest

SOURCE = """\
#define BLOCK 64 // @tune pow2(32, 256)
__global__ void k(float *a) { a[threadIdx.x] = 1.0f; }
int main() { k<<<1, BLOCK>>>(0); return 0; }
"""
DECLARED = "#pragma annotune kernel k grid(1) block(BLOCK) args(out(BLOCK))\n" + SOURCE


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(SOURCE)
    return path


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ((), "kernel mode needs a declared kernel, and k.cu declares none"),
        (("--kernel", "nope"), "--kernel nope: kernel mode needs a declared kernel"),
    ],
)
def test_compile_only_in_kernel_mode_without_a_kernel(cli, source, extra, message):
    result = cli("tune", source, "--mode", "kernel", *extra, "--compile-only", "--arch", "sm_90")
    assert result.exit_code == 2, result.stdout
    assert message in result.stderr
    assert "[[file.kernel]]" in result.stderr  # the hint: how code one must not edit declares it
    assert not (source.parent / ".annotune").exists()  # nothing compiled


def test_compile_only_with_a_kernel_that_is_not_declared(cli, source):
    source.write_text(DECLARED)
    result = cli("tune", source, "--mode", "kernel", "--kernel", "nope", "--compile-only")
    assert result.exit_code == 2, result.stdout
    assert "--kernel nope: no such kernel is declared" in result.stderr
    assert "declared: k at " in result.stderr
    assert not (source.parent / ".annotune").exists()


@pytest.mark.parametrize("extra", [(), ("--kernel", "nope")])
def test_a_tune_in_kernel_mode_without_a_kernel_says_so_before_the_gpu(
    cli, source, monkeypatch, extra
):
    """Before the check for a GPU, so the message is the same on every machine. (Needs the
    session to call `chosen_kernel` first in `tune`.)"""
    monkeypatch.setattr("annotune.run.device.gpu_name", lambda: None, raising=False)
    result = cli("tune", source, "--mode", "kernel", *extra, "--budget", "2")
    assert result.exit_code == 2, result.stdout
    assert "kernel mode needs a declared kernel" in result.stderr
    assert "no CUDA GPU" not in result.stderr
