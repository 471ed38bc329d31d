"""`--objective energy|edp`: the search, the final check and the header minimise the energy a
run takes, measured by a meter (here RAPL, on a powercap tree the program itself charges)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.core.diagnostics import AnnotuneError
from annotune.run import energy
from annotune.session.options import TuneArguments, tune_options
from annotune.session.tuner import tune

# X = 4 is the fastest and takes the most energy; X = 1 the slowest and the least.
PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifndef X
#define X 2 // @tune values(1, 2, 3, 4)
#endif
int main(void) {
  const char *path = getenv("ENERGY_FILE");
  FILE *f = fopen(path, "r+");
  long long uj = 0;
  if (!f || fscanf(f, "%lld", &uj) != 1) return 1;
  rewind(f);
  fprintf(f, "%lld\n", uj + 1000LL * X * X);
  fclose(f);
  struct timespec nap = {0, 60000000L};
  nanosleep(&nap, NULL);
  printf("took %d ms\n", 10 - 2 * X);
  return 0;
}
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    """The program, and a powercap tree with one package whose counter the program charges."""
    zone = tmp_path / "powercap" / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "energy_uj").write_text("0\n")
    (zone / "max_energy_range_uj").write_text("262143328850\n")
    monkeypatch.setattr(energy, "POWERCAP", tmp_path / "powercap")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "e.c").write_text(PROGRAM)
    (tmp_path / "annotune.toml").write_text(
        f'[[file]]\npath = "e.c"\n[file.env]\nENERGY_FILE = "{zone / "energy_uj"}"\n'
    )
    return tmp_path


def _tune(project: Path, objective: str):
    given = TuneArguments(
        budget=4,
        time_regex=r"took ([0-9.]+) ms",
        repeats=3,
        max_repeats=3,
        warmup=0,
        recheck=1,
        recheck_rounds=6,
        objective=objective,
        db_path=project / "results.db",
    )
    problem = read_problem(project / "e.c")
    return tune(problem, tune_options(problem, given))


def test_energy_is_minimised_where_time_is_not(project):
    by_time = _tune(project, "time")
    assert by_time.objective == "time" and by_time.best.params == {"X": 4}
    by_energy = _tune(project, "energy")
    assert by_energy.objective == "energy" and by_energy.best.params == {"X": 1}
    assert by_energy.best.energy == pytest.approx(0.001)  # 1000 uJ a run, start-up included
    assert by_energy.default.energy == pytest.approx(0.004)
    assert by_energy.recheck is not None and not by_energy.recheck.kept_baseline
    assert by_energy.recheck.speedup == pytest.approx(4.0)  # 4x less energy than X = 2
    header = by_energy.header.read_text()
    assert "#define X 1" in header and "tuned for energy (J)" in header
    assert "4.00x less energy" in header
    assert json.loads(json.dumps(by_energy.to_json()))["best"]["energy"] == pytest.approx(0.001)


def test_the_energy_delay_product_weighs_both(project):
    # EDP = X^2 mJ * (10 - 2X) ms: 8, 24, 36, 32 for X = 1..4.
    report = _tune(project, "edp")
    assert report.best.params == {"X": 1}


def test_no_power_source_is_a_clear_error_before_anything_runs(project, monkeypatch):
    monkeypatch.setattr(energy, "POWERCAP", project / "nowhere")
    with pytest.raises(AnnotuneError, match="energy cannot be measured here") as raised:
        _tune(project, "energy")
    assert "rapl" in raised.value.message
    assert (project / "powercap" / "intel-rapl:0" / "energy_uj").read_text() == "0\n"


def test_a_recording_cannot_be_tuned_for_energy(project):
    problem = read_problem(project / "e.c")
    given = TuneArguments(objective="energy", replay=(project / "recorded.json",))
    with pytest.raises(AnnotuneError, match="a recording holds times only"):
        tune_options(problem, given)


def test_the_cli_refuses_an_unknown_objective_and_a_missing_meter(cli, project, monkeypatch):
    unknown = cli("tune", "e.c", "--objective", "power")
    assert unknown.exit_code == 2 and "'power' is not one of time, energy, edp" in unknown.stderr
    monkeypatch.setattr(energy, "POWERCAP", project / "nowhere")
    missing = cli("tune", "e.c", "--objective", "energy", "--time-regex", "took ([0-9.]+) ms")
    assert missing.exit_code == 2 and "energy cannot be measured here" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_the_cli_reports_the_energies_and_the_ratio(cli, project):
    done = cli(
        "tune", "e.c", "--objective", "energy", "--time-regex", "took ([0-9.]+) ms",
        "--budget", "4", "--repeats", "3", "--max-repeats", "3", "--warmup", "0",
        "--recheck", "1", "--recheck-rounds", "6",
    )  # fmt: skip
    assert done.exit_code == 0, done.stderr
    assert "objective     energy" in done.stdout
    assert "0.001 J a run" in done.stdout and "x less energy" in done.stdout
    assert "] best 0.001 J (8 ms): {'X': 1}" in done.stderr  # progress: the objective first
    assert "final check: round 6 of 6" in done.stderr  # energy checks take minutes: watched


def test_a_run_too_short_for_its_meter_is_said_and_never_0_joules(project, monkeypatch):
    """A run shorter than RAPL's window has no energy: the tune says so once and keeps
    going; no energy of 0 J is stored or claimed."""
    original = energy.rapl_meter
    monkeypatch.setattr(
        energy, "rapl_meter", lambda root, **kw: original(root, min_window=5.0, **kw)
    )
    report = _tune(project, "energy")
    said = [w for w in report.warnings if "has no energy" in w]
    assert len(said) == 1 and "the search takes it as failed" in said[0]
    assert report.best is None or report.best.energy is None
