"""A program's run: its wall time as exact as the clock, and its timeout."""

from __future__ import annotations

import os
import shutil

import pytest

from annotune.run.process import run_in_own_group

pytestmark = pytest.mark.skipif(shutil.which("sleep") is None, reason="no sleep command")


def test_the_wall_time_is_not_rounded_to_a_polling_step():
    """A wait with a timeout polls every 50 ms past the first 63: a 70 ms program read 113 ms.
    The least of a few runs stays near what the program took."""
    times = [run_in_own_group(["sleep", "0.07"], None, 10.0, dict(os.environ))[3] for _ in range(5)]
    assert 69.0 <= min(times) < 100.0, times


def test_a_program_past_its_timeout_is_killed_and_said_so():
    assert run_in_own_group(["sleep", "5"], None, 0.2, dict(os.environ)) is None
