"""The storage contract (`annotune.results.storage.Storage`): what a tune relies on of its
store, checked on every implementation. A new store joins `STORES`; a class anywhere in
annotune that has the protocol's methods and is not there fails the first test."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

import annotune
from annotune.core.records import Measurement
from annotune.results.database import Database, Owner, StudyKey
from annotune.results.storage import Storage


@contextmanager
def sqlite_file(place: Path) -> Iterator[Storage]:
    with Database(place / "results.db") as database:
        yield database


STORES: dict[type, Callable[[Path], AbstractContextManager[Storage]]] = {Database: sqlite_file}
"""Each implementation, and how to open one at a place (a directory): opened again at the same
place, it is the same store (the same file, for the database)."""

MEMBERS = sorted(
    name for name, value in vars(Storage).items() if callable(value) and not name.startswith("_")
)

SPACE = {"params": [{"name": "A", "values": [1, 2, 3]}, {"name": "B", "values": [8, 16]}]}
KEY = StudyKey("k.cu", "c0ffee", SPACE, "gpu-a", {"compiler": ["nvcc", "-O3"]})
ON_B = StudyKey("k.cu", "c0ffee", SPACE, "gpu-b", {"compiler": ["nvcc", "-O3"]})
HOUR = 3600.0

# Tunes on other hosts: their processes cannot be asked from here, so only a claim's lifetime
# ends it; each stands against the other.
TUNE_A = Owner("tune-a", "host-a", 11, "")
TUNE_B = Owner("tune-b", "host-b", 22, "")


@pytest.fixture(params=list(STORES), ids=lambda cls: cls.__name__)
def opener(request, tmp_path) -> Callable[[], AbstractContextManager[Storage]]:
    """Opens the implementation under test at one place, as often as a test asks."""
    return lambda: STORES[request.param](tmp_path)


@pytest.fixture
def store(opener) -> Iterator[Storage]:
    with opener() as opened:
        yield opened


def ok(time: float, **params: int) -> Measurement:
    return Measurement(params, "ok", time, times=(time, time * 1.01))


def test_every_class_with_the_protocols_methods_is_a_checked_store():
    found = set()
    for module in pkgutil.walk_packages(annotune.__path__, "annotune."):
        if module.name.rpartition(".")[2] == "__main__":
            continue  # runs the command line
        loaded = importlib.import_module(module.name)
        for _, cls in inspect.getmembers(loaded, inspect.isclass):
            ours = cls.__module__ == module.name and cls is not Storage
            if ours and all(callable(getattr(cls, name, None)) for name in MEMBERS):
                found.add(cls)
    assert found == set(STORES)


@pytest.mark.parametrize("implementation", list(STORES), ids=lambda cls: cls.__name__)
def test_each_store_has_the_protocols_signatures(implementation):
    assert MEMBERS == [
        "claim",
        "final_check",
        "forget_failures",
        "lookup",
        "measurements",
        "open_study",
        "record",
        "record_final_check",
        "release",
        "studies",
    ]
    for name in MEMBERS:
        theirs = inspect.signature(getattr(implementation, name))
        ours = inspect.signature(getattr(Storage, name))
        assert theirs == ours, name


def test_a_store_is_a_storage(store):
    assert isinstance(store, Storage)


def test_what_is_recorded_is_read_back_in_order(store):
    study = store.open_study(KEY)
    metered = Measurement(
        {"A": 2, "B": 8},
        "ok",
        1.5,
        times=(1.5, 1.6),
        compile_info={"registers": 40, "log": "ptxas"},
        energy=0.25,
        energies=(0.25, 0.26),
    )
    failed = Measurement({"A": 1, "B": 16}, "compile_error", error="error: no such knob")
    assert store.record(study, metered)
    assert store.record(study, failed)
    assert store.record(study, ok(0.5, A=3, B=16))
    read = store.measurements(study)
    assert [m.params for m in read] == [{"A": 2, "B": 8}, {"A": 1, "B": 16}, {"A": 3, "B": 16}]
    first = read[0]
    assert (first.status, first.time, first.times) == ("ok", 1.5, (1.5, 1.6))
    assert first.compile_info == {"registers": 40, "log": "ptxas"}
    assert (first.energy, first.energies) == (0.25, (0.25, 0.26))
    assert (read[1].status, read[1].time, read[1].error) == ("compile_error", None, failed.error)
    assert store.lookup(study, {"B": 8, "A": 2}) == first  # whatever the order of the names
    assert store.lookup(study, {"A": 2.0, "B": 8}) == first  # 2.0 is the value 2
    assert store.lookup(study, {"A": 2, "B": 16}) is None


def test_a_configuration_is_recorded_once_the_first_kept(store):
    study = store.open_study(KEY)
    assert store.record(study, ok(1.0, A=1, B=8))
    assert not store.record(study, ok(9.0, A=1, B=8))
    assert not store.record(study, Measurement({"A": 1, "B": 8}, "timeout", error="late"))
    assert [m.time for m in store.measurements(study)] == [1.0]


def test_a_transient_failure_is_refused_and_nothing_stored(store):
    study = store.open_study(KEY)
    transient = Measurement({"A": 1, "B": 8}, "runtime_error", error="busy", transient=True)
    with pytest.raises(ValueError, match="transient"):
        store.record(study, transient)
    assert store.measurements(study) == []
    assert store.claim(study, {"A": 1, "B": 8}, TUNE_A, lifetime=HOUR)  # still to measure


def test_studies_are_told_apart_by_their_key(store):
    mine = store.open_study(KEY, device_features={"sm": 90})
    other = store.open_study(ON_B)
    assert mine.id != other.id
    assert store.open_study(KEY).id == mine.id
    store.record(mine, ok(1.0, A=1, B=8))
    assert store.measurements(other) == []
    assert [(s.id, s.key.device) for s in store.studies()] == [
        (mine.id, "gpu-a"),
        (other.id, "gpu-b"),
    ]
    assert store.studies()[0].key == KEY
    assert store.studies()[0].device_features == {"sm": 90}


def test_device_features_are_kept_unless_the_study_starts_over(store):
    assert store.open_study(KEY).device_features is None
    assert store.open_study(KEY, device_features={"sm": 90}).device_features == {"sm": 90}
    assert store.open_study(KEY, device_features={"sm": 80}).device_features == {"sm": 90}
    fresh = store.open_study(KEY, fresh=True, device_features={"sm": 80})
    assert fresh.device_features == {"sm": 80}


def test_fresh_starts_only_that_study_over(store):
    mine, other = store.open_study(KEY), store.open_study(ON_B)
    store.record(mine, ok(1.0, A=1, B=8))
    store.record(other, ok(2.0, A=1, B=8))
    again = store.open_study(KEY, fresh=True)
    assert again.id == mine.id
    assert store.measurements(again) == []
    assert [m.time for m in store.measurements(other)] == [2.0]
    assert store.record(again, ok(3.0, A=1, B=8))  # measured again, not refused as a repeat


def test_forgetting_failures_drops_only_them(store):
    study = store.open_study(KEY)
    store.record(study, ok(1.0, A=1, B=8))
    store.record(study, Measurement({"A": 2, "B": 8}, "compile_error", error="x"))
    store.record(study, Measurement({"A": 3, "B": 8}, "wrong_output", error="diff"))
    forgotten = store.forget_failures(study)
    assert sorted(m.status for m in forgotten) == ["compile_error", "wrong_output"]
    assert [m.params for m in store.measurements(study)] == [{"A": 1, "B": 8}]
    assert store.lookup(study, {"A": 2, "B": 8}) is None
    assert store.record(study, ok(2.0, A=2, B=8))  # to be measured again
    assert store.forget_failures(study) == []


def test_a_final_check_is_read_back_under_its_key_until_the_study_changes(opener):
    verdict = {"winner": {"A": 2, "B": 8}, "speedup": 1.5, "rounds": 10}
    with opener() as store:
        study, other = store.open_study(KEY), store.open_study(ON_B)
        assert store.final_check(study, "k1") is None
        store.record_final_check(study, "k1", verdict)
        store.record_final_check(other, "k1", {**verdict, "speedup": 9.0})
    with opener() as store:  # kept for good, per study and key
        study = store.open_study(KEY)
        read, created = store.final_check(study, "k1")
        assert read == verdict and created
        assert store.final_check(study, "k2") is None
        store.record_final_check(study, "k1", {**verdict, "speedup": 1.4})  # replaced
        assert store.final_check(study, "k1")[0]["speedup"] == 1.4
        store.forget_failures(study)
        assert store.final_check(study, "k1") is None
        other = store.open_study(ON_B)
        assert store.final_check(other, "k1")[0]["speedup"] == 9.0
        assert store.final_check(store.open_study(ON_B, fresh=True), "k1") is None


def test_a_claim_is_not_given_twice(store):
    study = store.open_study(KEY)
    config = {"A": 1, "B": 8}
    assert store.claim(study, config, TUNE_A, lifetime=HOUR)
    assert not store.claim(study, config, TUNE_B, lifetime=HOUR)
    assert not store.claim(study, {"B": 8, "A": 1.0}, TUNE_B, lifetime=HOUR)  # the same one
    assert store.claim(study, {"A": 2, "B": 8}, TUNE_B, lifetime=HOUR)  # one config, not all
    assert store.claim(study, config, TUNE_A, lifetime=HOUR)  # its owner may claim it again
    assert not store.claim(study, config, TUNE_B, lifetime=HOUR)
    other = store.open_study(ON_B)
    assert store.claim(other, config, TUNE_B, lifetime=HOUR)  # claims are per study


def test_a_measured_configuration_is_not_claimed(store):
    study = store.open_study(KEY)
    store.record(study, ok(1.0, A=1, B=8))
    assert not store.claim(study, {"A": 1, "B": 8}, TUNE_A, lifetime=HOUR)


def test_recording_or_releasing_ends_the_claim(store):
    study = store.open_study(KEY)
    assert store.claim(study, {"A": 1, "B": 8}, TUNE_A, lifetime=HOUR)
    store.record(study, Measurement({"A": 1, "B": 8}, "compile_error", error="x"))
    store.forget_failures(study)  # measured again: no claim of tune A is left on it
    assert store.claim(study, {"A": 1, "B": 8}, TUNE_B, lifetime=HOUR)
    assert store.claim(study, {"A": 2, "B": 8}, TUNE_A, lifetime=HOUR)
    store.release(study, {"A": 2, "B": 8}, TUNE_B)  # not its owner: nothing happens
    assert not store.claim(study, {"A": 2, "B": 8}, TUNE_B, lifetime=HOUR)
    store.release(study, {"A": 2, "B": 8}, TUNE_A)
    assert store.claim(study, {"A": 2, "B": 8}, TUNE_B, lifetime=HOUR)


def test_a_claim_lapses_with_its_lifetime(store):
    study = store.open_study(KEY)
    assert store.claim(study, {"A": 1, "B": 8}, TUNE_A, lifetime=0.0)
    assert store.claim(study, {"A": 1, "B": 8}, TUNE_B, lifetime=HOUR)
    assert not store.claim(study, {"A": 1, "B": 8}, TUNE_A, lifetime=HOUR)


def test_a_claim_lapses_when_its_process_on_this_host_is_gone(store):
    study = store.open_study(KEY)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        theirs = Owner("child", socket.gethostname(), child.pid, "")
        assert store.claim(study, {"A": 1, "B": 8}, theirs, lifetime=HOUR)
        assert not store.claim(study, {"A": 1, "B": 8}, Owner.here(), lifetime=HOUR)
    finally:
        child.kill()
        child.wait()
    assert store.claim(study, {"A": 1, "B": 8}, Owner.here(), lifetime=HOUR)


def test_opened_again_the_store_sees_what_was_recorded_and_claimed(opener):
    with opener() as first:
        study = first.open_study(KEY, device_features={"sm": 90})
        first.record(study, ok(1.0, A=1, B=8))
        first.record(study, Measurement({"A": 2, "B": 8}, "timeout", error="late"))
        assert first.claim(study, {"A": 3, "B": 8}, TUNE_A, lifetime=HOUR)
        recorded = first.measurements(study)
    with opener() as again:
        (seen,) = again.studies()
        assert (seen.id, seen.key, seen.device_features) == (study.id, KEY, {"sm": 90})
        resumed = again.open_study(KEY)
        assert resumed.id == study.id
        assert again.measurements(resumed) == recorded
        assert again.lookup(resumed, {"A": 1, "B": 8}) == recorded[0]
        assert not again.record(resumed, ok(5.0, A=1, B=8))
        assert not again.claim(resumed, {"A": 3, "B": 8}, TUNE_B, lifetime=HOUR)
        assert [m.status for m in again.forget_failures(resumed)] == ["timeout"]
    with opener() as third:
        assert [m.params for m in third.measurements(third.open_study(KEY))] == [{"A": 1, "B": 8}]


def test_two_stores_open_at_once_share_claims_and_measurements(opener):
    with opener() as one, opener() as two:
        study = one.open_study(KEY)
        assert two.open_study(KEY).id == study.id
        assert one.claim(study, {"A": 1, "B": 8}, TUNE_A, lifetime=HOUR)
        assert not two.claim(study, {"A": 1, "B": 8}, TUNE_B, lifetime=HOUR)
        assert one.record(study, ok(1.0, A=1, B=8))
        assert not two.record(study, ok(2.0, A=1, B=8))
        assert two.lookup(study, {"A": 1, "B": 8}).time == 1.0
