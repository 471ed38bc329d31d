"""`annotune check --measure`: the header's configuration re-measured against the default,
interleaved, with the final check's statistics. It holds on a program whose tuned value is
faster (a tuned OpenACC example, and our own program) and fails, with both times and the
interval, once the tuned value has become the slower one (the program's cost is read from an
input file the test changes, which no build reads: only measuring can tell)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.core.diagnostics import AnnotuneError
from annotune.emit import render_header, tuned_header_path, write_if_changed
from annotune.emit.sizes import MARKER, SizeEntry, SizeTable
from annotune.session.remeasure import remeasure

ROOT = Path(__file__).resolve().parents[2]
DEVICE = "example-host"
LDC_COMPILER = "gcc -O2 -fopenacc -DSTEPS=40 {source} -o {output} -lm"
"""The OpenACC ldc example on the host, with fewer time steps than its default: each run a
fraction of a second."""


def _annotune(*args: object, cwd: Path) -> subprocess.CompletedProcess:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "annotune", *map(str, args)],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": path, "ANNOTUNE_DEVICE": DEVICE},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture
def work(tmp_path, data_dir) -> Path:
    root = tmp_path / "check"
    shutil.copytree(data_dir / "check", root)
    return root / "work.c"


def _header(source: Path, params: dict) -> Path:
    problem = read_problem(source)
    text = render_header(problem, params, device=DEVICE, space_size=2, measurements=2,
                         default_time=1.0, best_time=1.0, tool_version="0.1.0")  # fmt: skip
    header = tuned_header_path(source, DEVICE)
    write_if_changed(header, text)
    return header


def test_a_header_of_the_defaults_has_nothing_to_measure(work):
    found = remeasure(work, _header(work, {"WAY": 0}), mode="program", objective="time")
    assert found.same and found.holds and found.rounds == 0


def test_a_size_aware_header_is_refused(work):
    header = tuned_header_path(work, DEVICE)
    header.parent.mkdir(parents=True)
    table = SizeTable("N", 1, "the source's", (SizeEntry(1, {"WAY": 1}),))
    header.write_text(f"/*\n * {MARKER} {json.dumps(table.to_json())}\n */\n")
    with pytest.raises(AnnotuneError, match="per problem size"):
        remeasure(work, header, mode="program", objective="time")


@pytest.mark.slow
def test_our_program_holds_until_its_tuned_way_becomes_the_slower(work):
    """work.c's WAY=1 costs a quarter of WAY=0 as tuned; then cost.txt swaps the costs."""
    folder = work.parent
    tuned = _annotune("tune", "work.c", "--budget", "2", cwd=folder)
    assert tuned.returncode == 0, tuned.stderr
    assert "#define WAY 1" in tuned_header_path(work, DEVICE).read_text()

    holds = _annotune("check", "work.c", "--measure", cwd=folder)
    assert holds.returncode == 0, holds.stdout + holds.stderr
    assert "measured  default " in holds.stdout and ", tuned " in holds.stdout
    assert "95% interval" in holds.stdout and "faster than the default" in holds.stdout

    (folder / "cost.txt").write_text("2 8\n")
    static = _annotune("check", "work.c", cwd=folder)
    assert static.returncode == 0, static.stdout  # no file the program is built from changed
    slower = _annotune("check", "work.c", "--measure", "--json", cwd=folder)
    assert slower.returncode == 1, slower.stdout + slower.stderr
    data = json.loads(slower.stdout)
    measured = data["measure"]
    assert not data["stale"] and not data["ok"]
    assert measured["slower"] and not measured["faster"]
    assert measured["tuned_value"] > measured["default_value"]
    low, high = measured["speedup_interval"]
    assert low <= measured["speedup"] <= high < 1.0
    text = _annotune("check", "work.c", "--measure", cwd=folder)
    assert text.returncode == 1 and "slower than the default" in text.stdout


@pytest.mark.slow
def test_a_tuned_openacc_example_still_holds(tmp_path):
    """examples/openacc/ldc with gcc -fopenacc on the host, tuned on its one knob that matters
    there (RESULTS.md: the GPU knobs do nothing on the host; BLOCK_I=128 gives the speed-up),
    then re-measured."""
    folder = tmp_path / "ldc"
    shutil.copytree(ROOT / "examples" / "openacc" / "ldc", folder)
    shutil.rmtree(folder / "tuned")
    source = folder / "ldc.c"
    lines = source.read_text().split("\n")
    kept = (
        line if line.startswith("#define BLOCK_I ") else line.split(" // @tune")[0]
        for line in lines
        if not line.startswith("#pragma annotune constraint")
    )
    source.write_text("\n".join(kept))
    tuned = _annotune("tune", "ldc.c", "--budget", "6", "--compiler", LDC_COMPILER, cwd=folder)
    assert tuned.returncode == 0, tuned.stderr
    assert "speedup" in tuned.stdout and "baseline is kept" not in tuned.stdout, tuned.stdout
    done = _annotune("check", "ldc.c", "--measure", "--compiler", LDC_COMPILER, cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "measured  default " in done.stdout and ", tuned " in done.stdout
    assert "95% interval" in done.stdout and "faster than the default" in done.stdout
