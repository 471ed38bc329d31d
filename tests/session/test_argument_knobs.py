"""A knob in the program's arguments (`args = ["-w", "{WG}"]`): one binary, run once per value
with the value in its argv, never one measurement shared among them, and the winner's
arguments written where a job script finds them (`build --json`)."""

from __future__ import annotations

import json
import shutil

import pytest

from annotune.run.program import RunSpec

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")

# The work grows with the argument; the output says which value the program had.
PROGRAM = """\
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  int wg = 256;
  for (int i = 1; i + 1 < argc; i++)
    if (argv[i][0] == '-' && argv[i][1] == 'w') wg = atoi(argv[i + 1]);
  volatile double s = 0;
  for (long i = 0; i < 40000L * wg; i++) s += 1e-9;
  printf("took %d ms\\nran with wg %d\\n", wg / 8, wg);
  return 0;
}
"""


def test_each_placeholder_that_names_a_value_is_written_in():
    spec = RunSpec(args=("-w", "{WG}", "--size={N}x{N}", "{other}"))
    assert spec.arguments({"WG": 64, "N": 2}) == ["-w", "64", "--size=2x2", "{other}"]
    assert spec.to_json()["args"] == ["-w", "{WG}", "--size={N}x{N}", "{other}"]  # the study's


def project(tmp_path, args: str = '["-w", "{WG}"]'):
    (tmp_path / "wg.c").write_text(PROGRAM)
    (tmp_path / "annotune.toml").write_text(
        f'[[file]]\npath = "wg.c"\nargs = {args}\ntime_regex = "took ([0-9]+) ms"\n'
        '[file.params]\nWG = { domain = "values(64, 128, 256)", default = 256 }\n'
    )


def test_every_value_is_its_own_run_and_the_winner_is_the_programs(cli, tmp_path, monkeypatch):
    project(tmp_path)
    monkeypatch.chdir(tmp_path)
    done = cli("tune", "wg.c", "--budget", "3", "--recheck", "0", "--json")
    assert done.exit_code == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["same_program"] == 0  # one binary, but three different runs
    assert (report["default"]["params"], report["default"]["time"]) == ({"WG": 256}, 32.0)
    assert (report["best"]["params"], report["best"]["time"]) == ({"WG": 64}, 8.0)
    built = cli("build", "wg.c", "-o", tmp_path / "wg.h", "--json")
    assert built.exit_code == 0, built.stderr
    assert json.loads(built.stdout)["args"] == ["-w", "64"]
    assert '#define ANNOTUNE_ARG_1 "64"' in (tmp_path / "wg.h").read_text()


def test_a_placeholder_that_names_no_knob_is_an_error(cli, tmp_path, monkeypatch):
    project(tmp_path, '["-w", "{WG}", "--extra={WGG}"]')
    monkeypatch.chdir(tmp_path)
    done = cli("tune", "wg.c", "--budget", "2")
    assert done.exit_code == 2 and "Traceback" not in done.stderr
    assert "{WGG}" in done.stderr and "names no parameter" in done.stderr


def test_a_knob_named_only_by_arg_on_the_command_line_is_tuned_and_written(
    cli, tmp_path, monkeypatch
):
    """`tune --arg -w --arg {WG}`, the config naming WG nowhere else: the knob is the
    program's argument as if the config's `args` said so, and the header holds the winner's."""
    project(tmp_path, "[]")
    monkeypatch.chdir(tmp_path)
    done = cli(
        "tune", "wg.c", "--arg", "-w", "--arg", "{WG}", "--budget", "3", "--recheck", "0",
        "--json",
    )  # fmt: skip
    assert done.exit_code == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["best"]["params"], report["best"]["time"]) == ({"WG": 64}, 8.0)
    header = next((tmp_path / "tuned").glob("*/wg.h")).read_text()
    assert '#define ANNOTUNE_ARG_0 "-w"' in header and '#define ANNOTUNE_ARG_1 "64"' in header
