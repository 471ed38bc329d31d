"""The GPU's conditions while it is measured (NVML): SM clock, temperature, power, throttling.

A configuration timed while the GPU was power- or heat-throttled is slower for reasons of its
own; recording the conditions with each measurement lets the report say so instead of
crediting (or blaming) the configuration. NVML comes from `nvidia-ml-py`
(`pip install 'annotune[nvml]'`); without it, or without an NVIDIA driver, nothing is recorded
and `open_monitor` says why.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

THROTTLE_REASONS = {
    0x4: "power cap",
    0x8: "hardware slowdown",
    0x20: "thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "power brake",
}
"""NVML's clock-event bits that slow a busy GPU down (idle, application clocks and sync boost
are not a throttle)."""

_NVML_CLOCK_SM = 1
_NVML_TEMPERATURE_GPU = 0


@dataclass
class GpuMonitor:
    """Reads one GPU's conditions through an initialised NVML module."""

    nvml: Any
    handle: Any

    def sample(self) -> dict[str, Any]:
        """The conditions now: SM clock (MHz), temperature (°C), power (W), throttle reasons."""
        nvml, handle = self.nvml, self.handle
        reasons = nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)
        return {
            "sm_clock_mhz": int(nvml.nvmlDeviceGetClockInfo(handle, _NVML_CLOCK_SM)),
            "temperature_c": int(nvml.nvmlDeviceGetTemperature(handle, _NVML_TEMPERATURE_GPU)),
            "power_w": round(nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0, 1),
            "throttled": [name for bit, name in THROTTLE_REASONS.items() if reasons & bit],
        }

    def close(self) -> None:
        self.nvml.nvmlShutdown()


def open_monitor(index: int = 0) -> tuple[GpuMonitor | None, str]:
    """A monitor of GPU `index`, or None and why there is none."""
    try:
        nvml = importlib.import_module("pynvml")
    except ImportError:
        return None, "nvidia-ml-py is not installed (pip install 'annotune[nvml]')"
    try:
        nvml.nvmlInit()
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        monitor = GpuMonitor(nvml, handle)
        monitor.sample()
    except Exception as error:  # NVMLError and its many subclasses: no driver, no GPU, no access
        return None, f"NVML is not usable here: {error}"
    return monitor, ""


def summarize(samples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One measurement's conditions from the samples taken during it: the lowest clock, the
    highest temperature and power, and every throttle reason seen."""
    if not samples:
        return {}
    return {
        "sm_clock_mhz": min(s["sm_clock_mhz"] for s in samples),
        "temperature_c": max(s["temperature_c"] for s in samples),
        "power_w": max(s["power_w"] for s in samples),
        "throttled": sorted({reason for s in samples for reason in s["throttled"]}),
    }
