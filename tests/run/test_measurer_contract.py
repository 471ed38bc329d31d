"""Every runner and measurer keeps the one contract of `annotune.run.protocol`, as scikit-learn
runs its checks over every estimator: the same `measure` signature, a `Measurement` back, a
failure reported as data (a status and a reason) rather than raised, a study key that is JSON
and does not change; and for the measurers a tune drives, a `sample`, a baseline that can be
adopted (a failed one too) and the header's lines.

Each case builds its measurer from what runs here: a program's process, the kernel runner on a
CPU stand-in for a backend, a recording served as a device, a pool of one device actor. The
kernel runner on a real backend is a case too (its cubin from nvcc); without a GPU, or without
nvcc, only that case skips, saying why.
"""

from __future__ import annotations

import inspect
import json
import math
import shutil
import statistics
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from annotune.annotate.kernels import kernel_specs
from annotune.annotate.source import parse_source
from annotune.builder import cubin_compiler
from annotune.core.records import BuildResult, Measurement
from annotune.run import program
from annotune.run.backends import BACKENDS, BackendError, BackendUnavailable, open_backend
from annotune.run.backends.base import KernelBackend
from annotune.run.kernel import KernelRunner
from annotune.run.kernel import runner as kernel_runner
from annotune.run.program import ProgramRunner, RunSpec
from annotune.run.protocol import Measurer, Runner
from annotune.run.sampling import Sampling
from annotune.session import distributed, measurers, replay_device
from annotune.session.device_actor import DeviceActor, DeviceRecipe
from annotune.session.distributed import _ActorMeasurer
from annotune.session.measurers import _KernelMeasurer, _ProgramMeasurer
from annotune.session.replay_device import ReplayMeasurer, ReplayTable

FIXED = Sampling(min_runs=3, max_runs=3)


@dataclass
class Case:
    """A measurer, a build it measures "ok", one whose failure it reports (and as what), and,
    where outputs are checked, a build whose outputs differ from the first's."""

    measurer: Runner
    ok: BuildResult
    failing: BuildResult
    failure: str
    wrong: BuildResult | None = None
    again: Callable[[], Runner] | None = None  # another of the same, made afresh


# --- programs ------------------------------------------------------------------------------------


def script(where: Path, name: str, body: str, params: dict) -> BuildResult:
    path = where / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return BuildResult(dict(params), path)


def program_builds(where: Path) -> dict:
    said = "echo annotune-time-ms: {}; echo annotune-check: {}"
    return {
        "ok": script(where, "ok.sh", said.format(1.5, 41), {"A": 1}),
        "failing": script(where, "crash.sh", "echo broken >&2; exit 3", {"A": 2}),
        "failure": "runtime_error",
        "wrong": script(where, "wrong.sh", said.format(1.0, 42), {"A": 3}),
    }


def program_runner(where: Path) -> Case:
    return Case(ProgramRunner(RunSpec(warmup=0, repeats=3, max_repeats=3)), **program_builds(where))


def program_measurer(where: Path) -> Case:
    spec = RunSpec(cwd=where, warmup=0, repeats=3, max_repeats=3)
    once = RunSpec(cwd=where, warmup=0, repeats=1, max_repeats=1)
    measurer = _ProgramMeasurer(ProgramRunner(spec), ProgramRunner(once), check=True, warnings=())
    return Case(measurer, **program_builds(where))


# --- kernels -------------------------------------------------------------------------------------

BUMP = """\
#pragma annotune kernel bump grid(1) block(B) args(out(10))
__global__ void bump(unsigned char *o) {}
"""


class StandIn(KernelBackend):
    """Buffers are numpy byte arrays; a "cubin" holds the byte the kernel writes."""

    name = "stand-in"

    def device_name(self) -> str:
        return "Stand-in GPU"

    def compute_capability(self) -> tuple[int, int]:
        return (9, 0)

    def l2_cache_bytes(self) -> int:
        return 0

    def load(self, image: bytes, symbol: str) -> object:
        if symbol != "_Z4bumpPh":
            raise BackendError(f"cuModuleGetFunction({symbol}) failed: CUDA_ERROR_NOT_FOUND")
        return int(image.decode())

    def unload(self, kernel: object) -> None:
        pass

    def allocate(self, nbytes: int) -> object:
        return np.zeros(nbytes, np.uint8)

    def free(self, buffer: object) -> None:
        pass

    def upload(self, buffer, array: np.ndarray) -> None:
        buffer[: array.nbytes] = array.view(np.uint8)

    def download(self, buffer, array: np.ndarray) -> None:
        array.view(np.uint8)[:] = buffer[: array.nbytes]

    def fill(self, buffer, nbytes: int) -> None:
        buffer[:nbytes] = 0

    def copy(self, target, source, nbytes: int) -> None:
        target[:nbytes] = source[:nbytes]

    def prepare(self, kernel, grid, block, shared, args) -> object:
        return kernel, args

    def launch(self, prepared) -> None:
        value, (out,) = prepared
        out[:] = value

    def timed_launches(self, prepared, count, flush, *, timeout: float) -> list[float]:
        for _ in range(count):
            self.launch(prepared)
        return [0.25] * count

    def synchronize(self, timeout: float) -> None:
        pass

    def recover(self) -> None:
        pass

    def close(self) -> None:
        pass


def bump_spec(where: Path):
    source = where / "bump.cu"
    source.write_text(BUMP)
    (spec,) = kernel_specs(parse_source(source), ("B",))
    return spec


def cubin(where: Path, value: int, block: int) -> BuildResult:
    path = where / f"bump-{value}-{block}.cubin"
    path.write_text(str(value))
    return BuildResult({"B": block}, path)


def kernel_builds(where: Path) -> dict:
    return {
        "ok": cubin(where, 1, 32),
        "failing": BuildResult({"B": 64}, None, error="compile failed: error: expected ';'"),
        "failure": "compile_error",
        "wrong": cubin(where, 2, 128),
    }


def kernel_runner_case(where: Path) -> Case:
    runner = KernelRunner(bump_spec(where), StandIn(), warmup=0, sampling=FIXED)
    return Case(runner, **kernel_builds(where))


def kernel_measurer(where: Path) -> Case:
    spec, backend = bump_spec(where), StandIn()
    runner = KernelRunner(spec, backend, warmup=0, sampling=FIXED)
    once = KernelRunner(spec, backend, warmup=0, sampling=Sampling(min_runs=1, max_runs=1))
    measurer = _KernelMeasurer(runner, once, check=True, warnings=())
    return Case(measurer, **kernel_builds(where))


def real_kernel_runner(name: str) -> Callable[[Path], Case]:
    def make(where: Path) -> Case:
        spec = bump_spec(where)  # what needs no GPU is made before the skip
        try:
            backend = open_backend(name)
        except (BackendUnavailable, BackendError) as reason:
            pytest.skip(f"{name}: the GPU part needs a usable backend ({reason})")
        if shutil.which("nvcc") is None:
            backend.close()
            pytest.skip(f"{name}: the GPU part needs nvcc for a cubin (not installed)")
        source = where / "bump.cu"
        argv = cubin_compiler(backend.compute_capability()).render(
            source, where / "bump.cubin", [], [str(where)]
        )
        subprocess.run(argv, check=True, capture_output=True)
        builds = kernel_builds(where)
        builds["ok"] = BuildResult({"B": 32}, Path(argv[-1]))
        return Case(KernelRunner(spec, backend, sampling=FIXED), **builds)

    return make


# --- recordings ----------------------------------------------------------------------------------


def recording() -> ReplayTable:
    entries = {(1.0,): (2.5, ""), (2.0,): (None, "CompilationFailedConfig"), (3.0,): (4.0, "")}
    return ReplayTable("xy_gpu", "XY GPU", "digest", ("X",), entries)


def replay_builds() -> dict:
    def build(x: int) -> BuildResult:
        return BuildResult({"X": x}, Path("recording"), cached=True)

    return {"ok": build(1), "failing": build(2), "failure": "compile_error"}


def replay_measurer(where: Path) -> Case:
    return Case(ReplayMeasurer(recording(), 0.0, sleep=lambda seconds: None), **replay_builds())


class LocalPool:
    """The one-device pool of `_ActorMeasurer`, its actor in this process (no Ray)."""

    def __init__(self, actor: DeviceActor):
        self.actor = actor

    def call(self, method: str, *args):
        return getattr(self.actor, method)(*args)

    def broadcast(self, method: str, *args) -> None:
        getattr(self.actor, method)(*args)


def pool_measurer(where: Path) -> Case:
    actor = DeviceActor(DeviceRecipe(table=recording(), delay=0.0))
    return Case(_ActorMeasurer(LocalPool(actor), actor.describe(), ()), **replay_builds())


MEASURERS = {
    "program": program_measurer,
    "kernel": kernel_measurer,
    "replay": replay_measurer,
    "ray-pool": pool_measurer,
}
"""What a tune measures with: `session.measurers.open_measurer`'s two, a replay device, the
proxy of a Ray pool (`session.distributed`)."""

RUNNERS = {
    "program-runner": program_runner,
    "kernel-runner": kernel_runner_case,
    **{f"kernel-runner-{name}": real_kernel_runner(name) for name in BACKENDS},
}
"""The run stage's runners, which the measurers drive."""

EVERY = {**RUNNERS, **MEASURERS}


@pytest.fixture(params=sorted(EVERY), ids=str)
def case(request, tmp_path) -> Iterator[Case]:
    if request.param.startswith("kernel-runner-"):
        request.applymarker(pytest.mark.gpu)
    made = EVERY[request.param](tmp_path)
    yield made
    backend = getattr(made.measurer, "backend", None)
    if backend is not None:
        backend.close()


@pytest.fixture(params=sorted(MEASURERS), ids=str)
def measurer_case(request, tmp_path) -> Case:
    made = MEASURERS[request.param](tmp_path)
    made.again = lambda: MEASURERS[request.param](tmp_path).measurer
    return made


def test_every_runner_and_measurer_is_in_the_contract(tmp_path):
    """A new class with a `measure` in the session's measurer modules or the run stage's
    runner modules must join MEASURERS or RUNNERS."""
    modules = (measurers, replay_device, distributed, program, kernel_runner)
    found = {
        value.__name__
        for module in modules
        for value in vars(module).values()
        if inspect.isclass(value)
        and value.__module__ == module.__name__
        and callable(getattr(value, "measure", None))
    }
    made = (program_runner, kernel_runner_case, *MEASURERS.values())
    assert found == {type(make(tmp_path).measurer).__name__ for make in made}


def test_it_satisfies_the_protocol(case):
    assert isinstance(case.measurer, Runner)


def test_a_measurer_satisfies_the_tune_protocol(measurer_case):
    assert isinstance(measurer_case.measurer, Measurer)


def test_its_measure_has_the_one_signature(case):
    def shape(function) -> list[tuple]:
        parameters = inspect.signature(function).parameters.values()
        return [(p.name, p.kind, p.default, str(p.annotation)) for p in parameters]

    assert shape(type(case.measurer).measure) == shape(Runner.measure)
    returns = inspect.signature(type(case.measurer).measure).return_annotation
    assert returns in ("Measurement", Measurement)


def test_it_returns_the_record(case):
    measured = case.measurer.measure(case.ok)
    assert type(measured) is Measurement
    assert measured.status == "ok", measured.error
    assert measured.params == case.ok.params
    assert measured.time is not None and math.isfinite(measured.time) and measured.time > 0
    assert measured.time == statistics.median(measured.times)


def test_stop_above_is_taken_by_name_and_still_measures(case):
    measured = case.measurer.measure(case.ok, stop_above=1e-9)
    assert type(measured) is Measurement and measured.status == "ok"
    assert len(measured.times) >= 1


def test_a_failure_is_data_not_an_exception(case):
    failed = case.measurer.measure(case.failing)
    assert type(failed) is Measurement
    assert failed.status == case.failure and failed.error
    assert failed.time is None and failed.params == case.failing.params
    # ... and the measurer goes on.
    assert case.measurer.measure(case.ok).status == "ok"


def test_its_study_key_is_json_and_stable(case):
    key = case.measurer.to_json()
    assert isinstance(key, dict) and key
    assert json.loads(json.dumps(key)) == key
    case.measurer.measure(case.ok)
    assert case.measurer.to_json() == key  # measuring does not change the study


def test_a_sample_is_one_round_of_the_final_check(measurer_case):
    sampled = measurer_case.measurer.sample(measurer_case.ok)
    assert type(sampled) is Measurement and sampled.status == "ok"
    assert sampled.params == measurer_case.ok.params and len(sampled.times) >= 1


def test_a_failed_baseline_is_adopted_without_checking_anything(measurer_case):
    measurer = measurer_case.measurer
    failed = measurer.measure(measurer_case.failing)
    measurer.adopt_baseline(failed, lambda: measurer_case.failing)
    if measurer_case.wrong is not None:  # nothing to check against: any output is right
        assert measurer.measure(measurer_case.wrong).status == "ok"


def test_an_adopted_baseline_is_the_reference(measurer_case):
    measurer = measurer_case.measurer
    baseline = measurer.measure(measurer_case.ok)
    measurer.adopt_baseline(baseline, lambda: measurer_case.ok)
    assert measurer.measure(measurer_case.ok).status == "ok"
    if measurer_case.wrong is not None:
        assert measurer.measure(measurer_case.wrong).status == "wrong_output"
        assert measurer.sample(measurer_case.wrong).status == "wrong_output"


def test_a_reused_baseline_is_adopted_from_its_rebuild(measurer_case):
    """The baseline's measurement may come from the database: the measurer has not measured
    it, and runs its rebuild when it needs outputs."""
    measurer, elsewhere = measurer_case.measurer, measurer_case.again()
    baseline = elsewhere.measure(measurer_case.ok)
    measurer.adopt_baseline(baseline, lambda: measurer_case.ok)
    if measurer_case.wrong is not None:
        assert measurer.measure(measurer_case.wrong).status == "wrong_output"


def test_it_tells_the_header_and_the_database_what_runs_depend_on(measurer_case):
    measurer, params = measurer_case.measurer, measurer_case.ok.params
    assert isinstance(measurer.environment(params), str)
    run = measurer.run_of(params)
    assert run is None or isinstance(run, str)
    assert run == measurer.run_of(dict(params))  # a key: the same for the same values
    assert isinstance(measurer.warnings, tuple)
    assert all(isinstance(w, str) for w in measurer.warnings)
    assert measurer.run_dir is None or isinstance(measurer.run_dir, Path)
