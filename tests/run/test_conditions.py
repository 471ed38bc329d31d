"""GPU conditions through NVML, with a stand-in NVML module (no GPU here)."""

from __future__ import annotations

import sys
import types

from annotune.run.conditions import open_monitor, summarize


def fake_nvml(reasons: int = 0, fail: bool = False) -> types.ModuleType:
    module = types.ModuleType("pynvml")

    def init():
        if fail:
            raise RuntimeError("NVML Shared Library Not Found")

    module.nvmlInit = init
    module.nvmlShutdown = lambda: None
    module.nvmlDeviceGetHandleByIndex = lambda index: ("gpu", index)
    module.nvmlDeviceGetClockInfo = lambda handle, kind: 1755 if kind == 1 else 0
    module.nvmlDeviceGetTemperature = lambda handle, sensor: 61
    module.nvmlDeviceGetPowerUsage = lambda handle: 312_456
    module.nvmlDeviceGetCurrentClocksThrottleReasons = lambda handle: reasons
    return module


def test_a_sample_reads_clock_temperature_power_and_throttling(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(reasons=0x1 | 0x4 | 0x40))
    monitor, why = open_monitor()
    assert why == "" and monitor is not None
    assert monitor.sample() == {
        "sm_clock_mhz": 1755,
        "temperature_c": 61,
        "power_w": 312.5,
        "throttled": ["power cap", "hardware thermal slowdown"],  # idle is not a throttle
    }


def test_without_nvml_it_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    monitor, why = open_monitor()
    assert monitor is None and "nvidia-ml-py" in why
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(fail=True))
    monitor, why = open_monitor()
    assert monitor is None and "Shared Library" in why


def test_summary_keeps_the_worst_conditions():
    a = {"sm_clock_mhz": 1980, "temperature_c": 50, "power_w": 200.0, "throttled": []}
    b = {"sm_clock_mhz": 1410, "temperature_c": 83, "power_w": 350.0, "throttled": ["power cap"]}
    assert summarize([a, b]) == {
        "sm_clock_mhz": 1410,
        "temperature_c": 83,
        "power_w": 350.0,
        "throttled": ["power cap"],
    }
    assert summarize([]) == {}
