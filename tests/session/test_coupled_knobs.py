"""A knob whose number is written again where no variant rewrites it (the grid's round-up of a
block of 256) is tuned only with the output checked or the user's `independent = true`: else a
variant that launches less work would be measured as a speedup."""

from __future__ import annotations

import pytest

from annotune.run.device import gpu_name

SOURCE = """\
__global__ void rotate(float *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = -x[i]; }
int main() { int n = 1 << 20; float *x = 0;
  rotate<<<(n + 255) / 256, 256>>>(x, n);
  return 0; }
"""

pytestmark = pytest.mark.skipif(gpu_name() is not None, reason="a GPU would run the tune")


def project(tmp_path, monkeypatch, knob: str, check: str = "") -> None:
    (tmp_path / "rot.cu").write_text(SOURCE)
    (tmp_path / "annotune.toml").write_text(
        f'[[file]]\npath = "rot.cu"\n[file.params]\nBS = {{ domain = "pow2(64, 512)", '
        f'launch = "rotate"{knob} }}\n{check}'
    )
    monkeypatch.chdir(tmp_path)


def test_a_coupled_launch_without_a_check_is_refused_before_anything_builds(
    cli, tmp_path, monkeypatch
):
    project(tmp_path, monkeypatch, "")
    done = cli("tune", "rot.cu", "--budget", "2")
    assert done.exit_code == 2, done.stderr
    assert "BS is 256 here, and the launch's grid `( n + 255 ) / 256` at" in done.stderr
    assert "[file.check]" in done.stderr and "independent = true" in done.stderr
    assert done.stderr.startswith("rot.cu:4:29: error: ")  # at the block's literal
    assert not (tmp_path / ".annotune" / "cache").exists()  # nothing was compiled


@pytest.mark.parametrize(
    ("knob", "check"),
    [(", independent = true", ""), ("", '[file.check]\nexpect = "PASS"\n')],
)
def test_a_check_or_the_users_word_lets_it_tune(cli, tmp_path, monkeypatch, knob, check):
    project(tmp_path, monkeypatch, knob, check)
    done = cli("tune", "rot.cu", "--budget", "2")
    assert "no variant changes" not in done.stderr
    assert done.exit_code == 1 and "no CUDA GPU" in done.stderr  # the next stop, on this machine
