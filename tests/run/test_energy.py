"""Energy meters (NVML counter, NVML power sampled, RAPL) and the runners that use them.

No GPU and no readable RAPL here: NVML is a stand-in module serving recorded sequences (shaped
like an H100's readings under load; not taken from one), RAPL a powercap tree under tmp_path
that the test (or the measured program) advances. The test marked `gpu` measures a real kernel
through NVML and skips, saying why, where there is no GPU, backend or nvidia-ml-py.
"""

from __future__ import annotations

import enum
import itertools
import math
import shutil
import subprocess
import sys
import threading
import time
import types
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest

from annotune.annotate.kernels import KernelSpec, kernel_specs
from annotune.annotate.source import parse_source
from annotune.builder import cubin_compiler
from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import BuildResult, objective_value
from annotune.run.backends import BackendError, BackendUnavailable, KernelBackend, open_backend
from annotune.run.backends.cuda_python_backend import CudaPythonBackend
from annotune.run.energy import (
    EnergyError,
    EnergyMeter,
    EnergyUnavailable,
    NvmlCounterMeter,
    NvmlSampledMeter,
    RaplMeter,
    nvml_meter,
    open_meter,
    rapl_meter,
    trapezoid_joules,
)
from annotune.run.kernel import ENERGY_SHORTFALL, KernelRunner
from annotune.run.program import ProgramRunner, RunSpec
from annotune.run.sampling import Sampling

FIXTURE = Path(__file__).parent.parent / "data" / "kernel" / "jacobi.cu"
DEFAULT = {"BLOCK_X": 32, "BLOCK_Y": 4}

# --- a stand-in NVML -----------------------------------------------------------------------------


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):  # noqa: N801  (pynvml's own name)
    pass


class FakeClock:
    """A clock that moves only when told (or by `step` at each reading of the power). The
    sampling thread and the test both move it: `advance` holds a lock, since `now += s` from
    two threads can lose one of the two."""

    def __init__(self) -> None:
        self.now = 100.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        with self._lock:
            self.now += seconds
            return self.now


def fake_nvml(
    *,
    energy: Iterable[int] | None = None,
    power: Iterable[int] | None = None,
    clock: FakeClock | None = None,
    step: float = 0.0,
    init_error: str = "",
) -> types.ModuleType:
    """pynvml serving `energy` (mJ) and `power` (mW) readings in turn; None: not supported.
    Each power reading advances `clock` by `step` seconds and is logged as (time, watts)."""
    module = types.ModuleType("pynvml")
    module.NVMLError = NVMLError
    module.shutdowns = 0
    module.power_log = []
    energies = iter(energy) if energy is not None else None
    powers = iter(power) if power is not None else None

    def init():
        if init_error:
            raise NVMLError(init_error)

    def shutdown():
        module.shutdowns += 1

    def total_energy(handle):
        if energies is None:
            raise NVMLError_NotSupported("Not Supported")
        millijoules = next(energies)
        if isinstance(millijoules, Exception):
            raise millijoules
        return millijoules

    def power_usage(handle):
        if powers is None:
            raise NVMLError_NotSupported("Not Supported")
        milliwatts = next(powers)
        if isinstance(milliwatts, Exception):
            raise milliwatts
        if clock is not None:
            module.power_log.append((clock.advance(step), milliwatts / 1e3))
        return milliwatts

    module.nvmlInit = init
    module.nvmlShutdown = shutdown
    module.nvmlDeviceGetHandleByIndex = lambda index: ("gpu", index)
    module.nvmlDeviceGetHandleByPciBusId = lambda bus: ("gpu", bus.decode())
    module.nvmlDeviceGetTotalEnergyConsumption = total_energy
    module.nvmlDeviceGetPowerUsage = power_usage
    return module


# An H100 running a kernel back to back: the counter (mJ since the driver loaded) read at open,
# then at both ends of a 1.2 s window that used 402.5 J.
H100_COUNTER = (81_234_567_890, 81_234_601_000, 81_235_003_500)

# Board power (mW) every 10 ms as a kernel starts: idle, ramp, plateau with noise.
RAMP_POWER = (71_250, 71_300, 140_800, 265_100, 341_900, 349_700, 352_300, 348_800, 351_200)


def test_the_energy_counter_is_read_at_both_ends_of_the_window(monkeypatch):
    clock = FakeClock()
    nvml = fake_nvml(energy=H100_COUNTER, power=itertools.repeat(300_000))
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    meter = nvml_meter(0, clock=clock)
    assert isinstance(meter, NvmlCounterMeter) and meter.method == "nvml-counter"
    assert meter.description == "NVML's total-energy counter of GPU 0"
    assert meter.min_window == 1.0
    meter.start()
    clock.advance(1.2)
    assert meter.elapsed() == pytest.approx(1.2)
    reading = meter.stop()
    assert reading.joules == pytest.approx(402.5) and reading.seconds == pytest.approx(1.2)
    meter.close()
    assert nvml.shutdowns == 1


def test_the_gpu_is_found_by_its_pci_bus_id_when_the_backend_tells_it(monkeypatch):
    nvml = fake_nvml(energy=itertools.count(0, 1000))
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    meter = nvml_meter(0, pci_bus_id="0000:65:00.0")
    assert meter.handle == ("gpu", "0000:65:00.0")
    assert meter.description == "NVML's total-energy counter of GPU 0000:65:00.0"
    assert nvml_meter(2).handle == ("gpu", 2)  # NVML's own numbering otherwise


class BusDriver:
    """Enough of `cuda.bindings.driver` for a CudaPythonBackend to open and tell its bus."""

    class CUresult(enum.IntEnum):
        CUDA_SUCCESS = 0

    class CUevent_flags(enum.IntEnum):
        CU_EVENT_DEFAULT = 0

    cuInit = staticmethod(lambda flags: (0,))
    cuDeviceGetCount = staticmethod(lambda: (0, 1))
    cuDeviceGet = staticmethod(lambda ordinal: (0, ordinal))
    cuDevicePrimaryCtxRetain = staticmethod(lambda device: (0, "context"))
    cuCtxSetCurrent = staticmethod(lambda context: (0,))
    cuEventCreate = staticmethod(lambda flags: (0, "event"))

    @staticmethod
    def cuDeviceGetPCIBusId(length, device):
        return (0, b"0000:65:00.0".ljust(length, b"\0"))


def test_the_cuda_python_backend_tells_its_pci_bus_id():
    assert CudaPythonBackend(driver=BusDriver()).pci_bus_id() == "0000:65:00.0"
    assert Backend(GpuClock()).pci_bus_id() == ""  # a backend that cannot tell


def test_a_counter_that_goes_back_is_an_error(monkeypatch):
    lost = NVMLError("GPU is lost")
    nvml = fake_nvml(energy=(5_000, 9_000, 1_000, lost, 1_200, 1_500))
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    meter = nvml_meter(0)
    meter.start()
    with pytest.raises(EnergyError, match="went back from 9000 to 1000 mJ"):
        meter.stop()
    meter.start()  # the failed window is closed: another may open; its first reading fails
    with pytest.raises(EnergyError, match="counter could not be read: GPU is lost"):
        meter.stop()  # said when the window closes, not when it opens
    meter.start()
    assert meter.stop().joules == pytest.approx(0.3)


def test_without_the_counter_power_is_sampled_and_integrated(monkeypatch):
    clock = FakeClock()
    nvml = fake_nvml(power=itertools.cycle(RAMP_POWER), clock=clock, step=0.01)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    meter = nvml_meter(0, interval=0.001, clock=clock)
    assert isinstance(meter, NvmlSampledMeter) and meter.method == "nvml-sampled"
    assert "sampled every 1 ms" in meter.description
    assert "energy counter is not supported: Not Supported" in meter.description
    nvml.power_log.clear()  # the probe at open is no part of a window
    meter.start()
    deadline = time.monotonic() + 10
    while len(nvml.power_log) < 12 and time.monotonic() < deadline:
        time.sleep(0.001)  # the thread samples while the window is open
    reading = meter.stop()
    log = np.array(nvml.power_log)
    assert len(log) >= 13  # the first, the thread's, the last
    expected = float(np.sum(np.diff(log[:, 0]) * (log[1:, 1] + log[:-1, 1]) / 2))
    assert reading.joules == pytest.approx(expected)
    assert meter.to_json() == {"method": "nvml-sampled", "min_window": 1.0, "interval": 0.001}


def test_constant_power_integrates_to_power_times_time(monkeypatch):
    # The clock moves only here: however many readings the sampling thread takes, and
    # whenever, the window is 0.5 s from the reading at start to the one at stop.
    clock = FakeClock()
    nvml = fake_nvml(power=itertools.repeat(250_000), clock=clock)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    meter = nvml_meter(0, interval=0.001, clock=clock)
    meter.start()
    time.sleep(0.01)  # the thread's readings at the start of the window
    clock.advance(0.5)
    time.sleep(0.01)  # and at its end
    reading = meter.stop()
    assert reading.joules == pytest.approx(250.0 * 0.5)


def test_trapezoid_of_recorded_samples():
    samples = [(0.0, 100.0), (0.5, 300.0), (1.0, 300.0), (1.25, 100.0)]
    assert trapezoid_joules(samples) == pytest.approx(100.0 + 150.0 + 50.0)
    assert trapezoid_joules(samples[:1]) == 0.0


def test_a_power_reading_that_fails_during_the_window_is_an_error(monkeypatch):
    readings = itertools.chain([300_000, 300_000], itertools.repeat(NVMLError("GPU is lost")))
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(power=readings))
    meter = nvml_meter(0, interval=0.001)
    meter.start()
    with pytest.raises(EnergyError, match="power reading failed: GPU is lost"):
        meter.stop()


def test_nvml_says_why_it_cannot_measure(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # the import fails
    with pytest.raises(EnergyUnavailable, match=r"nvidia-ml-py is not installed"):
        nvml_meter(0)
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(init_error="Driver Not Loaded"))
    with pytest.raises(EnergyUnavailable, match="NVML is not usable here: Driver Not Loaded"):
        nvml_meter(0)
    neither = fake_nvml()
    monkeypatch.setitem(sys.modules, "pynvml", neither)
    with pytest.raises(EnergyUnavailable, match=r"neither its energy \(Not Supported\)"):
        nvml_meter(0)
    assert neither.shutdowns == 1  # NVML is released when no meter is made


# --- RAPL ----------------------------------------------------------------------------------------

MAX_RANGE = 262_143_328_850  # µJ: what an Intel package reports


def powercap(tmp_path: Path, zones: dict[str, tuple[str, int]]) -> Path:
    """A /sys/class/powercap of zones: directory name -> (name, energy_uj)."""
    root = tmp_path / "powercap"
    for zone, (name, energy) in zones.items():
        (root / zone).mkdir(parents=True)
        (root / zone / "name").write_text(name + "\n")
        (root / zone / "energy_uj").write_text(f"{energy}\n")
        (root / zone / "max_energy_range_uj").write_text(f"{MAX_RANGE}\n")
    return root


def advance(root: Path, zone: str, microjoules: int) -> None:
    """The counter of `zone` moves on, wrapping at its range as the kernel's does."""
    path = root / zone / "energy_uj"
    path.write_text(f"{(int(path.read_text()) + microjoules) % MAX_RANGE}\n")


def test_rapl_sums_the_packages_and_undoes_a_wrap_around(tmp_path):
    root = powercap(
        tmp_path,
        {
            "intel-rapl:0": ("package-0", 1_000_000),
            "intel-rapl:0:0": ("core", 500),  # a part of package 0: not added again
            "intel-rapl:1": ("package-1", MAX_RANGE - 1_000_000),  # wraps in the window
            "intel-rapl:2": ("psys", 0),  # the platform: not a package
            "intel-rapl-mmio:0": ("package-0", 0),  # the same package through MMIO
        },
    )
    clock = FakeClock()
    meter = rapl_meter(root, clock=clock)
    assert isinstance(meter, RaplMeter) and meter.method == "rapl"
    assert [d.name for d in meter.domains] == ["package-0", "package-1"]
    assert meter.description == "RAPL energy counters of the host's packages (package-0, package-1)"
    meter.start()
    advance(root, "intel-rapl:0", 2_500_000)
    advance(root, "intel-rapl:0:0", 9_000_000)
    advance(root, "intel-rapl:1", 3_500_000)
    clock.advance(0.25)
    assert int((root / "intel-rapl:1" / "energy_uj").read_text()) < 3_500_000  # it wrapped
    reading = meter.stop()
    assert reading.joules == pytest.approx(6.0) and reading.seconds == pytest.approx(0.25)


def test_rapl_says_why_it_cannot_measure(tmp_path, monkeypatch):
    with pytest.raises(EnergyUnavailable, match="cannot be listed"):
        rapl_meter(tmp_path / "absent")
    root = powercap(tmp_path, {"intel-rapl:0": ("psys", 0)})
    with pytest.raises(EnergyUnavailable, match="no RAPL package domain under"):
        rapl_meter(root)
    root = powercap(tmp_path / "locked", {"intel-rapl:0": ("package-0", 7)})
    real = Path.read_text

    def denied(path: Path, *args, **kwargs) -> str:  # as Linux >= 5.10 answers a non-root user
        if path.name == "energy_uj":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", denied)
    with pytest.raises(EnergyUnavailable, match=r"energy_uj is not readable by this user"):
        rapl_meter(root)


def test_no_power_source_is_an_error_naming_each_tried(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with pytest.raises(AnnotuneError, match="energy cannot be measured here") as caught:
        open_meter(("nvml", "rapl"), powercap=tmp_path / "none")
    message = str(caught.value)
    assert "nvml: nvidia-ml-py is not installed" in message
    assert "rapl: " in message and "cannot be listed" in message
    assert "--objective time" in caught.value.hint
    root = powercap(tmp_path, {"intel-rapl:0": ("package-0", 7)})
    assert open_meter(("nvml", "rapl"), powercap=root).method == "rapl"  # the next one that works
    with pytest.raises(ValueError, match="power sources"):
        open_meter(("battery",))


def test_a_window_is_opened_before_it_is_closed(tmp_path):
    meter = rapl_meter(powercap(tmp_path, {"intel-rapl:0": ("package-0", 7)}))
    with pytest.raises(RuntimeError, match="no window is open"):
        meter.stop()
    meter.start()
    with pytest.raises(RuntimeError, match="open already"):
        meter.start()


# --- the kernel runner with a meter --------------------------------------------------------------


class GpuClock(FakeClock):
    """The stand-in GPU's time: each launch takes `per_launch` seconds of it."""


class Backend(KernelBackend):
    """A CPU stand-in whose launches do nothing but advance the GPU clock and count."""

    name = "fake"

    def __init__(self, clock: GpuClock, per_launch: float = 1e-3, times=(1.0,)):
        self.clock, self.per_launch = clock, per_launch
        self.times = itertools.cycle(times)
        self.launches = self.timed = 0

    def device_name(self) -> str:
        return "Fake GPU"

    def compute_capability(self) -> tuple[int, int]:
        return (9, 0)

    def l2_cache_bytes(self) -> int:
        return 1 << 30  # the fixture's arrays fit: timed launches are flushed

    def load(self, image, symbol):
        return symbol

    def unload(self, kernel) -> None:
        pass

    def allocate(self, nbytes):
        return np.zeros(nbytes, np.uint8)

    def free(self, buffer) -> None:
        pass

    def upload(self, buffer, array) -> None:
        buffer[: array.nbytes] = array.view(np.uint8)

    def download(self, buffer, array) -> None:
        array.view(np.uint8)[:] = buffer[: array.nbytes]

    def fill(self, buffer, nbytes) -> None:
        buffer[:nbytes] = 0

    def copy(self, target, source, nbytes) -> None:
        target[:nbytes] = source[:nbytes]

    def prepare(self, kernel, grid, block, shared, args):
        return kernel

    def launch(self, prepared) -> None:
        self.launches += 1
        self.clock.advance(self.per_launch)

    def timed_launches(self, prepared, count, flush, *, timeout):
        for _ in range(count):
            self.launch(prepared)
        self.timed += count
        return [next(self.times) for _ in range(count)]

    def synchronize(self, timeout) -> None:
        pass

    def recover(self) -> None:
        pass

    def close(self) -> None:
        pass


class Meter(EnergyMeter):
    """Sees `watts` while the backend launches, on the GPU clock; a counter that ticks only
    every `tick` seconds reads 0 J over a shorter window."""

    method = "fake"

    def __init__(self, backend: Backend, *, watts=200.0, tick=0.0, min_window=0.05, fail=""):
        super().__init__(min_window=min_window, clock=backend.clock)
        self.backend, self.watts, self.tick, self.fail = backend, watts, tick, fail
        self.windows: list[float] = []
        self._launches = 0

    @property
    def description(self) -> str:
        return "the fake meter"

    def _begin(self) -> None:
        self._launches = self.backend.launches

    def _end(self) -> float:
        if self.fail:
            raise EnergyError(self.fail)
        seconds = (self.backend.launches - self._launches) * self.backend.per_launch
        self.windows.append(seconds)
        return 0.0 if seconds < self.tick else self.watts * seconds

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def jacobi() -> KernelSpec:
    (spec,) = [
        s for s in kernel_specs(parse_source(FIXTURE), tuple(DEFAULT)) if s.name == "jacobi_step"
    ]
    return spec


def cubin(tmp_path: Path) -> BuildResult:
    path = tmp_path / "k.cubin"
    path.write_text("ok")
    return BuildResult(dict(DEFAULT), path)


FIXED = Sampling(min_runs=5, max_runs=5)


def test_energy_per_launch_from_batches_at_least_the_meters_window(jacobi, tmp_path):
    backend = Backend(GpuClock())
    meter = Meter(backend)  # 200 W: 0.2 J in each 1 ms launch
    runner = KernelRunner(jacobi, backend, sampling=FIXED, meter=meter)
    measured = runner.measure(cubin(tmp_path))
    assert measured.status == "ok" and measured.time == 1.0
    assert measured.energy == pytest.approx(0.2) and len(measured.energies) == 3
    assert measured.compile_info["energy"] == {
        "method": "fake",
        "launches": [50, 50, 50],  # 50 ms of 1 ms launches: the meter's window
        "seconds": [0.05, 0.05, 0.05],
    }
    assert backend.timed == 5 and backend.launches == 1 + 1 + 5 + 150  # check, warm-up, timed
    assert measured.compile_info["run_seconds"]["energy"] >= 0
    assert objective_value(measured, "edp") == pytest.approx(0.2 * 1e-3)
    assert runner.to_json()["energy"] == {"method": "fake", "min_window": 0.05, "batches": 3}
    assert "energy" not in KernelRunner(jacobi, backend).to_json()  # a study of its own


def test_a_batch_too_short_to_measure_is_made_longer(jacobi, tmp_path):
    backend = Backend(GpuClock(), per_launch=0.5e-3)  # faster back to back than timed
    meter = Meter(backend, tick=0.08)  # a coarse counter: nothing seen under 80 ms
    runner = KernelRunner(jacobi, backend, sampling=FIXED, meter=meter, energy_batches=2)
    measured = runner.measure(cubin(tmp_path))
    # 50 launches: 25 ms, too short; 100 launches: 50 ms, no energy seen; 200: 100 ms.
    assert meter.windows == pytest.approx([0.025, 0.05, 0.1, 0.025, 0.05, 0.1])
    assert measured.compile_info["energy"]["launches"] == [200, 200]
    assert measured.energy == pytest.approx(200.0 * 0.5e-3)


def test_energy_never_seen_is_no_energy_and_says_why(jacobi, tmp_path):
    backend = Backend(GpuClock())
    runner = KernelRunner(jacobi, backend, sampling=FIXED, meter=Meter(backend, tick=math.inf))
    measured = runner.measure(cubin(tmp_path))
    assert measured.status == "ok" and measured.time == 1.0  # the time stands
    assert measured.energy is None and measured.energies == ()
    error = measured.compile_info["energy"]["error"]
    assert error.startswith("the fake meter saw no energy in 4 ever longer batches")
    assert objective_value(measured, "energy") is None
    assert objective_value(measured, "time") == 1.0
    failing = Meter(backend, fail="NVML's energy counter could not be read: GPU is lost")
    runner = KernelRunner(jacobi, backend, sampling=FIXED, meter=failing)
    measured = runner.measure(cubin(tmp_path))
    assert measured.energy is None and "GPU is lost" in measured.compile_info["energy"]["error"]


def test_failed_configurations_get_no_energy_batches(jacobi, tmp_path):
    backend = Backend(GpuClock())
    runner = KernelRunner(jacobi, backend, meter=Meter(backend))
    measured = runner.measure(BuildResult(dict(DEFAULT), None, error="compile failed"))
    assert measured.status == "compile_error" and backend.launches == 0
    assert "energy" not in measured.compile_info


# --- the program runner with a meter -------------------------------------------------------------


def script(tmp_path: Path, body: str) -> BuildResult:
    """An executable that appends to `runs` in its directory, then does `body`."""
    path = tmp_path / "program"
    path.write_text(
        f"#!/bin/sh\necho x >> {tmp_path / 'runs'}\n{body}\necho 'annotune-time-ms: 4'\n"
    )
    path.chmod(0o755)
    return BuildResult({"A": 1}, path)


def burning(root: Path, microjoules: int) -> str:
    """Shell lines that advance package 0's counter as a run using that energy would."""
    counter = root / "intel-rapl:0" / "energy_uj"
    return f"read v < {counter}\necho $(( (v + {microjoules}) % {MAX_RANGE} )) > {counter}"


def test_each_timed_run_is_metered_over_its_whole_process(tmp_path):
    root = powercap(tmp_path, {"intel-rapl:0": ("package-0", MAX_RANGE - 4_000_000)})
    meter = rapl_meter(root, min_window=1e-6)
    runner = ProgramRunner(RunSpec(warmup=1, repeats=3, max_repeats=3), meter=meter)
    measured = runner.measure(script(tmp_path, burning(root, 2_500_000)))
    assert measured.status == "ok" and measured.time == 4.0
    assert (tmp_path / "runs").read_text().count("x") == 4  # one warm-up, three timed
    assert measured.energies == pytest.approx((2.5, 2.5, 2.5))  # the second run wraps
    assert measured.energy == pytest.approx(2.5)
    assert measured.compile_info["energy"] == {
        "method": "rapl",
        "per": "process run, start-up included",
    }
    assert runner.to_json()["energy"] == {"method": "rapl", "min_window": 1e-6}
    assert "energy" not in ProgramRunner(RunSpec()).to_json()


def test_a_run_too_short_or_with_no_energy_leaves_none(tmp_path):
    root = powercap(tmp_path, {"intel-rapl:0": ("package-0", 0)})
    spec = RunSpec(warmup=0, repeats=2, max_repeats=2)
    slow_meter = ProgramRunner(spec, meter=rapl_meter(root, min_window=30.0))
    measured = slow_meter.measure(script(tmp_path, burning(root, 1_000)))
    assert measured.status == "ok" and measured.energy is None and measured.energies == ()
    assert (
        "is shorter than the 30 s RAPL energy counters" in measured.compile_info["energy"]["error"]
    )
    idle = ProgramRunner(spec, meter=rapl_meter(root, min_window=1e-6))
    measured = idle.measure(script(tmp_path, ""))
    assert measured.energy is None
    assert "saw no energy over a run of" in measured.compile_info["energy"]["error"]
    crash = ProgramRunner(spec, meter=rapl_meter(root, min_window=1e-6))
    failed = crash.measure(script(tmp_path, "exit 3"))
    assert failed.status == "runtime_error" and failed.energy is None


# --- on a GPU ------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_a_kernels_energy_through_nvml_on_the_gpu(jacobi, tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    try:
        backend = open_backend("cuda-python")
    except (BackendUnavailable, BackendError) as why:
        pytest.skip(f"cuda-python: {why}")
    try:
        meter = nvml_meter(pci_bus_id=backend.pci_bus_id())
    except EnergyUnavailable as why:
        backend.close()
        pytest.skip(f"NVML: {why}")
    argv = cubin_compiler(backend.compute_capability()).render(
        FIXTURE,
        tmp_path / "k.cubin",
        [f"-D{k}={v}" for k, v in DEFAULT.items()],
        [str(FIXTURE.parent)],
    )
    subprocess.run(argv, check=True, capture_output=True)
    with backend:
        runner = KernelRunner(jacobi, backend, sampling=FIXED, meter=meter, energy_batches=2)
        measured = runner.measure(BuildResult(dict(DEFAULT), Path(argv[-1])))
    meter.close()
    assert measured.status == "ok", measured.error
    info = measured.compile_info["energy"]
    assert "error" not in info, info
    batches = zip(measured.energies, info["launches"], info["seconds"], strict=True)
    assert all(s >= ENERGY_SHORTFALL * meter.min_window for s in info["seconds"])
    watts = [e * n / s for e, n, s in batches]
    assert all(20 < w < 1500 for w in watts), watts  # a board's power, idle to its limit
    assert measured.energy > 0
