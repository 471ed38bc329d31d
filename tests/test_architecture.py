"""The house rules: import-linter's contracts (pyproject.toml) hold, and every test is collected."""

from __future__ import annotations

import shutil
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_no_import_runs_back_up_the_pipeline():
    lint = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    if not Path(lint).exists():
        pytest.fail("lint-imports is not installed: pip install -e '.[test]'")
    done = subprocess.run(
        [lint, "--config", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def test_no_module_at_the_package_root_but_its_face_and_entry():
    modules = sorted(p.name for p in (ROOT / "annotune").glob("*.py"))
    assert modules == ["__init__.py", "__main__.py"]


def test_pytest_collects_every_test_file(pytestconfig):
    """pytest skips folders named like build outputs (`build/`, `dist/`, by `norecursedirs`)
    and files not named by `python_files`; none may hide tests. Checked against pytest's own
    settings rather than by collecting again (a second collection took 10 s of the suite)."""
    skipped_dirs = pytestconfig.getini("norecursedirs")
    test_files = pytestconfig.getini("python_files")
    hidden = []
    for path in (ROOT / "tests").rglob("test*.py"):
        folders = path.relative_to(ROOT).parts[:-1]
        in_skipped = any(fnmatch(f, pattern) for f in folders for pattern in skipped_dirs)
        unnamed = not any(fnmatch(path.name, pattern) for pattern in test_files)
        if in_skipped or unnamed:
            hidden.append(str(path.relative_to(ROOT)))
    assert pytestconfig.getini("testpaths") == ["tests"]
    assert hidden == []
