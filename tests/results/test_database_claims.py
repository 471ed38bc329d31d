"""Claims: how tunes of one study running at once agree on who measures a configuration, and
when a claim lapses (its tune's process is gone, its lifetime passed, a pid reused)."""

from __future__ import annotations

import dataclasses
import sqlite3
import subprocess
import sys

import pytest

from annotune.core.records import Measurement
from annotune.results.database import Database, Owner, StudyKey

KEY = StudyKey("k.c", "c0ffee", {"params": [{"name": "A", "values": [1, 2]}]}, "dev", {})
HOUR = 3600.0


@pytest.fixture
def db(tmp_path):
    with Database(tmp_path / "results.db") as database:
        yield database


def another_live_process() -> Owner:
    """A tune in a process that runs (the test runner's parent, the pid 1 of a container)."""
    return dataclasses.replace(Owner.here(), token="other", pid=1, started="")


def test_a_claim_keeps_others_off_until_its_measurement_is_recorded(db):
    study = db.open_study(KEY)
    mine, other = Owner.here(), another_live_process()
    assert db.claim(study, {"A": 1}, other, lifetime=HOUR)
    assert not db.claim(study, {"A": 1}, mine, lifetime=HOUR)
    assert db.claim(study, {"A": 2}, mine, lifetime=HOUR)  # one configuration, not the study
    assert db.claim(study, {"A": 1}, other, lifetime=HOUR)  # its owner may claim it again
    db.record(study, Measurement({"A": 1}, "ok", 1.0))
    assert not db.claim(study, {"A": 1}, mine, lifetime=HOUR)  # measured: nothing to claim
    with sqlite3.connect(db.path) as conn:
        left = conn.execute("SELECT config_key, token FROM claims").fetchall()
    assert left == [('{"A":2}', mine.token)]  # recording ended the claim on A=1


def test_a_released_claim_can_be_taken_at_once(db):
    study = db.open_study(KEY)
    other = another_live_process()
    assert db.claim(study, {"A": 1}, other, lifetime=HOUR)
    db.release(study, {"A": 1}, Owner.here())  # not the owner: nothing happens
    assert not db.claim(study, {"A": 1}, Owner.here(), lifetime=HOUR)
    db.release(study, {"A": 1}, other)
    assert db.claim(study, {"A": 1}, Owner.here(), lifetime=HOUR)


def test_the_claim_of_a_process_that_died_is_taken_over(db):
    study = db.open_study(KEY)
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    dead = dataclasses.replace(Owner.here(), token="dead", pid=int(child.stdout), started="")
    assert db.claim(study, {"A": 1}, dead, lifetime=HOUR)
    assert db.claim(study, {"A": 1}, Owner.here(), lifetime=HOUR)


def test_a_claim_past_its_lifetime_lapses_even_on_another_host(db):
    study = db.open_study(KEY)
    elsewhere = dataclasses.replace(another_live_process(), host="another-host")
    assert db.claim(study, {"A": 1}, elsewhere, lifetime=HOUR)
    assert not db.claim(study, {"A": 1}, Owner.here(), lifetime=HOUR)  # can't ask: it stands
    assert db.claim(study, {"A": 2}, elsewhere, lifetime=-1.0)
    assert db.claim(study, {"A": 2}, Owner.here(), lifetime=HOUR)


@pytest.mark.skipif(not Owner.here().started, reason="no process start times here (/proc)")
def test_a_reused_pid_does_not_keep_a_dead_tunes_claim(db):
    study = db.open_study(KEY)
    reused = dataclasses.replace(another_live_process(), started="-1")  # pid 1 started else
    assert db.claim(study, {"A": 1}, reused, lifetime=HOUR)
    assert db.claim(study, {"A": 1}, Owner.here(), lifetime=HOUR)


def test_a_claim_left_by_an_earlier_tune_of_this_process_lapses(db):
    study = db.open_study(KEY)
    earlier, now = Owner.here(), Owner.here()
    assert earlier.token != now.token and earlier.pid == now.pid
    assert db.claim(study, {"A": 1}, earlier, lifetime=HOUR)
    assert db.claim(study, {"A": 1}, now, lifetime=HOUR)
