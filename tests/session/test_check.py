"""`annotune check` without measuring: a header is stale exactly when something it was tuned
from changed (a source, a header the source reads, the config's domain, the compiler, the
device), and says which; unchanged, it holds without reading the source again."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.core.diagnostics import AnnotuneError
from annotune.emit import render_header, tuned_header_path, write_if_changed
from annotune.session.check import check_header
from annotune.session.provenance import tuned_from

DEVICE = "example-host"
WRAPPER = '#!/bin/sh\nif [ "$1" = --version ]; then echo \'{version}\'; exit 0; fi\nexec gcc "$@"\n'


@pytest.fixture
def project(tmp_path, data_dir, monkeypatch) -> Path:
    """tests/data/check copied, its header for DEVICE written as a tune would (compiled by
    `cc-check`, a gcc that says its version is 1), and `cc-check` first on PATH."""
    root = tmp_path / "project"
    shutil.copytree(data_dir / "check", root)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _compiler(bin_dir, "cc-check 1")
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")
    source = root / "work.c"
    _write_header(source)
    return source


def _compiler(bin_dir: Path, version: str) -> Path:
    path = bin_dir / "cc-check"
    path.write_text(WRAPPER.format(version=version))
    path.chmod(0o755)
    return path


def _write_header(source: Path, device: str = DEVICE) -> Path:
    problem = read_problem(source)
    params = {"WAY": 1}
    provenance = tuned_from(
        problem, params, device=device, compile_argv=("cc-check", "{source}", "-o", "{output}"),
        mode="program", objective="time", speedup=3.9, interval=(3.8, 4.0),
    )  # fmt: skip
    text = render_header(problem, params, device=device, space_size=2, measurements=2,
                         default_time=13.0, best_time=3.3, tool_version="0.1.0",
                         provenance=provenance)  # fmt: skip
    header = tuned_header_path(source, device)
    write_if_changed(header, text)
    return header


def test_an_unchanged_header_holds(project):
    found = check_header(project, device=DEVICE)
    assert not found.stale, found.changes
    assert found.files == 4  # work.c, work.h, annotune.toml, the timing header's place
    assert found.provenance is not None and found.provenance.params == {"WAY": 1}


def _edit_source(source: Path) -> None:
    source.write_text(source.read_text().replace("sum += 1.0", "sum += 2.0"))


def _edit_header(source: Path) -> None:
    (source.parent / "work.h").write_text("#define UNIT 400000\n")


def _edit_domain(source: Path) -> None:
    config = source.parent / "annotune.toml"
    config.write_text(config.read_text().replace("values(0, 1)", "values(0, 1, 2)"))


def _shadow_timing_header(source: Path) -> None:
    (source.parent / "annotune_timing.h").write_text("/* found before annotune's own */\n")


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (_edit_source, [("file", "work.c")]),
        (_edit_header, [("file", "work.h")]),
        (_edit_domain, [("file", "annotune.toml"), ("domain", "WAY")]),
        (_shadow_timing_header, [("file", "annotune_timing.h")]),
    ],
    ids=["source", "header it reads", "config's domain", "a header appearing"],
)
def test_an_edited_input_makes_the_header_stale_naming_it(project, edit, expected):
    edit(project)
    found = check_header(project, device=DEVICE)
    assert found.stale
    assert [(c.kind, c.name) for c in found.changes] == expected
    if expected[-1][0] == "domain":
        assert "values(0, 1, 2)" in found.changes[-1].why


def test_another_compiler_version_makes_it_stale(project, tmp_path):
    _compiler(tmp_path / "bin", "cc-check 2")
    (change,) = check_header(project, device=DEVICE).changes
    assert (change.kind, change.name) == ("compiler", "cc-check")
    assert "another --version" in change.why


def test_a_compiler_found_elsewhere_makes_it_stale(project, tmp_path, monkeypatch):
    other = tmp_path / "other"
    other.mkdir()
    _compiler(other, "cc-check 1")
    monkeypatch.setenv("PATH", f"{other}:/usr/bin:/bin")
    (change,) = check_header(project, device=DEVICE).changes
    assert change.kind == "compiler" and str(other) in change.why


def test_a_header_tuned_on_another_device_is_stale(project):
    header = _write_header(project, device="another-host")
    (change,) = check_header(project, device=DEVICE, header=header).changes
    assert (change.kind, change.was, change.now) == ("device", "another-host", DEVICE)


def test_no_header_for_the_device_is_stale_not_bad_input(project):
    (change,) = check_header(project, device="no such device").changes
    assert change.kind == "header" and "no tuned header" in change.why


def test_a_header_without_provenance_is_stale(project):
    header = tuned_header_path(project, DEVICE)
    lines = header.read_text().splitlines(keepends=True)
    header.write_text("".join(line for line in lines if "annotune-provenance" not in line))
    (change,) = check_header(project, device=DEVICE).changes
    assert change.kind == "provenance"


def test_a_moved_checkout_reads_the_same_names(project, tmp_path):
    moved = tmp_path / "elsewhere"
    shutil.copytree(project.parent, moved)
    assert not check_header(moved / "work.c", device=DEVICE).stale


def test_bad_input_is_an_error(project, tmp_path):
    with pytest.raises(AnnotuneError, match="no such file"):
        check_header(tmp_path / "missing.c", device=DEVICE)
    with pytest.raises(AnnotuneError, match="no such header"):
        check_header(project, device=DEVICE, header=tmp_path / "missing.h")
