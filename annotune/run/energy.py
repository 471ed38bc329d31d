"""Energy measured beside time: NVML on the GPU, RAPL on the host.

A meter measures the energy used over a window that a runner opens (`start`) and closes
(`stop`) around work it launches, and says how it measured (`method`):

- `nvml-counter`: NVML's total-energy counter (`nvmlDeviceGetTotalEnergyConsumption`, mJ,
  Volta and later), read at both ends of the window.
- `nvml-sampled`: where the counter is not supported, the board power
  (`nvmlDeviceGetPowerUsage`, mW) sampled by a background thread every `interval` seconds
  during the window, with a sample at each end, integrated by the trapezoid rule.
- `rapl`: the host's package domains (`/sys/class/powercap/intel-rapl:N/energy_uj`, µJ),
  summed, each counter's wrap-around undone with its `max_energy_range_uj`. Readable only where
  the system lets this user (often root alone, since Linux 5.10); it counts everything the
  packages did in the window, other processes' work included.

Neither NVML source resolves short windows: the driver refreshes the counter and the power
reading every few tens of milliseconds (and newer GPUs report power averaged over up to a
second), so a meter declares `min_window`, the shortest window whose reading it vouches for.
Runners make their windows at least that long, and never report a reading of 0 J. Nothing is
subtracted: an energy is the whole board's (or package's) over the window, idle power included.

`open_meter` tries the sources it is given in order and raises AnnotuneError naming each one
tried and why it cannot be used.
"""

from __future__ import annotations

import importlib
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from annotune.core.diagnostics import AnnotuneError

__all__ = [
    "SOURCES",
    "EnergyError",
    "EnergyMeter",
    "EnergyReading",
    "EnergyUnavailable",
    "NvmlCounterMeter",
    "NvmlSampledMeter",
    "RaplMeter",
    "nvml_meter",
    "open_meter",
    "rapl_meter",
    "trapezoid_joules",
]

SOURCES = ("nvml", "rapl")
"""The power sources `open_meter` knows, by name."""

NVML_MIN_WINDOW_S = 1.0
"""The shortest window an NVML reading is trusted over: the counter and the power reading are
refreshed every ~20-100 ms, so over one second the error of a reading is a few percent."""

NVML_SAMPLE_INTERVAL_S = 0.01
"""How often the sampling meter reads the power."""

RAPL_MIN_WINDOW_S = 0.05
"""RAPL counters are refreshed about every millisecond: 50 ms hold many refreshes."""

POWERCAP = Path("/sys/class/powercap")

_PACKAGE_ZONE = re.compile(r"intel-rapl:\d+")
"""A top-level RAPL zone (`intel-rapl:N`); its subzones (`intel-rapl:N:M`: cores, uncore,
DRAM) are parts of the package, or outside it, and are not added."""

Clock = Callable[[], float]


class EnergyUnavailable(Exception):
    """This power source cannot be used here; the message says why."""


class EnergyError(Exception):
    """A reading failed during a window (the driver went away, a file became unreadable)."""


@dataclass(frozen=True)
class EnergyReading:
    """The energy used over one window (J) and how long the window was (s)."""

    joules: float
    seconds: float


class EnergyMeter(ABC):
    """Measures the energy used between `start` and `stop`; one window at a time, from one
    thread. `method` names the source, `min_window` the shortest window (s) whose reading it
    vouches for, `description` says both in words."""

    method: str
    min_window: float

    def __init__(self, *, min_window: float, clock: Clock = time.perf_counter) -> None:
        if not min_window > 0:
            raise ValueError("the minimum window must be positive")
        self.min_window = min_window
        self.clock = clock
        self._started: float | None = None
        self._failed = ""  # why the window's first reading failed

    @property
    @abstractmethod
    def description(self) -> str:
        """What is measured and how, e.g. "NVML's total-energy counter of GPU 0"."""

    def start(self) -> None:
        """Open a window. A reading that fails here is raised by `stop`, so that the work
        measured is run and its window closed the same way whatever happens."""
        if self._started is not None:
            raise RuntimeError("a window is open already")
        try:
            self._begin()
            self._failed = ""
        except EnergyError as error:
            self._failed = str(error)
        self._started = self.clock()

    def elapsed(self) -> float:
        """Seconds since `start`, by the meter's clock."""
        if self._started is None:
            raise RuntimeError("no window is open")
        return self.clock() - self._started

    def stop(self) -> EnergyReading:
        """Close the window; its energy. EnergyError when a reading failed."""
        if self._started is None:
            raise RuntimeError("no window is open")
        started, self._started = self._started, None
        if self._failed:
            raise EnergyError(self._failed)
        joules = self._end()
        return EnergyReading(joules, self.clock() - started)

    def to_json(self) -> dict:
        """What changes an energy: part of the study key of the runner that uses this meter."""
        return {"method": self.method, "min_window": self.min_window}

    @abstractmethod
    def close(self) -> None:
        """Release the source."""

    @abstractmethod
    def _begin(self) -> None:
        """Take what the window's energy is measured from."""

    @abstractmethod
    def _end(self) -> float:
        """The energy since `_begin`, in joules."""


class NvmlCounterMeter(EnergyMeter):
    """NVML's total-energy counter (mJ since the driver was loaded), read at both ends."""

    method = "nvml-counter"

    def __init__(
        self,
        nvml: Any,
        handle: Any,
        *,
        gpu: str = "GPU 0",
        min_window: float = NVML_MIN_WINDOW_S,
        clock: Clock = time.perf_counter,
    ) -> None:
        super().__init__(min_window=min_window, clock=clock)
        self.nvml, self.handle, self.gpu = nvml, handle, gpu
        self._first = 0

    @property
    def description(self) -> str:
        return f"NVML's total-energy counter of {self.gpu}"

    def _read(self) -> int:
        try:
            return int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))
        except Exception as error:  # NVMLError and its subclasses
            raise EnergyError(f"NVML's energy counter could not be read: {_said(error)}") from None

    def _begin(self) -> None:
        self._first = self._read()

    def _end(self) -> float:
        last = self._read()
        if last < self._first:
            raise EnergyError(
                f"NVML's energy counter went back from {self._first} to {last} mJ "
                "(the driver was reloaded?)"
            )
        return (last - self._first) / 1e3

    def close(self) -> None:
        self.nvml.nvmlShutdown()


class NvmlSampledMeter(EnergyMeter):
    """The board power sampled by a background thread and integrated (trapezoid rule).

    `why` says why the energy counter is not used. NVML is thread-safe; the thread holds no
    state but its samples, which `stop` reads after joining it.
    """

    method = "nvml-sampled"

    def __init__(
        self,
        nvml: Any,
        handle: Any,
        *,
        gpu: str = "GPU 0",
        why: str = "",
        interval: float = NVML_SAMPLE_INTERVAL_S,
        min_window: float = NVML_MIN_WINDOW_S,
        clock: Clock = time.perf_counter,
    ) -> None:
        super().__init__(min_window=min_window, clock=clock)
        if not interval > 0:
            raise ValueError("the sampling interval must be positive")
        self.nvml, self.handle, self.gpu = nvml, handle, gpu
        self.why = why
        self.interval = interval
        self._samples: list[tuple[float, float]] = []
        self._failure = ""
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def description(self) -> str:
        said = f" (the energy counter is not supported: {self.why})" if self.why else ""
        return (
            f"NVML's power readings of {self.gpu}, sampled every "
            f"{self.interval * 1e3:g} ms and integrated{said}"
        )

    def to_json(self) -> dict:
        return {**super().to_json(), "interval": self.interval}

    def _sample(self) -> bool:
        """Add (time, watts) to the samples; False, and the failure kept, when NVML fails."""
        try:
            watts = self.nvml.nvmlDeviceGetPowerUsage(self.handle) / 1e3
        except Exception as error:  # NVMLError and its subclasses
            self._failure = f"NVML's power reading failed: {_said(error)}"
            return False
        self._samples.append((self.clock(), watts))
        return True

    def _sampling(self) -> None:
        while not self._halt.wait(self.interval) and self._sample():
            pass

    def _begin(self) -> None:
        self._samples, self._failure = [], ""
        self._halt.clear()
        if not self._sample():
            raise EnergyError(self._failure)
        self._thread = threading.Thread(target=self._sampling, name="annotune-power", daemon=True)
        self._thread.start()

    def _end(self) -> float:
        self._halt.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._failure or not self._sample():
            raise EnergyError(self._failure)
        return trapezoid_joules(self._samples)

    def close(self) -> None:
        self.nvml.nvmlShutdown()


def trapezoid_joules(samples: Sequence[tuple[float, float]]) -> float:
    """The energy (J) of power samples (seconds, watts) in time order, by the trapezoid rule."""
    return sum(
        (t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in zip(samples, samples[1:], strict=False)
    )


@dataclass(frozen=True)
class RaplDomain:
    """One package's RAPL counter: its `energy_uj` file and the value it wraps around at."""

    name: str
    energy_file: Path
    max_range_uj: int


class RaplMeter(EnergyMeter):
    """The host's package energy through RAPL (powercap), summed over the packages.

    A counter that wrapped during the window (it went down) has wrapped once: at 200 W a
    package counter wraps every twenty minutes or so, far longer than any window here.
    """

    method = "rapl"

    def __init__(
        self,
        domains: Sequence[RaplDomain],
        *,
        min_window: float = RAPL_MIN_WINDOW_S,
        clock: Clock = time.perf_counter,
    ) -> None:
        super().__init__(min_window=min_window, clock=clock)
        if not domains:
            raise ValueError("RAPL needs at least one domain")
        self.domains = tuple(domains)
        self._first: list[int] = []

    @property
    def description(self) -> str:
        names = ", ".join(domain.name for domain in self.domains)
        return f"RAPL energy counters of the host's packages ({names})"

    def _read(self) -> list[int]:
        values = []
        for domain in self.domains:
            try:
                values.append(int(domain.energy_file.read_text().strip()))
            except (OSError, ValueError) as error:
                raise EnergyError(f"{domain.energy_file} could not be read: {error}") from None
        return values

    def _begin(self) -> None:
        self._first = self._read()

    def close(self) -> None:
        """Nothing to release: each reading opens its files anew."""

    def _end(self) -> float:
        total = 0
        for domain, first, last in zip(self.domains, self._first, self._read(), strict=True):
            total += last - first if last >= first else last + domain.max_range_uj - first
        return total / 1e6


def rapl_meter(
    root: Path = POWERCAP,
    *,
    min_window: float = RAPL_MIN_WINDOW_S,
    clock: Clock = time.perf_counter,
) -> RaplMeter:
    """A meter of the package domains under `root` (`intel-rapl:N` whose `name` begins with
    "package"); EnergyUnavailable saying why when there are none or they cannot be read."""
    try:
        zones = sorted(p for p in root.iterdir() if _PACKAGE_ZONE.fullmatch(p.name))
    except OSError as error:
        raise EnergyUnavailable(f"{root} cannot be listed ({_reason(error)})") from None
    domains = []
    for zone in zones:
        try:
            name = (zone / "name").read_text().strip()
            if not name.startswith("package"):
                continue
            int((zone / "energy_uj").read_text())
            max_range = int((zone / "max_energy_range_uj").read_text())
        except PermissionError:
            raise EnergyUnavailable(
                f"{zone / 'energy_uj'} is not readable by this user (RAPL counters are often "
                "root's alone; an administrator can grant read access)"
            ) from None
        except (OSError, ValueError) as error:
            raise EnergyUnavailable(f"{zone} cannot be read ({_reason(error)})") from None
        domains.append(RaplDomain(name, zone / "energy_uj", max_range))
    if not domains:
        raise EnergyUnavailable(f"no RAPL package domain under {root} (intel-rapl:N)")
    return RaplMeter(domains, min_window=min_window, clock=clock)


def nvml_meter(
    index: int = 0,
    *,
    pci_bus_id: str = "",
    min_window: float = NVML_MIN_WINDOW_S,
    interval: float = NVML_SAMPLE_INTERVAL_S,
    clock: Clock = time.perf_counter,
) -> EnergyMeter:
    """A meter of a GPU through NVML: its energy counter where supported, else its power
    sampled; EnergyUnavailable saying why when NVML or the GPU cannot be used.

    The GPU is the one at `pci_bus_id` when given (a kernel backend's `pci_bus_id()`: the GPU
    it launches on, however CUDA numbers it), else NVML's GPU `index` (NVML numbers every GPU
    of the machine in PCI order and ignores CUDA_VISIBLE_DEVICES)."""
    try:
        nvml = importlib.import_module("pynvml")
    except ImportError:
        raise EnergyUnavailable(
            "nvidia-ml-py is not installed (pip install 'annotune[nvml]')"
        ) from None
    try:
        nvml.nvmlInit()
    except Exception as error:  # NVMLError and its subclasses: no driver, no access
        raise EnergyUnavailable(f"NVML is not usable here: {_said(error)}") from None
    where = f"GPU {pci_bus_id}" if pci_bus_id else f"GPU {index}"
    try:
        if pci_bus_id:
            handle = nvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id.encode())
        else:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
    except Exception as error:
        nvml.nvmlShutdown()
        raise EnergyUnavailable(f"no {where} through NVML: {_said(error)}") from None
    try:
        nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except Exception as error:
        why = _said(error)
    else:
        return NvmlCounterMeter(nvml, handle, gpu=where, min_window=min_window, clock=clock)
    try:
        nvml.nvmlDeviceGetPowerUsage(handle)
    except Exception as error:
        nvml.nvmlShutdown()
        raise EnergyUnavailable(
            f"{where} reports neither its energy ({why}) nor its power ({_said(error)})"
        ) from None
    return NvmlSampledMeter(
        nvml, handle, gpu=where, why=why, interval=interval, min_window=min_window, clock=clock
    )


def open_meter(
    sources: Sequence[str], *, gpu: int = 0, pci_bus_id: str = "", powercap: Path = POWERCAP
) -> EnergyMeter:
    """The first of `sources` ("nvml": the GPU at `pci_bus_id`, else NVML's GPU `gpu`; "rapl":
    the host's packages, under `powercap`) that can measure here, with its default window.

    AnnotuneError, naming every source tried and why it cannot be used, when none can.
    """
    unknown = [source for source in sources if source not in SOURCES]
    if unknown or not sources:
        raise ValueError(f"power sources are some of {SOURCES}, not {list(sources)}")
    reasons = []
    for source in sources:
        try:
            if source == "nvml":
                return nvml_meter(gpu, pci_bus_id=pci_bus_id)
            return rapl_meter(powercap)
        except EnergyUnavailable as why:
            reasons.append(f"{source}: {why}")
    raise AnnotuneError(
        "energy cannot be measured here: no power source is usable (" + "; ".join(reasons) + ")",
        hint="on an NVIDIA GPU install nvidia-ml-py (pip install 'annotune[nvml]'); on the host "
        "RAPL needs read access to /sys/class/powercap/intel-rapl:*/energy_uj; or tune for "
        "time (--objective time)",
    )


def _said(error: Exception) -> str:
    """An error's text, or its type's name when it has none (some NVMLErrors)."""
    return str(error) or type(error).__name__


def _reason(error: OSError) -> str:
    return error.strerror or str(error)
