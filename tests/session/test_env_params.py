"""A parameter tuned through the environment alone (`[file.env]`, no #define): no `-D`, one
compile for all its values, and its winning environment written where a script can read it;
and the time breakdown that books timeouts apart and names no GPU for a host program."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.builder import CompilerCommand
from annotune.builder.variants import variant_source
from annotune.emit import header_env
from annotune.results.database import Database
from annotune.run.program import TIMING_VARIABLES, RunSpec
from annotune.session.options import TuneArguments, TuneOptions, tune_options
from annotune.session.tuner import tune

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")

# The more threads the environment gives it, the faster; X is a macro it reads.
THREADED = """#include <stdio.h>
#include <stdlib.h>
#ifndef X
#define X 1 // @tune values(1, 2)
#endif
int main(void) {
  const char *threads = getenv("OMP_NUM_THREADS");
  printf("annotune-time-ms: %d\\n", 120 / (threads ? atoi(threads) : 1) + X);
  return 0;
}
"""

CONFIG = (
    '[[file]]\npath = "t.c"\n'
    '[file.params]\nTHREADS = { domain = "values(1, 2, 3)", default = 1 }\n'
    '[file.env]\nOMP_NUM_THREADS = "{THREADS}"\nOMP_PROC_BIND = "close"\n'
)

# gcc that logs its arguments (but not those of the preprocessor runs that check a compile).
LOGGING_GCC = """#!/bin/sh
case " $* " in *" -E "*) exec gcc "$@";; esac
echo "$*" >> "$COMPILE_LOG"
exec gcc "$@"
"""


@pytest.fixture
def no_timing_environment(monkeypatch):
    for name in TIMING_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def threaded(tmp_path, no_timing_environment) -> Path:
    (tmp_path / "t.c").write_text(THREADED)
    (tmp_path / "annotune.toml").write_text(CONFIG)
    return tmp_path / "t.c"


def test_a_parameter_set_only_through_the_environment_gets_no_define(threaded):
    problem = read_problem(threaded)
    assert variant_source(problem, {"X": 2, "THREADS": 3}).defines == ("-DX=2",)
    # Once the code reads it too (omp_set_num_threads(THREADS)), it needs its -D again.
    threaded.write_text(THREADED.replace("+ X);", "+ X + 0 * THREADS);"))
    problem = read_problem(threaded)
    assert variant_source(problem, {"X": 2, "THREADS": 3}).defines == ("-DX=2", "-DTHREADS=3")


def test_values_that_differ_only_in_the_environment_are_one_compile(
    threaded, tmp_path, monkeypatch
):
    compiler = tmp_path / "logging-gcc"
    compiler.write_text(LOGGING_GCC)
    compiler.chmod(compiler.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "compiles.log"
    monkeypatch.setenv("COMPILE_LOG", str(log))
    problem = read_problem(threaded)
    command = f"{compiler} {{source}} -o {{output}}"
    given = TuneArguments(budget=6, recheck=0, warmup=0, jobs=3, compiler=command)
    report = tune(problem, tune_options(problem, given))
    assert report.evaluations == 6 and report.invalid == 0
    compiles = [line.split() for line in log.read_text().splitlines() if " -o " in line]
    defines = sorted([w for w in words if w.startswith("-D")] for words in compiles)
    assert defines == [["-DX=1"], ["-DX=2"]]  # one compile per binary, no -DTHREADS
    with Database(report.db_path) as db:
        (study,) = db.studies()
        times = {(m.params["THREADS"], m.params["X"]): m.time for m in db.measurements(study)}
    assert times == {(t, x): 120 // t + x for t in (1, 2, 3) for x in (1, 2)}  # each its env
    assert report.best.params == {"X": 1, "THREADS": 3}
    text = report.header.read_text()
    assert '#define ANNOTUNE_ENV_OMP_NUM_THREADS "3"' in text
    assert header_env(text, "h") == {"OMP_NUM_THREADS": "3", "OMP_PROC_BIND": "close"}


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


def test_a_timed_out_run_is_booked_as_timed_out_not_start_up(tmp_path):
    (tmp_path / "slow.c").write_text(SLOW_WHEN_X_IS_3)
    options = TuneOptions(
        strategy="exhaustive",
        budget=3,
        device="cpu-Test Processor",
        jobs=1,
        recheck=0,
        compiler=CompilerCommand.parse("gcc"),
        run=RunSpec(timeout=0.5, warmup=0, repeats=1, max_repeats=1),
    )
    report = tune(read_problem(tmp_path / "slow.c"), options)
    assert [f.status for f in report.failures] == ["timeout"]
    wall = report.wall_breakdown
    assert wall.timeout >= 1.0  # killed at 0.5 s, and once more (a timeout is retried once)
    assert wall.startup < 0.5  # two quick runs' start-up
    parts = (wall.compile, wall.startup, wall.timeout, wall.run, wall.search, wall.recheck)
    assert sum(parts) + wall.other == pytest.approx(wall.wall, rel=0.02, abs=0.05)
    assert wall.busy_on == "host"  # a CPU tune: its timed regions kept no GPU busy
    assert report.to_json()["wall_breakdown"]["timeout"] == round(wall.timeout, 3)
