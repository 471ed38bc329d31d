"""Tunes that meet other tunes and hostile places: two processes tuning one study share the
work, a tune killed or interrupted mid-run leaves the database whole and its claims free, and
a read-only checkout tunes into the user's cache."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.builder import CompilerCommand
from annotune.results.studies import export_study, read_study
from annotune.results.workspace import workspace
from annotune.run.program import RunSpec
from annotune.session.compile_only import compile_configurations
from annotune.session.options import TuneOptions
from annotune.session.tuner import tune

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")

REPO = Path(__file__).resolve().parents[2]

ARGS = ["--device", "test-device", "--strategy", "exhaustive", "--recheck", "0", "--json"]
ARGS += ["--warmup", "0", "--repeats", "1", "--max-repeats", "1", "--timeout", "10"]


def annotune(workdir: Path, *args: str, **variables: str) -> subprocess.Popen:
    """`annotune tune program.c ...` in a process of its own, in `workdir`, with these extra
    environment variables; its program's runs append to workdir/runs.log."""
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")]))
    env = {**os.environ, **variables, "RUNS": str(workdir / "runs.log"), "PYTHONPATH": path}
    return subprocess.Popen(
        [sys.executable, "-m", "annotune", "tune", "program.c", *ARGS, *args],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def runs(workdir: Path) -> list[list[str]]:
    log = workdir / "runs.log"
    return [line.split() for line in log.read_text().splitlines()] if log.exists() else []


def stored(workdir: Path, table: str = "measurements") -> list[tuple]:
    with sqlite3.connect(workdir / ".annotune" / "results.db") as conn:
        column = "params_json" if table == "measurements" else "config_key, pid"
        return conn.execute(f"SELECT {column} FROM {table}").fetchall()


SHARED = """#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#ifndef X
#define X 1 // @tune range(1, 6)
#endif
int main(void) {
  /* Each run logs which tune ran it. The default runs long: the second tune starts while
     the first measures it. */
  FILE *log = fopen(getenv("RUNS"), "a");
  fprintf(log, "%d %d\\n", X, (int)getppid());
  fclose(log);
  usleep(X == 1 ? 1200000 : 100000);
  printf("annotune-time-ms: %d\\n", 100 - X);
  return 0;
}
"""


def test_two_tunes_of_one_study_share_the_work_and_agree(tmp_path):
    (tmp_path / "program.c").write_text(SHARED)
    tunes = [annotune(tmp_path, "--budget", "6", "--jobs", "2") for _ in range(2)]
    reports = []
    for process in tunes:
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        reports.append(json.loads(out))
    ran = runs(tmp_path)
    configurations = [x for x, _ in ran]
    assert sorted(configurations, key=int) == [str(x) for x in range(1, 7)]  # each once
    assert {tuner for _, tuner in ran} <= {str(p.pid) for p in tunes}
    assert [r["evaluations"] for r in reports] == [6, 6]
    assert reports[0]["best"] == reports[1]["best"]
    assert reports[0]["best"]["params"] == {"X": 6}
    # They ran at once (the default's long run sees to it): one took the other's results.
    assert any("measured by another annotune" in n for r in reports for n in r["notes"])
    assert stored(tmp_path, "claims") == []


KILLED = """#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
#ifndef X
#define X 1 // @tune range(1, 5)
#endif
int main(void) {
  FILE *log = fopen(getenv("RUNS"), "a");
  fprintf(log, "%d\\n", X);
  fclose(log);
  if (X == 3 && getenv("INTERRUPT")) kill(getppid(), SIGINT);  /* Ctrl-C */
  if (X == 3) usleep(1500000);  /* the tune is killed while this runs */
  printf("annotune-time-ms: %d\\n", 10 + X);
  return 0;
}
"""


def wait_for_run(process: subprocess.Popen, workdir: Path, x: str) -> None:
    deadline = time.monotonic() + 30
    while [x] not in runs(workdir):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_tune_killed_mid_run_leaves_a_whole_database_and_a_claim_taken_over(tmp_path):
    (tmp_path / "program.c").write_text(KILLED)
    first = annotune(tmp_path, "--budget", "5", "--jobs", "1")
    wait_for_run(first, tmp_path, "3")
    first.send_signal(signal.SIGKILL)
    first.communicate()
    before = [x for (x,) in runs(tmp_path)]
    with sqlite3.connect(tmp_path / ".annotune" / "results.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    measured = sorted(json.loads(params)["X"] for (params,) in stored(tmp_path))
    assert measured == sorted(int(x) for x in before[:-1]) and before[-1] == "3"
    # Left by the dead tune: the one it was running and the rest of its batch, none measured.
    claims = stored(tmp_path, "claims")
    assert ('{"X":3}', first.pid) in claims and {pid for _, pid in claims} == {first.pid}
    assert not {json.loads(params)["X"] for params, _ in claims} & set(measured)

    second = annotune(tmp_path, "--budget", "5", "--jobs", "1")
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    report = json.loads(out)
    assert (report["evaluations"], report["reused"]) == (5, len(measured))
    assert [x for (x,) in runs(tmp_path)].count("3") == 2  # the dead tune's claim taken over
    assert stored(tmp_path, "claims") == []


def test_ctrl_c_mid_run_releases_the_claim(tmp_path):
    (tmp_path / "program.c").write_text(KILLED)
    process = annotune(tmp_path, "--budget", "5", "--jobs", "1", INTERRUPT="1")
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert json.loads(out)["interrupted"] is True
    assert stored(tmp_path, "claims") == []  # another tune may measure X=3 at once
    assert sorted(json.loads(params)["X"] for (params,) in stored(tmp_path)) == [1, 2]


def test_a_read_only_checkout_tunes_into_the_users_cache_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    shutil.copy(REPO / "tests" / "data" / "synthetic" / "synthetic.c", checkout)
    problem = read_problem(checkout / "synthetic.c")
    checkout.chmod(0o555)
    real = os.access  # root writes where the bits say no: the OS is asked, and says no
    monkeypatch.setattr(
        os,
        "access",
        lambda p, mode, **kw: not (mode & os.W_OK and Path(p) == checkout) and real(p, mode, **kw),
    )
    try:
        options = TuneOptions(
            strategy="exhaustive",
            budget=3,
            device="test-device",
            compiler=CompilerCommand.parse("gcc"),
            run=RunSpec(timeout=1.0, warmup=0, repeats=1, max_repeats=1),
            recheck=0,
            out_dir=tmp_path / "tuned",
        )
        report = tune(problem, options)
        place = workspace(problem.source)
        assert place.directory.is_relative_to(tmp_path / "cache" / "annotune")
        assert report.db_path == place.db_path and place.cache_dir.is_dir()
        assert report.warnings[0] == place.warning
        assert f"{checkout} is read-only" in place.warning
        assert sorted(p.name for p in checkout.iterdir()) == ["synthetic.c"]
        assert len(read_study(problem.source).measurements) == 3  # explain finds them
        assert len(export_study(problem, tmp_path / "t4.json").measurements) == 3  # export too
        assert tune(problem, options).reused == 3
        compiled = compile_configurations(problem, options)  # --compile-only: the same cache
        assert compiled.warnings == (place.warning,) and compiled.cached >= 1  # the default
    finally:
        checkout.chmod(0o755)
