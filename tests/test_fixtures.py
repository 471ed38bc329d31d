"""The shared fixtures keep their promise: missing recorded runs skip a developer's test run and
fail CI's, so a green CI has run every test that needs them."""

from __future__ import annotations

from pathlib import Path

import pytest


def _conftest(request: pytest.FixtureRequest):
    wanted = str(Path(__file__).with_name("conftest.py"))
    (found,) = [
        plugin
        for plugin in request.config.pluginmanager.get_plugins()
        if getattr(plugin, "__file__", None) == wanted
    ]
    return found


def test_missing_recorded_runs_fail_under_ci_and_skip_elsewhere(request, monkeypatch, tmp_path):
    conftest = _conftest(request)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        conftest.missing_replay_data(tmp_path / "absent")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="absent"):
        conftest.missing_replay_data(tmp_path / "absent")


def test_the_recorded_runs_are_found_where_the_readme_says(replay_dir):
    assert (replay_dir / "README.md").is_file() or any(replay_dir.glob("*.json.gz"))


def test_an_unknown_marker_is_an_error(request):
    assert "--strict-markers" in request.config.getini("addopts")
