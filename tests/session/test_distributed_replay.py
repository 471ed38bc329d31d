"""Replay devices: a recording served as measurements, on its own and as a tune's device(s)."""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import BuildResult, Measurement
from annotune.results.database import Database
from annotune.session.concurrent import DeviceRate, Work
from annotune.session.loop import tune_on
from annotune.session.options import TuneOptions
from annotune.session.plan import Devices
from annotune.session.replay_device import (
    ReplayBuilder,
    ReplayMeasurer,
    fixed_table,
    load_table,
)
from annotune.session.tuner import tune

SOURCE = """#ifndef X
#define X 2 // @tune range(1, 8)
#endif
#ifndef Y
#define Y 2 // @tune range(1, 8)
#endif
int main(void) { return 0; }
"""

FAILED = {(8, 1): "CompilationFailedConfig", (7, 1): "RuntimeFailedConfig", (6, 1): "InvalidConfig"}


def recorded(x: int, y: int) -> float | str:
    """The recorded time of (x, y): best at (5, 3); a few recorded failures."""
    return FAILED.get((x, y), 10.0 + (x - 5) ** 2 + 0.5 * (y - 3) ** 2)


def write_recording(path: Path, *, skip: tuple = ()) -> Path:
    cache = {
        f"{x},{y}": {"X": x, "Y": y, "time": recorded(x, y)}
        for x in range(1, 9)
        for y in range(1, 9)
        if (x, y) not in skip
    }
    path.write_text(
        json.dumps({"device_name": "Replayed GPU", "tune_params_keys": ["X", "Y"], "cache": cache})
    )
    return path


@pytest.fixture
def project(tmp_path):
    (tmp_path / "xy.c").write_text(SOURCE)
    write_recording(tmp_path / "xy_gpu.json")
    return tmp_path


def options(where: Path, **overrides) -> TuneOptions:
    base = dict(
        strategy="iterml",
        budget=30,
        replay=(where / "xy_gpu.json",),
        replay_delay=0.0,
        db_path=where / "results.db",
        out_dir=where / "tuned",
        cache_dir=where / "cache",
        recheck_rounds=6,
    )
    return TuneOptions(**{**base, **overrides})


def build(x: int, y: int) -> BuildResult:
    return BuildResult({"X": x, "Y": y}, Path("recording"))


def test_a_replay_device_serves_recorded_times_and_failures_after_its_delay(project):
    slept: list[float] = []
    table = load_table(project / "xy_gpu.json", ("Y", "X"))  # the source's order, not the file's
    device = ReplayMeasurer(table, 0.1, sleep=slept.append)
    ok = device.measure(build(5, 3))
    assert (ok.status, ok.time, ok.times) == ("ok", 10.0, (10.0,))
    assert ok.compile_info["timing"] == "replay"
    assert [device.measure(build(x, 1)).status for x in (8, 7, 6)] == [
        "compile_error",
        "runtime_error",
        "runtime_error",
    ]
    assert "recorded as CompilationFailedConfig in xy_gpu" in device.measure(build(8, 1)).error
    assert slept == [0.1] * 5
    assert table.device == "Replayed GPU"
    recorded_time = ReplayMeasurer(table, None, sleep=slept.append)
    recorded_time.measure(build(1, 1))
    assert slept[-1] == pytest.approx(recorded(1, 1) / 1e3)  # type: ignore[operator]
    recorded_time.sample(build(2, 1))  # one run of the final check: the recorded time
    assert slept[-1] == pytest.approx(recorded(2, 1) / 1e3)  # type: ignore[operator]


def test_what_the_recording_lacks_fails_as_not_recorded(tmp_path):
    table = load_table(write_recording(tmp_path / "r.json", skip=((1, 1),)), ("X", "Y"))
    missing = ReplayMeasurer(table, 0.0).measure(build(1, 1))
    assert missing.status == "runtime_error" and missing.error == "not in the recording r"
    assert table.missing([{"X": 1, "Y": 1}, {"X": 2, "Y": 1}]) == 1


def test_a_recording_of_other_parameters_is_refused(project):
    with pytest.raises(AnnotuneError, match=r"recording's parameters \(X, Y\) are not the source"):
        load_table(project / "xy_gpu.json", ("X", "Z"))


def test_a_fixed_table_serves_one_time_and_builds_compile_nothing():
    table = fixed_table(("X",), 2.5)
    assert ReplayMeasurer(table, 0.0).measure(build(1, 1)).time == 2.5
    with ReplayBuilder(table, jobs=3) as builder:
        builds = builder.build([{"X": 1}, {"X": 2}])
        assert builder.jobs == 3 and "nothing compiled" in builder.identity()
    assert [b.params for b in builds] == [{"X": 1}, {"X": 2}] and all(b.ok for b in builds)


def test_a_replay_tune_runs_without_a_gpu_and_stores_the_recorded_times(project):
    problem = read_problem(project / "xy.c")
    report = tune(problem, options(project))
    assert report.evaluations == 30 and report.timing == "replay"
    assert report.device == "Replayed GPU"
    assert report.header == project / "tuned" / "replayed-gpu" / "xy.h"
    with Database(report.db_path) as db:
        (study,) = db.studies()
        stored = db.measurements(study)
    assert len(stored) == 30
    for m in stored:
        want = recorded(int(m.params["X"]), int(m.params["Y"]))
        assert m.time == want if m.status == "ok" else m.error.startswith(f"recorded as {want}")
    again = tune(problem, options(project))
    assert again.reused == 30 and again.evaluations == 30


def test_a_replay_tune_says_what_the_recording_lacks(project):
    write_recording(project / "xy_gpu.json", skip=((1, 1), (1, 2)))
    report = tune(read_problem(project / "xy.c"), options(project, budget=5))
    assert any(
        "2 of the 64 legal configurations are not in the recording" in w for w in report.warnings
    )


class FakePool:
    """A `DevicePool` of `devices` replay devices in this process: work is measured when
    `wait` is called, `per_wait` pieces at a time."""

    def __init__(self, measurer: ReplayMeasurer, devices: int, per_wait: int):
        self.measurer = measurer
        self.count = devices
        self.per_wait = per_wait
        self.queue: deque[Work] = deque()
        self.measured = 0
        self.most_outstanding = 0
        self.transient_once: set[tuple] = set()

    def devices(self) -> int:
        return self.count

    def submit(self, work: Work) -> None:
        self.queue.append(work)
        self.most_outstanding = max(self.most_outstanding, len(self.queue))

    def outstanding(self) -> int:
        return len(self.queue)

    def wait(self, timeout: float | None) -> list[tuple[Work, Measurement]]:
        done = []
        for _ in range(min(self.per_wait, len(self.queue))):
            work = self.queue.popleft()
            key = tuple(sorted(work.build.params.items()))
            if key in self.transient_once:  # killed from outside, once
                self.transient_once.discard(key)
                failure = Measurement(
                    work.build.params, "runtime_error", error="killed", transient=True
                )
                done.append((work, failure))
                continue
            self.measured += 1
            done.append((work, self.measurer.measure(work.build, work.stop_above)))
        return done

    def rates(self) -> tuple[DeviceRate, ...]:
        return tuple(DeviceRate(f"fake #{i}", f"fake-{i}", 0, 0.0) for i in range(self.count))


def test_the_concurrent_path_records_everything_and_retries_a_transient_failure_once(project):
    problem = read_problem(project / "xy.c")
    table = load_table(project / "xy_gpu.json", ("X", "Y"))
    pool = FakePool(ReplayMeasurer(table, 0.0), devices=3, per_wait=2)
    pool.transient_once = {(("X", 4), ("Y", 4))}
    devices = Devices(table.device, ReplayMeasurer(table, 0.0), pool=pool, replay=table)
    report = tune_on(problem, options(project, budget=64, strategy="random"), devices)
    assert report.evaluations == 64 and report.transient == 0
    # the baseline on the single-device path, the rest here with the default twice more for
    # drift (every 25 new measurements, on the first device)
    assert pool.measured == 63 + 2
    assert report.drift is not None and report.drift.medians == (recorded(2, 2),) * 2
    assert pool.most_outstanding <= 3 + 5  # every device busy, one batch waiting
    assert len(report.devices) == 3
    with Database(report.db_path) as db:
        (study,) = db.studies()
        assert len(db.measurements(study)) == 64
        assert db.lookup(study, {"X": 4, "Y": 4}).time == recorded(4, 4)
