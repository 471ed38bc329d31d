"""The tuning loop on a program whose timings and failures are known in advance."""

from __future__ import annotations

import shutil
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.builder import CompilerCommand
from annotune.core.records import Measurement
from annotune.results.database import Database, StudyKey, default_db_path
from annotune.run.program import TIMING_VARIABLES, RunSpec
from annotune.session.options import TuneArguments, TuneOptions, tune_options
from annotune.session.study import GIVE_UP_AFTER
from annotune.session.tuner import tune
from annotune.transfer.features import lookup

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")


@pytest.fixture
def workdir(tmp_path, data_dir, monkeypatch):
    shutil.copy(data_dir / "synthetic" / "synthetic.c", tmp_path / "synthetic.c")
    monkeypatch.setenv("ANNOTUNE_TEST_LOG", str(tmp_path / "runs.log"))
    return tmp_path


def options(**overrides) -> TuneOptions:
    base = dict(
        strategy="exhaustive",
        budget=26,
        device="test-device",
        compiler=CompilerCommand.parse("gcc"),
        run=RunSpec(timeout=1.0, warmup=0, repeats=1, max_repeats=1),
    )
    return TuneOptions(**{**base, **overrides})


def runs(workdir: Path) -> Counter:
    return Counter((workdir / "runs.log").read_text().split("\n")[:-1])


def test_every_kind_of_failure_is_recorded_and_tuning_goes_on(workdir):
    report = tune(read_problem(workdir / "synthetic.c"), options())
    assert report.evaluations == 26 and report.reused == 0
    assert report.best.params == {"X": 3, "Y": 2} and report.best.time == 10.0
    assert report.default.params == {"X": 1, "Y": 2} and report.default.time == 14.0
    with Database(report.db_path) as db:
        (study,) = db.studies()
        failures = {
            (m.params["X"], m.params["Y"]): (m.status, m.error)
            for m in db.measurements(study)
            if m.status != "ok"
        }
    assert report.invalid == len(failures) == 4
    assert failures[(5, 1)][0] == "compile_error" and "does not compile" in failures[(5, 1)][1]
    assert failures[(6, 1)][0] == "runtime_error" and "signal 6" in failures[(6, 1)][1]
    assert failures[(7, 1)][0] == "timeout"
    assert failures[(8, 1)][0] == "wrong_output"
    assert {(k.status, k.count) for k in report.failures} == {
        (status, 1) for status, _ in failures.values()
    }
    for kind in report.failures:
        assert failures[(kind.params["X"], kind.params["Y"])] == (kind.status, kind.error)


FAILING_ROWS = """#include <stdio.h>
#include "annotune_timing.h"
#ifndef X
#define X 1 // @tune range(1, 8)
#endif
int main(void) {
  if (X > 3) {
    fprintf(stderr, "wrong result at (%d, %d)\\n", X, 2 * X);
    return 1;
  }
  printf("annotune-time-ms: %d\\n", 10 - X);
  return 0;
}
"""


def test_failures_that_differ_only_in_numbers_are_one_kind(tmp_path):
    (tmp_path / "rows.c").write_text(FAILING_ROWS)
    report = tune(read_problem(tmp_path / "rows.c"), options(budget=8))
    assert report.invalid == 5
    (kind,) = report.failures
    assert kind.status == "runtime_error" and kind.count == 5
    x = kind.params["X"]
    assert x > 3 and kind.error == f"exited with code 1: wrong result at ({x}, {2 * x})"
    assert not report.gave_up  # some configurations work


ALWAYS_FAILS = """#include <stdio.h>
#ifndef X
#define X 1 // @tune range(1, 40)
#endif
int main(void) {
  fprintf(stderr, "no CUDA-capable device is detected (config %d)\\n", X);
  return 1;
}
"""


def test_the_search_stops_when_every_configuration_fails_the_same_way(tmp_path):
    (tmp_path / "broken.c").write_text(ALWAYS_FAILS)
    report = tune(read_problem(tmp_path / "broken.c"), options(budget=40, jobs=2, check=False))
    assert report.gave_up and report.best is None and report.header is None
    (kind,) = report.failures
    assert kind.count == report.evaluations
    assert GIVE_UP_AFTER <= report.evaluations < GIVE_UP_AFTER + 2  # at most one batch more
    assert report.to_json()["gave_up"] is True


def test_the_header_is_written_and_compiles_into_the_program(workdir):
    report = tune(read_problem(workdir / "synthetic.c"), options())
    assert report.header == workdir / "tuned" / "test-device" / "synthetic.h"
    text = report.header.read_text()
    assert "#define X 3" in text and "#define Y 2" in text
    import subprocess

    binary = workdir / "tuned-program"
    subprocess.run(
        [
            "gcc",
            "-include",
            str(report.header),
            "-DANNOTUNE_NO_TIMING",
            "-I",
            str(workdir),
            str(workdir / "synthetic.c"),
            "-o",
            str(binary),
            f"-I{Path(__file__).parents[2] / 'annotune' / 'include'}",
        ],
        check=True,
    )
    out = subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout
    assert "X=3" in out  # the guarded parameter takes the tuned value


def test_a_second_run_reuses_everything_and_runs_nothing_again(workdir):
    """Nor its final check: the first tune's is stored with the study and read back. Asked
    for another check (other rounds), it checks again and says why."""
    problem = read_problem(workdir / "synthetic.c")
    first = tune(problem, options(budget=12, strategy="random", seed=3))
    ran = runs(workdir)
    second = tune(problem, options(budget=12, strategy="random", seed=3, recheck=0))
    assert second.reused == second.evaluations == first.evaluations == 12
    assert runs(workdir) == ran
    assert second.best == first.best
    again = tune(problem, options(budget=12, strategy="random", seed=3))
    assert runs(workdir) == ran  # nothing measured, nothing checked
    assert again.recheck.stored and not first.recheck.stored
    assert replace(again.recheck, stored="") == first.recheck
    assert again.best == first.best and not any("ran again" in n for n in again.notes)
    rechecked = tune(problem, options(budget=12, strategy="random", seed=3, recheck_rounds=20))
    extra = runs(workdir) - ran
    check = rechecked.recheck
    assert len(check.contenders) == 3 and 0 < check.rounds <= 20 and not check.stored
    # only the final check ran: the default each round, each contender until decided
    assert sum(extra.values()) == check.rounds + sum(c.rounds for c in check.contenders)
    assert rechecked.best == first.best
    (note,) = [n for n in rechecked.notes if "the final check ran again" in n]
    assert "none of these 3 contenders with --recheck-rounds 20 is stored" in note


def test_a_stored_final_check_that_is_no_verdict_is_checked_again(workdir):
    problem = read_problem(workdir / "synthetic.c")
    first = tune(problem, options(budget=12, strategy="random", seed=3))
    with Database(default_db_path(problem.source)) as db:
        (study,) = db.studies()
        with db.transaction() as conn:
            conn.execute("UPDATE final_checks SET verdict_json = '{\"winner\": [1]}'")
    ran = runs(workdir)
    again = tune(problem, options(budget=12, strategy="random", seed=3))
    assert not again.recheck.stored and sum((runs(workdir) - ran).values()) > 0
    assert again.best == first.best
    assert any("the final check ran again" in note for note in again.notes)


def test_no_final_check_runs_when_nothing_measured_beat_the_baseline(workdir):
    """The baseline is the fastest configuration (X=3, Y=2: 10 ms): the final check has
    nothing to compare, so it builds and samples nothing, and the baseline is kept."""
    problem = read_problem(workdir / "synthetic.c")
    report = tune(problem, options(budget=8, strategy="random", reference={"X": 3, "Y": 2}))
    assert report.recheck is not None and report.recheck.rounds == 0
    assert report.recheck.contenders == () and report.recheck.kept_baseline
    assert report.best.params == {"X": 3, "Y": 2}
    assert runs(workdir)["3 2"] == 1  # measured once, as the baseline; never in a check
    assert any("nothing to compare" in note for note in report.notes)

def test_fresh_measures_again_and_a_changed_source_starts_a_new_study(workdir):
    problem = read_problem(workdir / "synthetic.c")
    tune(problem, options(budget=3, strategy="random"))
    again = tune(problem, options(budget=3, strategy="random", fresh=True))
    assert again.reused == 0
    source = workdir / "synthetic.c"
    source.write_text(source.read_text() + "\n/* edited */\n")
    changed = tune(read_problem(source), options(budget=3, strategy="random"))
    assert changed.reused == 0


def test_ctrl_c_keeps_results_and_writes_the_best_so_far(workdir, monkeypatch):
    problem = read_problem(workdir / "synthetic.c")
    seen = []

    def interrupt_after_five(progress):
        seen.append(progress.evaluations)
        if progress.evaluations == 5:
            raise KeyboardInterrupt

    report = tune(problem, options(strategy="random"), on_progress=interrupt_after_five)
    assert report.interrupted
    assert report.evaluations == 5
    assert report.header is not None and report.header.exists()
    resumed = tune(problem, options(strategy="random"))
    assert resumed.reused >= 5


def test_iterml_finds_the_optimum_with_fewer_measurements_than_the_space(workdir):
    report = tune(read_problem(workdir / "synthetic.c"), options(strategy="iterml", budget=16))
    assert report.evaluations <= 16
    assert report.best.time <= 10.5


def test_without_the_target_gpus_features_it_warns_and_learns_from_what_is_shared(workdir):
    """Another GPU's study is there, but "test-device" has no known device features and no
    vendor in its name: the other GPU is still learned from, on no device feature, and the
    report says which are missing and how to add them."""
    problem = read_problem(workdir / "synthetic.c")
    key = StudyKey.for_problem(problem, device="NVIDIA A100-PCIE-40GB", build={})
    with Database(default_db_path(problem.source)) as db:
        study = db.open_study(key, device_features=lookup("NVIDIA A100-PCIE-40GB").to_json())
        db.record(study, Measurement({"X": 4, "Y": 2}, "ok", 1.0))
    report = tune(problem, options(strategy="iterml", budget=3))
    transfer = report.to_json()["transfer"]
    assert transfer["sources"] == ["NVIDIA A100-PCIE-40GB"] and transfer["features"] == []
    (warning,) = report.warnings
    assert "no device features known for 'test-device'" in warning
    assert "missing vendor_nvidia, compute_capability" in warning and "--gpus FILE" in warning


KILLED_ONCE = """#include <stdio.h>
#include <signal.h>
#include <unistd.h>
#include "annotune_timing.h"
#ifndef X
#define X 1 // @tune range(1, 3)
#endif
int main(void) {
  /* Killed on its first run as by the out-of-memory killer; X == 3 every time. */
  if (X == 3 || (X == 2 && access("ran-2", F_OK) != 0)) {
    FILE *mark = fopen("ran-2", "w"); fclose(mark);
    kill(getpid(), SIGKILL);
  }
  printf("annotune-time-ms: %d\\n", 10 - X);
  return 0;
}
"""


def test_a_run_killed_from_outside_is_retried_and_never_stored(tmp_path):
    (tmp_path / "k.c").write_text(KILLED_ONCE)
    problem = read_problem(tmp_path / "k.c")
    run = RunSpec(timeout=1.0, warmup=0, repeats=1, max_repeats=1, cwd=tmp_path)  # for ran-2
    report = tune(problem, options(budget=3, recheck=0, run=run))
    assert report.transient == 1 and report.invalid == 0
    with Database(report.db_path) as db:
        (study,) = db.studies()
        stored = {m.params["X"]: m.status for m in db.measurements(study)}
    assert stored == {1: "ok", 2: "ok"}  # X=2 failed once, then ran; X=3 is not kept
    assert any("transient" in note for note in report.notes)
    again = tune(problem, options(budget=3, recheck=0, run=run))
    assert again.reused == 2 and again.transient == 1  # X=3 is measured again


DRIFTING = """#include <stdio.h>
#include "annotune_timing.h"
#ifndef X
#define X 1 // @tune range(1, 30)
#endif
int main(void) {
  /* Every run is 1% slower than the one before, as on a machine that heats up. */
  int runs = 0; FILE *f = fopen("runs", "r");
  if (f) { fscanf(f, "%d", &runs); fclose(f); }
  f = fopen("runs", "w"); fprintf(f, "%d", runs + 1); fclose(f);
  printf("annotune-time-ms: %f\\n", (20.0 + X) * (1.0 + 0.01 * runs));
  return 0;
}
"""


def test_a_default_that_drifts_marks_the_tune_noisy(tmp_path):
    (tmp_path / "d.c").write_text(DRIFTING)
    run = RunSpec(timeout=5.0, warmup=0, repeats=6, max_repeats=6, cwd=tmp_path)  # for "runs"
    report = tune(read_problem(tmp_path / "d.c"), options(budget=12, drift_every=5, run=run))
    assert report.drift is not None and len(report.drift.medians) == 2
    assert report.drift.noisy and report.drift.largest > 0.3
    assert any(note.startswith("noisy:") for note in report.notes)
    assert report.to_json()["drift"]["noisy"] is True


def test_the_report_says_when_the_compiler_lists_no_dependencies(workdir):
    wrapper = workdir / "compile-wrapper"
    wrapper.write_text('#!/bin/sh\nexec gcc "$@"\n')
    wrapper.chmod(0o755)
    compiler = CompilerCommand.parse(f"{wrapper} {{source}} -o {{output}}")
    report = tune(read_problem(workdir / "synthetic.c"), options(budget=2, compiler=compiler))
    assert any("does not list the files it reads" in note for note in report.notes)
    assert any("tuned values were not checked" in note for note in report.notes)
    tracked = tune(read_problem(workdir / "synthetic.c"), options(budget=2))
    assert not any("does not list" in note for note in tracked.notes)


THREADED = """#include <stdio.h>
#include <stdlib.h>
#ifndef X
#define X 1 // @tune values(1, 2)
#endif
int main(void) {
  /* As an OpenMP program on an idle machine: the more threads, the faster. */
  const char *threads = getenv("OMP_NUM_THREADS");
  printf("annotune-time-ms: %d\\n", 120 / (threads ? atoi(threads) : 1) + X);
  return 0;
}
"""


@pytest.fixture
def no_timing_environment(monkeypatch):
    """Whatever annotune's own environment sets for threads and GPUs, the tests set alone."""
    for name in TIMING_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_a_changed_thread_count_in_annotunes_environment_starts_a_new_study(
    tmp_path, monkeypatch, no_timing_environment
):
    (tmp_path / "t.c").write_text(THREADED)
    problem = read_problem(tmp_path / "t.c")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    first = tune(problem, options(budget=2, recheck=0))
    assert first.default.time == 61.0  # the program saw the 2 threads
    assert "environment:   OMP_NUM_THREADS=2\n" in first.header.read_text()
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    other = tune(problem, options(budget=2, recheck=0))
    assert other.reused == 0 and other.default.time == 31.0
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert tune(problem, options(budget=2, recheck=0)).reused == 2  # the first study's again


def test_an_environment_variable_can_be_tuned(tmp_path, no_timing_environment):
    (tmp_path / "t.c").write_text(THREADED)
    (tmp_path / "annotune.toml").write_text(
        '[[file]]\npath = "t.c"\n'
        '[file.params]\nTHREADS = { domain = "values(1, 2, 3)", default = 1 }\n'
        '[file.env]\nOMP_NUM_THREADS = "{THREADS}"\nOMP_PROC_BIND = "close"\n'
    )
    problem = read_problem(tmp_path / "t.c")
    report = tune(problem, tune_options(problem, TuneArguments(budget=6, recheck=0, warmup=0)))
    with Database(report.db_path) as db:
        (study,) = db.studies()
        times = {(m.params["THREADS"], m.params["X"]): m.time for m in db.measurements(study)}
    assert times == {(t, x): 120 // t + x for t in (1, 2, 3) for x in (1, 2)}
    assert report.best.params == {"X": 1, "THREADS": 3}
    assert "environment:   OMP_NUM_THREADS=3, OMP_PROC_BIND=close\n" in report.header.read_text()


def test_programs_run_where_tune_is_called_unless_told_otherwise(tmp_path, monkeypatch, data_dir):
    source = tmp_path / "src" / "reader.c"
    source.parent.mkdir()
    shutil.copy(data_dir / "reader" / "reader.c", source)
    (tmp_path / "size.txt").write_text("20")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "size.txt").write_text("30")
    monkeypatch.chdir(tmp_path)
    run = RunSpec(args=("size.txt",), warmup=0, repeats=1, max_repeats=1)
    here = tune(read_problem(source), options(budget=1, recheck=0, run=run))
    assert here.run_dir == tmp_path and here.default.time == 21.0
    assert here.to_json()["run_dir"] == str(tmp_path)
    told = replace(run, cwd=tmp_path / "data")
    there = tune(read_problem(source), options(budget=1, recheck=0, run=told, fresh=True))
    assert there.run_dir == tmp_path / "data" and there.default.time == 31.0


TILED = """#include <stdio.h>
#include <stdlib.h>
#define TILING 0 // @tune values(0, 1)
#define TILE 8 // @tune values(8, 16, 32)
int main(void) {
  FILE *log = fopen(getenv("RUNS"), "a");
  fputs("run\\n", log);
  fclose(log);
#if TILING
  printf("annotune-time-ms: %d\\n", 100 - TILE);
#else
  printf("annotune-time-ms: 90\\n");
#endif
  return 0;
}
"""


def test_configurations_of_the_same_program_are_measured_once(tmp_path, monkeypatch):
    """TILE is read only when TILING is on: the three untiled configurations are one program,
    measured once and recorded for all three; the final check never pits a program against
    itself."""
    (tmp_path / "t.c").write_text(TILED)
    monkeypatch.setenv("RUNS", str(tmp_path / "runs.log"))
    problem = read_problem(tmp_path / "t.c")
    report = tune(problem, options(budget=6, recheck=2, recheck_rounds=3))
    with Database(report.db_path) as db:
        (study,) = db.studies()
        recorded = {(m.params["TILING"], m.params["TILE"]): m for m in db.measurements(study)}
    assert len(recorded) == 6 and report.evaluations == 6
    assert report.same_program == 2
    untiled = [recorded[0, t] for t in (8, 16, 32)]
    assert {m.time for m in untiled} == {90.0}
    assert sum("same_program_as" in m.compile_info for m in untiled) == 2
    search_runs = 4  # the three tiled and one untiled
    final_runs = 3 * 3  # the default and the two best tiled, three rounds each
    assert (tmp_path / "runs.log").read_text().count("run") == search_runs + final_runs
    assert report.search_best.params == {"TILING": 1, "TILE": 32}
    again = tune(problem, options(budget=6, recheck=0))
    assert again.reused == 6 and again.same_program == 0
