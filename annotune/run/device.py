"""Which device this machine tunes for, and its file-safe name.

The name picks the tuned header (`tuned/<slug>/<stem>.h`) and is part of every study's key,
so it must be the same on every machine with the same device:

1. `ANNOTUNE_DEVICE` in the environment, when set and not empty (e.g. to give a Makefile a
   fixed name, or to skip asking the driver);
2. the first GPU's name as `nvidia-smi` reports it ("NVIDIA A100-PCIE-40GB");
3. else `cpu-<model>` from /proc/cpuinfo's `model name` (or `platform.processor()`).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

from annotune.core.tools import run_tool

DEVICE_ENV = "ANNOTUNE_DEVICE"
NVIDIA_SMI_TIMEOUT_S = 5.0
"""A wedged driver can make nvidia-smi hang; past this, the machine counts as having no GPU."""


def current_device_name() -> str:
    """The device this machine tunes for (see the module docstring for the order)."""
    override = os.environ.get(DEVICE_ENV, "").strip()
    if override:
        return override
    return gpu_name() or cpu_name()


def gpu_name() -> str | None:
    """The first NVIDIA GPU's name, or None when there is none or nvidia-smi fails."""
    done = run_tool(
        ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], timeout=NVIDIA_SMI_TIMEOUT_S
    )
    if not done.ok:
        return None
    names = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    return names[0] if names else None


CPU_PREFIX = "cpu-"
"""What begins the name of a host processor tuned for (`cpu_name`), never a GPU's."""


def cpu_name(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """`cpu-<model>`, e.g. "cpu-Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz"."""
    model = ""
    try:
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                model = value.strip()
                break
    except OSError:
        pass
    model = model or platform.processor() or platform.machine() or "unknown"
    return f"{CPU_PREFIX}{' '.join(model.split())}"
