"""Shared fixtures: paths to the test data and a runner for the command line."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from annotune.cli.app import app

DATA = Path(__file__).parent / "data"
REPLAY_DIR = Path(
    os.environ.get("ANNOTUNE_REPLAY_DIR")
    or Path(__file__).resolve().parents[1].parent / "shared" / "data" / "replay"
)
"""The exhaustive recorded runs: `../shared/data/replay` beside the checkout, or where
`ANNOTUNE_REPLAY_DIR` says."""


def missing_replay_data(what: Path) -> None:
    """A test that needs the recorded runs, without them: skipped on a developer's machine, a
    failure in CI (`CI=true`), where a skip would pass the run without testing anything."""
    reason = f"the recorded runs are not here: {what}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: the data must be present)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def replay_dir() -> Path:
    """The directory of recorded runs (see `missing_replay_data` when it is absent)."""
    if not REPLAY_DIR.is_dir():
        missing_replay_data(REPLAY_DIR)
    return REPLAY_DIR


@pytest.fixture(scope="session")
def replay_file(replay_dir: Path):
    """A recorded run by its name (`convolution_A100`), present or failing as `replay_dir`."""

    def found(name: str) -> Path:
        path = replay_dir / f"{name}.json.gz"
        if not path.is_file():
            missing_replay_data(path)
        return path

    return found


@pytest.fixture(autouse=True, scope="session")
def _this_environments_commands_first():
    """`annotune` (and mkdocs, cmake's helpers) as this interpreter's environment installs
    them, first on PATH: the tests that shell out run the annotune under test, activated or
    not (`.venv/bin/python -m pytest`)."""
    scripts = str(Path(sys.executable).parent)
    previous = os.environ.get("PATH", "")
    os.environ["PATH"] = f"{scripts}{os.pathsep}{previous}"
    yield
    os.environ["PATH"] = previous


@pytest.fixture(autouse=True, scope="session")
def _ctrl_c_as_in_a_terminal():
    """Ctrl-C's default action for the processes the tests start: a shell that runs the
    tests as a background job starts them with SIGINT ignored, and children inherit an
    ignored signal; a handled one is reset to its default when they start."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that time a GPU run one after another, in one worker (`--dist loadgroup`): two at
    once would share the device and time each other."""
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(pytest.mark.xdist_group("gpu"))


@pytest.fixture
def data_dir() -> Path:
    return DATA


class Cli:
    """Runs `annotune ...` in-process and keeps stdout and stderr apart."""

    def __init__(self) -> None:
        self.runner = CliRunner()

    def __call__(self, *args: str):
        """The group imports a command's module when it runs, as `annotune` itself does."""
        return self.runner.invoke(app, [str(a) for a in args])

    def json(self, *args: str) -> dict:
        result = self(*args)
        assert result.exit_code == 0, result.stderr
        return json.loads(result.stdout)


@pytest.fixture
def cli() -> Cli:
    return Cli()
