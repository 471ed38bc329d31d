"""A GPU's features read from the live device (source "device"): the driver's attributes
through pycuda or cuda-python, else nvidia-smi or rocm-smi merged over the table's entry of the
name they report; what the driver does not report is derived from per-architecture constants
(FP32 lanes per SM, the FP64:FP32 ratio), so a live reading agrees with the table's entry."""

from __future__ import annotations

import importlib
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from annotune.core.tools import run_tool
from annotune.run import device as devices
from annotune.transfer.features import DeviceFeatures, lookup, name_key


def read_from_device(ordinal: int = 0) -> DeviceFeatures | None:
    """The features of GPU `ordinal`, read from the GPU; None when there is none.

    Tried in turn: pycuda's device attributes, the same attributes through NVIDIA's
    cuda-python (what the lent GPU machines ship), `nvidia-smi` merged over the table entry
    of the name it reports (nvidia-smi knows no SM count, bus width or cache size), and last
    `rocm-smi` likewise for an AMD GPU.
    What the driver does not report is derived: FP32 lanes from the SM count and the lanes per
    SM of the compute capability, bandwidth = 2 * memory clock * bus / 8, peak FP32 =
    2 * lanes * clock, peak FP64 from the architecture's FP64:FP32 ratio. None also when the
    GPU is neither in those per-architecture constants nor in the table. Never raises for a
    missing driver or library; a hanging nvidia-smi is given up after
    `devices.NVIDIA_SMI_TIMEOUT_S`, a hanging rocm-smi after `ROCM_SMI_TIMEOUT_S`.
    """
    for reader in (_read_pycuda, _read_cuda_python):
        found = reader(ordinal)
        if found is not None:
            return _from_attributes(*found)
    return _read_nvidia_smi(ordinal) or _read_rocm_smi(ordinal)


def features_for(name: str) -> DeviceFeatures | None:
    """The features of the GPU called `name`: read from the device when it is this machine's
    GPU (`devices.gpu_name()`), else from the table; None when neither knows it."""
    if name_key(name) and name.strip() == devices.gpu_name():
        live = read_from_device(0)
        # CUDA may number GPUs differently from nvidia-smi on a machine with several kinds.
        if live is not None and name_key(live.name) == name_key(name):
            return live
    return lookup(name)


_ATTRIBUTES = (
    "COMPUTE_CAPABILITY_MAJOR",
    "COMPUTE_CAPABILITY_MINOR",
    "MULTIPROCESSOR_COUNT",
    "CLOCK_RATE",  # kHz
    "MEMORY_CLOCK_RATE",  # kHz
    "GLOBAL_MEMORY_BUS_WIDTH",  # bits
    "L2_CACHE_SIZE",  # bytes
    "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",  # bytes
    "MAX_SHARED_MEMORY_PER_BLOCK",  # bytes: the 48 KiB default, used when opt-in is unknown
    "MAX_REGISTERS_PER_BLOCK",
)
"""CUDA device attributes read from a live GPU (pycuda drops the CU_DEVICE_ATTRIBUTE_ prefix)."""


Attributes = dict[str, int]


# FP32 lanes per SM and FP64:FP32 throughput, from the CUDA C++ Programming Guide's table of
# arithmetic instruction throughput per compute capability: by (major, minor), else by major.
_LANES_PER_SM = {(6, 0): 64, (8, 0): 64}


_LANES_PER_SM_BY_MAJOR = {5: 128, 6: 128, 7: 64, 8: 128, 9: 128, 10: 128, 12: 128}


_FP64_RATIO = {(6, 0): 1 / 2, (7, 0): 1 / 2, (8, 0): 1 / 2, (9, 0): 1 / 2, (10, 0): 1 / 2}


_FP64_RATIO_BY_MAJOR = {5: 1 / 32, 6: 1 / 32, 7: 1 / 32, 8: 1 / 64, 12: 1 / 64}


_FAMILY = {(7, 5): "Turing", (8, 9): "Ada Lovelace"}


_FAMILY_BY_MAJOR = {
    5: "Maxwell",
    6: "Pascal",
    7: "Volta",
    8: "Ampere",
    9: "Hopper",
    10: "Blackwell",
    12: "Blackwell",
}


def _per_architecture(exact: dict, by_major: dict, major: int, minor: int) -> Any:
    return exact.get((major, minor), by_major.get(major))


def _from_attributes(name: str, attributes: Attributes) -> DeviceFeatures | None:
    """Features from CUDA device attributes; what they lack comes from the table entry."""
    major = attributes.get("COMPUTE_CAPABILITY_MAJOR")
    minor = attributes.get("COMPUTE_CAPABILITY_MINOR")
    if major is None or minor is None:
        return None
    entry = lookup(name)
    known = dict(entry.values) if entry is not None else {}

    def reported(attribute: str, unit: float = 1.0) -> float | None:
        value = attributes.get(attribute)
        return value / unit if value else None  # 0: the driver does not know

    values: dict[str, float | None] = {
        "vendor_nvidia": 1.0,
        "compute_capability": major + minor / 10,
        "multiprocessors": reported("MULTIPROCESSOR_COUNT"),
        "core_clock_mhz": reported("CLOCK_RATE", 1000),
        "memory_clock_mhz": reported("MEMORY_CLOCK_RATE", 1000),
        "memory_bus_bits": reported("GLOBAL_MEMORY_BUS_WIDTH"),
        "l2_kib": reported("L2_CACHE_SIZE", 1024),
        "shared_per_block_kib": reported("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", 1024),
        "registers_per_block": reported("MAX_REGISTERS_PER_BLOCK"),
    }
    for feature, value in values.items():
        if value is None:
            values[feature] = known.get(feature)
    if values["shared_per_block_kib"] is None:
        values["shared_per_block_kib"] = reported("MAX_SHARED_MEMORY_PER_BLOCK", 1024)

    lanes = _per_architecture(_LANES_PER_SM, _LANES_PER_SM_BY_MAJOR, major, minor)
    sms = values["multiprocessors"]
    cores = sms * lanes if sms is not None and lanes else known.get("cores")
    ratio = _per_architecture(_FP64_RATIO, _FP64_RATIO_BY_MAJOR, major, minor)
    if ratio is None and known:
        ratio = known["peak_dp_gflops"] / known["peak_sp_gflops"]
    if cores is None or ratio is None or any(v is None for v in values.values()):
        return None
    clock, memory = values["core_clock_mhz"], values["memory_clock_mhz"]
    values["cores"] = cores
    values["memory_bandwidth_gbs"] = 2 * memory * values["memory_bus_bits"] / 8 / 1000
    values["peak_sp_gflops"] = 2 * cores * clock / 1000
    values["peak_dp_gflops"] = values["peak_sp_gflops"] * ratio
    if entry is not None:
        architecture = entry.architecture
    else:
        family = _per_architecture(_FAMILY, _FAMILY_BY_MAJOR, major, minor)
        architecture = f"{family} (sm_{major}{minor})" if family else f"sm_{major}{minor}"
    return DeviceFeatures(name, architecture, values, "device")


def _read_pycuda(ordinal: int) -> tuple[str, Attributes] | None:
    """The GPU's name and attributes through pycuda; None without pycuda, driver or GPU."""
    try:
        cuda = importlib.import_module("pycuda.driver")
    except ImportError:
        return None
    try:
        cuda.init()
        device = cuda.Device(ordinal)
        attributes = {}
        for key in _ATTRIBUTES:
            attribute = getattr(cuda.device_attribute, key, None)  # older pycuda lacks some
            if attribute is not None:
                attributes[key] = int(device.get_attribute(attribute))
        return str(device.name()), attributes
    except Exception:  # noqa: BLE001  (pycuda.driver.Error, or no libcuda at all)
        return None


def _read_cuda_python(ordinal: int) -> tuple[str, Attributes] | None:
    """The same through cuda-python's driver API, whose calls return (CUresult, value)."""
    driver = None
    for module in ("cuda.bindings.driver", "cuda.cuda"):  # cuda-bindings >= 12.6, older
        try:
            driver = importlib.import_module(module)
            break
        except ImportError:
            continue
    if driver is None:
        return None
    try:
        success = driver.CUresult.CUDA_SUCCESS
        if driver.cuInit(0)[0] != success:
            return None
        error, device = driver.cuDeviceGet(ordinal)
        if error != success:
            return None
        error, name = driver.cuDeviceGetName(256, device)
        if error != success:
            return None
        attributes = {}
        for key in _ATTRIBUTES:
            attribute = getattr(driver.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{key}", None)
            if attribute is None:
                continue
            error, value = driver.cuDeviceGetAttribute(attribute, device)
            if error == success:
                attributes[key] = int(value)
        return name.split(b"\0", 1)[0].decode(), attributes
    except Exception:  # noqa: BLE001  (without libcuda, cuda-bindings raises rather than returns)
        return None


_SMI_FIELDS = "name,clocks.max.sm,clocks.max.memory"


def _read_nvidia_smi(ordinal: int) -> DeviceFeatures | None:
    """The table entry of the GPU nvidia-smi names, with the clocks it reports.

    nvidia-smi's maximum SM clock is the firmware's ceiling, which on GeForce boards lies far
    above the rated boost clock that the table and CUDA report (2100 against 1695 MHz on an RTX
    3090); it is used only when lower, i.e. on a board clocked below its published boost. The
    memory clock is the same quantity as the table's. Peak FLOPS and bandwidth follow the
    clocks in proportion.
    """
    query = [f"--query-gpu={_SMI_FIELDS}", "--format=csv,noheader,nounits", "-i", str(ordinal)]
    done = run_tool(["nvidia-smi", *query], timeout=devices.NVIDIA_SMI_TIMEOUT_S)
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if not done.ok or not lines:
        return None
    fields = [f.strip() for f in lines[0].rsplit(",", 2)]
    if len(fields) != 3:
        return None
    name, sm_clock, memory_clock = fields[0], _megahertz(fields[1]), _megahertz(fields[2])
    entry = lookup(name)
    if entry is None:
        return None
    values = dict(entry.values)
    _cap_core_clock(values, sm_clock)
    if memory_clock is not None:
        values["memory_bandwidth_gbs"] *= memory_clock / values["memory_clock_mhz"]
        values["memory_clock_mhz"] = memory_clock
    return DeviceFeatures(name, entry.architecture, values, "device")


def _cap_core_clock(values: dict[str, float], clock: float | None) -> None:
    """Lower the table's core clock to a reported maximum below it, and peak FLOPS in
    proportion: the board runs below its published peak. A reported maximum above the
    published one is a firmware or overdrive ceiling, not the rated clock, and is ignored."""
    if clock is not None and clock < values["core_clock_mhz"]:
        scale = clock / values["core_clock_mhz"]
        values["core_clock_mhz"] = clock
        values["peak_sp_gflops"] *= scale
        values["peak_dp_gflops"] *= scale


def _megahertz(text: str) -> float | None:
    """A clock from nvidia-smi, or None for "[N/A]", "[Not Supported]" and the like."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


ROCM_SMI_TIMEOUT_S = 10.0
"""rocm-smi is a Python program that loads its library and asks the driver (slower to start
than nvidia-smi, and as able to hang on a wedged driver); past this, no AMD GPU is read."""


_ROCM_NAME_KEYS = ("card series", "card model")


_ROCM_ONE_NAME = re.compile(r"\[([^\]/]+)\]")


_ROCM_TOP_CLOCK = re.compile(r"([0-9.]+)\s*mhz\s*$", re.IGNORECASE)


def _read_rocm_smi(ordinal: int) -> DeviceFeatures | None:
    """The table entry of the AMD GPU rocm-smi names, with the engine clock it reports.

    rocm-smi knows no CU count, bus width or cache size, so the table must know the GPU: None
    when it does not (`annotune.transfer.resolve` then falls back on the name). The top of
    the "Valid sclk range" (the overdrive range, absent where overdrive is off) lowers the
    clock as nvidia-smi's does. Its memory clock is not used: for GDDR6 it counts a sixteenth
    of the data rate, not the table's half (an 18 Gbps board reports 1124 MHz, not 9000).
    """
    card = _rocm_smi_card(ordinal)
    if card is None:
        return None
    found = _rocm_smi_entry(card)
    if found is None:
        return None
    name, entry = found
    values = dict(entry.values)
    clock = _ROCM_TOP_CLOCK.search(card.get("valid sclk range", ""))
    _cap_core_clock(values, _megahertz(clock.group(1)) if clock else None)
    return DeviceFeatures(name, entry.architecture, values, "device")


def _rocm_smi_card(ordinal: int) -> dict[str, str] | None:
    """What `rocm-smi --json` says of device `ordinal`, its keys in lower case (ROCm before
    6.1 writes "Card series", later ones "Card Series"); None when rocm-smi is missing,
    fails, hangs or prints anything but that JSON object. rocm-smi exits 0 on some failures
    ("Driver not initialized"), printing nothing: only the JSON tells success."""
    done = run_tool(
        ["rocm-smi", "-d", str(ordinal), "--showproductname", "--showsclkrange", "--json"],
        timeout=ROCM_SMI_TIMEOUT_S,
    )
    if not done.ok:
        return None
    try:
        data = json.loads(done.stdout)
    except (ValueError, RecursionError):
        return None
    card = data.get(f"card{ordinal}") if isinstance(data, dict) else None
    if not isinstance(card, dict):
        return None
    return {str(k).strip().lower(): v.strip() for k, v in card.items() if isinstance(v, str)}


def _rocm_smi_entry(card: Mapping[str, str]) -> tuple[str, DeviceFeatures] | None:
    """The card's name as rocm-smi gives it, and its table entry.

    The name comes from the driver's marketing names ("AMD Instinct MI250X") or from pci.ids
    ("Arcturus GL-XL [AMD Instinct MI100]"): the whole is looked up, then a bracketed name.
    A bracket listing several boards ("Navi 31 [Radeon RX 7900 XT/7900 XTX]") tells none of
    them. Older versions could put the board's name in "Card model"; newer ones a PCI ID.
    """
    for key in _ROCM_NAME_KEYS:
        name = card.get(key, "")
        for candidate in (name, *_ROCM_ONE_NAME.findall(name)):
            entry = lookup(candidate)
            if entry is not None:
                return name, entry
    return None
