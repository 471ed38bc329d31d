"""When a configuration has been timed enough."""

from __future__ import annotations

import pytest

from annotune.run.sampling import Sampling


def test_at_least_the_minimum_then_until_stable():
    rule = Sampling(min_runs=3, max_runs=20)
    assert not rule.enough([10.0, 10.0], 0.1)
    assert not rule.enough([10.0] * 5, 0.1)  # no 95% interval from 5 samples
    assert rule.enough([10.0] * 6, 0.1)
    assert not rule.enough([10.0, 12.0] * 4, 0.1)


def test_caps_on_runs_and_time():
    rule = Sampling(min_runs=3, max_runs=8, max_seconds=1.0)
    assert rule.enough([10.0, 12.0] * 4, 0.1)
    assert rule.enough([10.0, 12.0], 1.0) is False  # below the minimum, the cap waits
    assert rule.enough([10.0, 12.0, 10.0], 1.0)


def test_clearly_slow_stops_at_the_minimum():
    rule = Sampling(min_runs=3)
    assert rule.enough([10.0, 12.0, 11.0], 0.1, stop_above=9.0)
    assert not rule.enough([10.0, 12.0, 8.0], 0.1, stop_above=9.0)


@pytest.mark.parametrize(
    "bad",
    [
        {"min_runs": 0},
        {"min_runs": 5, "max_runs": 4},
        {"max_seconds": 0},
        {"max_seconds": float("nan")},
        {"within": 0},
        {"within": 1.5},
    ],
)
def test_bad_settings_are_refused(bad):
    with pytest.raises(ValueError):
        Sampling(**bad)
