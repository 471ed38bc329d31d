"""The house rules: import-linter's contracts (pyproject.toml) hold, and every test is collected."""

from __future__ import annotations

import shutil
import subprocess
import sys
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


def test_pytest_collects_every_test_file():
    """pytest skips folders named like build outputs (`build/`, `dist/`); none may hide tests."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=--import-mode=importlib",
            "-q",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    collected = {line.split("::")[0] for line in done.stdout.splitlines() if "::" in line}
    on_disk = {str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")}
    assert on_disk - collected == set()
