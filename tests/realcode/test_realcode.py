"""A project laid out like third-party code, used as a new user would, from the command line.

`project/` is our own small program shaped like a vendored benchmark: its knobs live in an
unguarded header in another folder (`include/tinyconf.h`, with `#if`-chosen sizes), it reads
an input file named relative to where it is run, prints its time in seconds, and builds with a
Makefile that passes `-Iinclude`. Its `annotune.toml` declares the knob without touching it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.emit import render_header, tuned_header_path, write_if_changed

PROJECT = Path(__file__).parent / "project"

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "vendor project"  # a space in the path, as real checkouts have
    left_by_the_walkthrough = shutil.ignore_patterns(".annotune", "build", "smooth", "tuned")
    shutil.copytree(PROJECT, root, ignore=left_by_the_walkthrough)
    return root


def annotune(*args, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "annotune", *map(str, args)],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_scan_from_another_directory_reads_the_config_and_the_active_definitions(project, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = annotune("scan", project / "src" / "smooth.c", "--json", cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    (param,) = json.loads(done.stdout)["params"]
    assert param["name"] == "TILE" and param["default"] == 8 and param["origin"] == "config"
    assert param["location"]["file"].endswith("include/tinyconf.h")
    assert param["location"]["line"] == 6


@pytest.mark.slow
def test_tune_from_the_project_root_runs_there_in_milliseconds(project, cli, monkeypatch):
    """The command itself from the project root; then, in-process (the same command line
    without a second interpreter's start-up), from elsewhere: lost without `--run-dir`."""
    done = annotune(
        "tune", "src/smooth.c", "--budget", "3", "--max-repeats", "6", "--recheck-rounds", "6",
        "--json", cwd=project,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert Path(report["run_dir"]) == project  # data/weights.txt is found from here
    assert report["invalid"] == 0 and report["timing"] == "regex"
    assert 0.5 < report["default"]["time"] < 5000  # seconds printed, milliseconds kept
    elsewhere = project.parent / "other"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    quick = ("--budget", "1", "--warmup", "0", "--repeats", "1", "--max-repeats", "1")
    lost = cli("tune", project / "src" / "smooth.c", *quick, "--recheck", "0")
    assert lost.exit_code == 1 and "cannot open data/weights.txt" in lost.stderr
    found = cli("tune", project / "src/smooth.c", *quick, "--recheck", "0", "--run-dir", project)
    assert found.exit_code == 0, found.stderr


def test_make_builds_the_tuned_values_into_the_unmodified_sources(project):
    """A committed header tunes TILE to 32; the vendored header says 8, unguarded."""
    problem = read_problem(project / "src" / "smooth.c")
    header = tuned_header_path(problem.source, "test-gpu", None)
    header.parent.mkdir(parents=True)
    text = render_header(
        problem,
        {"TILE": 32},
        device="test-gpu",
        space_size=5,
        measurements=5,
        default_time=2.0,
        best_time=1.0,
        tool_version="test",
    )
    write_if_changed(header, text)
    original = (project / "include" / "tinyconf.h").read_text()

    plain = annotune("build", "src/smooth.c", "-o", "tuned.h", cwd=project,
                     env={"ANNOTUNE_DEVICE": "test-gpu"})  # fmt: skip
    assert plain.returncode == 2 and "include/tinyconf.h:6:9: error: TILE" in plain.stderr

    make = subprocess.run(
        ["make", f"ANNOTUNE={sys.executable} -m annotune", "CC=gcc"],
        cwd=project,
        env={**os.environ, "ANNOTUNE_DEVICE": "test-gpu"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert make.returncode == 0, make.stdout + make.stderr
    ran = subprocess.run(
        [str(project / "smooth"), "data/weights.txt"], cwd=project, capture_output=True, text=True
    )
    assert "tile 32 n 256" in ran.stdout  # the tuned value, and the active #if branch's size
    assert (project / "include" / "tinyconf.h").read_text() == original  # never edited


def test_a_knob_the_active_code_never_reads_costs_no_measurement(project, cli, monkeypatch):
    """ROW_STRIDE is #defined in the vendored header but read by no active code: scan says so,
    and tune measures each TILE once, whatever ROW_STRIDE is, recording the others as the
    same program. In-process: the command line is the other tests' claim, the counts this one's
    (one timed run each is enough to count)."""
    config = project / "annotune.toml"
    config.write_text(config.read_text() + 'ROW_STRIDE = "values(1, 64)"\n')
    monkeypatch.chdir(project)
    scan = cli("scan", "src/smooth.c")
    assert "'ROW_STRIDE' is not used in active code" in scan.stderr
    report = cli.json(
        "tune", "src/smooth.c", "--strategy", "exhaustive", "--budget", "10", "--warmup", "0",
        "--repeats", "1", "--max-repeats", "1", "--recheck", "0", "--json",
    )  # fmt: skip
    assert report["evaluations"] == 10 and report["same_program"] == 5
