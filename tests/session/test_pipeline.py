"""Compiles run ahead of the runs: a configuration is measured as soon as its compile is done,
and the report splits the tune's wall time into compile, start-up, run and search."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.builder import CompilerCommand
from annotune.run.program import RunSpec
from annotune.session.options import TuneOptions
from annotune.session.tuner import tune

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")

SOURCE = r"""#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifndef X
#define X 1 // @tune range(1, 5)
#endif
int main(void) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  FILE *log = fopen(getenv("PIPELINE_LOG"), "a");
  fprintf(log, "ran %d %.6f\n", X, now.tv_sec + now.tv_nsec * 1e-9);
  fclose(log);
  printf("annotune-time-ms: %d\n", 10 + X);
  return 0;
}
"""

# gcc, but the compile of X=2 takes two seconds more; each compile logs when it ends.
SLOW_GCC = """#!/bin/sh
x=0
for arg in "$@"; do
  case "$arg" in -DX=*) x="${arg#-DX=}";; esac
done
case " $* " in *" -E "*) exec gcc "$@";; esac
if [ "$x" = 2 ]; then sleep 2; fi
gcc "$@" || exit $?
echo "compiled $x $(date +%s.%N)" >> "$PIPELINE_LOG"
"""


def events(log: Path) -> dict[tuple[str, int], float]:
    """The first time each configuration was compiled and ran."""
    found: dict[tuple[str, int], float] = {}
    for line in log.read_text().splitlines():
        what, x, when = line.split()
        found.setdefault((what, int(x)), float(when))
    return found


def test_a_configuration_is_measured_while_a_slower_one_still_compiles(tmp_path, monkeypatch):
    (tmp_path / "pipeline.c").write_text(SOURCE)
    compiler = tmp_path / "slow-gcc"
    compiler.write_text(SLOW_GCC)
    compiler.chmod(compiler.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "pipeline.log"
    monkeypatch.setenv("PIPELINE_LOG", str(log))
    options = TuneOptions(
        strategy="exhaustive",
        budget=5,  # the default, then [2, 3, 4] (row 0 is the default, known), then [5]
        device="test-device",
        jobs=2,
        recheck=0,
        compiler=CompilerCommand.parse(f"{compiler} -O1 {{source}} -o {{output}}"),
        run=RunSpec(timeout=5.0, warmup=0, repeats=1, max_repeats=1),
    )
    report = tune(read_problem(tmp_path / "pipeline.c"), options)
    assert report.evaluations == 5 and report.invalid == 0
    seen = events(log)
    # X=3 compiled next to X=2 and ran before X=2's compile ended: the runs did not wait for
    # the whole batch to be built.
    assert seen[("ran", 3)] < seen[("compiled", 2)]
    assert seen[("ran", 4)] < seen[("ran", 2)]

    wall = report.wall_breakdown
    assert wall is not None
    assert wall.compiled >= 2.0  # the slow compile, counted in the pool's time
    assert 0 < wall.compile < wall.compiled  # waited for part of it only
    parts = (wall.compile, wall.startup, wall.run, wall.search, wall.recheck, wall.other)
    assert all(part >= 0 for part in parts)
    assert sum(parts) == pytest.approx(wall.wall, rel=0.02, abs=0.05)
    assert wall.recheck == 0.0
    assert wall.gpu == pytest.approx(sum(10 + x for x in range(1, 6)) / 1000, rel=0.01)
    assert set(report.to_json()["wall_breakdown"]) == {
        "wall", "compile", "startup", "timeout", "run", "search", "recheck", "other", "compiled",
        "gpu", "busy_on",
    }  # fmt: skip


def test_the_cli_prints_where_the_time_went(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from annotune.cli.app import app

    (tmp_path / "pipeline.c").write_text(SOURCE)
    monkeypatch.setenv("PIPELINE_LOG", str(tmp_path / "pipeline.log"))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        app,
        ["tune", "pipeline.c", "--budget", "3", "--compiler", "gcc", "--device", "t",
         "--repeats", "1", "--max-repeats", "1", "--warmup", "0"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if line.startswith("time "))
    for part in ("compile", "in the pool", "start-up", "run", "search", "final check", "other"):
        assert part in line
    assert os.path.exists(tmp_path / "pipeline.log")
