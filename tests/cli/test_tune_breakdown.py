"""`annotune tune`'s time line: timed-out runs under their own heading, and no GPU named when
the tune measured a host program on a CPU."""

from __future__ import annotations

import shutil

import pytest

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")

SLOW_WHEN_X_IS_3 = """#include <stdio.h>
#include <unistd.h>
#ifndef X
#define X 1 // @tune values(1, 2, 3)
#endif
int main(void) {
  if (X == 3) sleep(5);
  printf("annotune-time-ms: %d\\n", 10 + X);
  return 0;
}
"""


def test_the_time_line_books_timeouts_apart_and_names_no_gpu_on_a_cpu(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "slow.c").write_text(SLOW_WHEN_X_IS_3)
    result = cli(
        "tune", "slow.c", "--device", "cpu-AMD EPYC 7763 64-Core Processor", "--budget", "3",
        "--timeout", "0.5", "--repeats", "1", "--max-repeats", "1", "--warmup", "0",
        "--recheck", "0", "--compiler", "gcc", "--jobs", "1",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    line = next(line for line in result.stdout.splitlines() if line.startswith("time "))
    timed_out = float(line.split("timed out ")[1].split()[0])
    assert timed_out >= 1.0  # killed at 0.5 s, twice (a timeout is tried once more)
    startup = float(line.split("start-up ")[1].split()[0])
    assert startup < timed_out
    assert "GPU" not in line and "in timed regions" in line
