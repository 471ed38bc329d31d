"""Tuning through Ray on a local cluster (started once for the module): replay devices sharing
a study, a device killed mid-tune, every device lost, two kinds at once; a real GPU when there
is one."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.core.diagnostics import AnnotuneError
from annotune.results.database import Database
from annotune.run.device import gpu_name
from annotune.session.distributed import tune_devices
from annotune.session.options import TuneOptions
from annotune.session.tuner import tune

pytestmark = pytest.mark.slow  # Ray's start-up, and several whole tunes

ray = pytest.importorskip("ray")

SOURCE = """#ifndef X
#define X 2 // @tune range(1, 8)
#endif
#ifndef Y
#define Y 2 // @tune range(1, 8)
#endif
int main(void) { return 0; }
"""


def recorded(x: int, y: int, shift: int = 0) -> float | str:
    """The recorded time of (x, y): best at (5 + shift, 3); two recorded failures."""
    failed = {(8, 1): "CompilationFailedConfig", (7, 1): "RuntimeFailedConfig"}
    return failed.get((x, y), 10.0 + (x - 5 - shift) ** 2 + 0.5 * (y - 3) ** 2)


def write_recording(path: Path, device: str = "Replayed GPU", shift: int = 0) -> Path:
    cache = {
        f"{x},{y}": {"X": x, "Y": y, "time": recorded(x, y, shift)}
        for x in range(1, 9)
        for y in range(1, 9)
    }
    path.write_text(
        json.dumps({"device_name": device, "tune_params_keys": ["X", "Y"], "cache": cache})
    )
    return path


@pytest.fixture(scope="module", autouse=True)
def cluster():
    """One local cluster for the module: Ray's start-up takes seconds."""
    if ray.is_initialized():
        yield
        return
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield
    ray.shutdown()


@pytest.fixture
def project(tmp_path):
    (tmp_path / "xy.c").write_text(SOURCE)
    write_recording(tmp_path / "xy_gpu.json")
    return tmp_path


def options(where: Path, **overrides) -> TuneOptions:
    base = dict(
        budget=40,
        ray=True,
        devices=4,
        replay=(where / "xy_gpu.json",),
        replay_delay=0.03,
        db_path=where / "results.db",
        out_dir=where / "tuned",
        cache_dir=where / "cache",
        recheck_rounds=6,
    )
    return TuneOptions(**{**base, **overrides})


def stored(report) -> list:
    with Database(report.db_path) as db:
        (study,) = [s for s in db.studies() if s.key.device == report.device]
        return db.measurements(study)


def check_recorded(measurements, shift: int = 0) -> None:
    for m in measurements:
        want = recorded(int(m.params["X"]), int(m.params["Y"]), shift)
        assert m.time == want if m.status == "ok" else m.error.startswith(f"recorded as {want}")


def test_replay_devices_share_one_study_and_measure_the_budget_in_parallel(project):
    report = tune(read_problem(project / "xy.c"), options(project))
    assert report.evaluations == 40 and report.device == "Replayed GPU"
    measurements = stored(report)
    assert len(measurements) == 40
    check_recorded(measurements)
    assert len(report.devices) == 4 and all(d.measured > 0 and not d.lost for d in report.devices)
    assert sum(d.measured for d in report.devices) == 39 + 1  # the baseline aside; one drift
    assert report.header == project / "tuned" / "replayed-gpu" / "xy.h"
    assert report.recheck is not None  # on one device


def test_sync_devices_measure_what_one_device_would(project, tmp_path_factory):
    """--sync: 4 devices measure the search's own batches, so the tune measures exactly the
    configurations a one-device tune with the same seed measures."""
    problem = read_problem(project / "xy.c")
    report = tune(problem, options(project, sync=True, budget=30))
    alone = tmp_path_factory.mktemp("alone")
    one = tune(problem, options(project, ray=False, devices=None, budget=30, db_path=alone / "r.db",
                                out_dir=alone / "tuned"))  # fmt: skip

    def configurations(r) -> list[tuple[int, int]]:
        return sorted((int(m.params["X"]), int(m.params["Y"])) for m in stored(r))

    assert report.evaluations == one.evaluations == 30
    assert configurations(report) == configurations(one)
    assert sum(1 for d in report.devices if d.measured > 0) > 1  # measured in parallel


def test_the_time_waiting_on_the_devices_is_the_tunes_run_time(project):
    """Not "other": the report says where the wall time went."""
    report = tune(
        read_problem(project / "xy.c"),
        options(project, devices=2, budget=20, replay_delay=0.2, recheck=0),
    )
    wall = report.wall_breakdown
    # About 19 rows of 0.2 s on 2 devices: while they measure, the tune either chooses
    # (search) or waits on them (run); a slow search leaves less to wait.
    assert wall.run + wall.search >= 1.5
    assert wall.other < wall.run + wall.search


def test_a_device_killed_mid_tune_loses_nothing_and_the_budget_is_met(project):
    killed: list[str] = []

    def kill_one(progress) -> None:
        if progress.evaluations >= 12 and not killed and progress.devices:
            killed.append(progress.devices[1].actor)
            ray.kill(ray.get_actor(killed[0]))

    report = tune(read_problem(project / "xy.c"), options(project), kill_one)
    assert killed and report.evaluations == 40 and not report.devices_lost
    measurements = stored(report)
    assert len(measurements) == 40 and report.transient == 0
    check_recorded(measurements)
    lost = [d for d in report.devices if d.lost]
    assert [d.actor for d in lost] == killed
    assert any("1 of 4 devices were lost" in note for note in report.notes)


def test_every_device_lost_ends_the_tune_keeping_what_was_measured(project):
    killed: list[str] = []

    def kill_all(progress) -> None:
        if progress.evaluations >= 8 and not killed:
            killed.extend(device.actor for device in progress.devices)
            for actor in killed:
                ray.kill(ray.get_actor(actor))

    problem = read_problem(project / "xy.c")
    report = tune(problem, options(project, devices=2), kill_all)
    assert report.devices_lost.startswith("every device was lost")
    assert report.interrupted and report.recheck is None
    assert 8 <= report.evaluations < 40
    assert len(stored(report)) == report.evaluations  # every counted measurement is recorded
    again = tune(problem, options(project, devices=2))  # resumes from the database
    assert again.reused == report.evaluations and again.evaluations == 40
    assert len(stored(again)) == 40


def test_two_recordings_are_two_kinds_each_with_its_study_and_header(project):
    second = write_recording(project / "xy_other.json", "Other GPU", shift=2)
    reports = tune_devices(
        read_problem(project / "xy.c"),
        options(project, budget=16, devices=2, replay=(project / "xy_gpu.json", second)),
    )
    assert [r.device for r in reports] == ["Replayed GPU", "Other GPU"]
    assert [r.evaluations for r in reports] == [16, 16]
    assert {r.header.parent.name for r in reports} == {"replayed-gpu", "other-gpu"}  # type: ignore[union-attr]
    check_recorded(stored(reports[0]))
    check_recorded(stored(reports[1]), shift=2)
    with pytest.raises(AnnotuneError, match="2 kinds of device"):
        tune(
            read_problem(project / "xy.c"),
            options(project, replay=(second, project / "xy_gpu.json")),
        )


def test_kinds_tuned_at_once_learn_from_each_other_as_results_arrive(project):
    """Named GPUs the table knows, so that their device features can be compared: each
    tune's report says it learned from the other, whose study was empty when it began."""
    first = write_recording(project / "a100.json", "NVIDIA A100-PCIE-40GB")
    second = write_recording(project / "a4000.json", "NVIDIA RTX A4000", shift=1)
    reports = tune_devices(
        read_problem(project / "xy.c"),
        options(project, budget=48, devices=2, replay=(first, second), recheck=0),
    )
    assert [r.evaluations for r in reports] == [48, 48]
    learned = [r.to_json()["transfer"] for r in reports]
    assert learned[0] is not None and learned[0]["sources"] == ["NVIDIA RTX A4000"]
    assert learned[1] is not None and learned[1]["sources"] == ["NVIDIA A100-PCIE-40GB"]
    assert [r.best.params for r in reports] == [{"X": 5, "Y": 3}, {"X": 6, "Y": 3}]


def test_sigterm_stops_a_ray_tune_as_ctrl_c_does(project):
    """Ray's driver takes SIGTERM over (a stack trace, then death): the CLI's clean stop is put
    back, so a batch job's time limit keeps the header and the report. The command runs in a
    process of its own, as a user runs it, joining this module's cluster (`--ray-address`)."""
    repo = Path(__file__).resolve().parents[2]
    path = os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH", "")]))
    address = ray.get_runtime_context().gcs_address
    command = [sys.executable, "-m", "annotune", "tune", "xy.c", "--ray", "--devices", "2"]
    command += ["--ray-address", address, "--replay", "xy_gpu.json", "--replay-delay", "0.5"]
    command += ["--budget", "60"]
    process = subprocess.Popen(
        command,
        cwd=project,
        env={**os.environ, "PYTHONPATH": path},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    database = project / ".annotune" / "results.db"

    def measured() -> int:
        """Rows stored so far, read without creating the database or holding it open."""
        if not database.exists():
            return 0
        try:
            with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as conn:
                return conn.execute("SELECT COUNT(*) FROM measurements").fetchone()[0]
        except sqlite3.OperationalError:
            return 0

    deadline = time.monotonic() + 120
    while measured() < 4:
        assert process.poll() is None, process.communicate()[1]
        assert time.monotonic() < deadline, "no measurement in two minutes"
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 143, (out, err)
    assert "SIGTERM received" not in err and "Traceback" not in err, err
    assert "interrupted: every measurement so far is kept" in out, (out, err)
    assert list((project / "tuned").glob("*/xy.h"))
    assert measured() >= 4


@pytest.mark.gpu
def test_the_one_real_gpu_tunes_through_ray(tmp_path, data_dir):
    name = gpu_name()
    if name is None or shutil.which("nvcc") is None:
        pytest.skip("needs an NVIDIA GPU (nvidia-smi) and nvcc")
    examples = data_dir.parent.parent / "examples" / "cuda"
    shutil.copytree(examples / "convolution", tmp_path / "convolution")
    shutil.copytree(examples / "common", tmp_path / "common")
    problem = read_problem(tmp_path / "convolution" / "convolution.cu")
    report = tune(problem, TuneOptions(budget=12, ray=True, devices=1, recheck_rounds=6))
    assert report.device == name and report.evaluations == 12
    assert report.best is not None and report.timing == "events"
    assert len(report.devices) == 1 and report.devices[0].measured >= 11
