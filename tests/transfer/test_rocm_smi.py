"""Reading an AMD GPU through a faked `rocm-smi`: recorded JSON outputs, failures, a hang.

The outputs follow ROCm/rocm_smi_lib's python_smi_tools/rocm_smi.py: `--json` prints one object
with a "card<N>" object per device, whose keys are the text before ": " of each line the
plain output would print ("Card Series", "Card series" before ROCm 6.1; "Valid sclk range").
"""

from __future__ import annotations

import errno
import json
import shutil
import sys
import time

import pytest

from annotune.core.tools import ToolRun
from annotune.transfer import live_device as device_features
from annotune.transfer.features import lookup
from annotune.transfer.live_device import read_from_device

SLEEP = shutil.which("sleep")  # looked up before a test empties PATH
LIVE_MODULES = ("pycuda.driver", "cuda.bindings.driver", "cuda.cuda")
ARGS = "--showproductname --showsclkrange --json"

# An MI250X GCD under ROCm 6.1 or later (names as the driver's marketing-name table gives them).
MI250X = {
    "card0": {
        "Card Series": "AMD Instinct MI250X",
        "Card Model": "0x7408",
        "Card Vendor": "Advanced Micro Devices, Inc. [AMD/ATI]",
        "Card SKU": "D65201",
        "Subsystem ID": "0x0b0c",
        "Device Rev": "0x00",
        "Node ID": "4",
        "GUID": "58294",
        "GFX Version": "gfx9010",
        "Valid sclk range": "500Mhz - 1700Mhz",
    }
}

# An MI100 under ROCm 5: lower-case keys, the name from pci.ids, no overdrive range.
MI100_ROCM5 = {
    "card0": {
        "Card series": "Arcturus GL-XL [AMD Instinct MI100]",
        "Card model": "0x0c34",
        "Card vendor": "Advanced Micro Devices, Inc. [AMD/ATI]",
        "Card SKU": "D34316",
    }
}


def card(**fields: str) -> str:
    return json.dumps({"card0": fields})


@pytest.fixture
def no_gpu(tmp_path, monkeypatch):
    """No CUDA Python package importable and nothing but `tmp_path` on PATH."""
    for module in LIVE_MODULES:
        monkeypatch.setitem(sys.modules, module, None)  # import raises ImportError
    monkeypatch.setenv("PATH", str(tmp_path))
    return tmp_path


def install(directory, name: str, body: str) -> None:
    script = directory / name
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)


def install_rocm_smi(directory, output: str, *, ordinal: int = 0, status: int = 0) -> None:
    """A rocm-smi that prints `output` and exits with `status` when asked as annotune asks."""
    asked = f'[ "$*" = "-d {ordinal} {ARGS}" ] || exit 3'
    install(directory, "rocm-smi", f"{asked}\nprintf '%s\\n' '{output}'\nexit {status}")


def test_a_known_card_is_its_table_entry_read_from_the_device(no_gpu):
    install_rocm_smi(no_gpu, json.dumps(MI250X))
    live = read_from_device()
    assert live is not None and live.source == "device"
    assert live.name == "AMD Instinct MI250X" and live.architecture == "CDNA2 (gfx90a)"
    assert dict(live.values) == dict(lookup("MI250X").values)


def test_the_device_ordinal_picks_the_card(no_gpu):
    second = {"card1": {"Card Series": "AMD Radeon PRO W7800"}}
    install_rocm_smi(no_gpu, json.dumps(second), ordinal=1)
    assert read_from_device(1).name == "AMD Radeon PRO W7800"
    assert read_from_device(0) is None  # asked otherwise, the fake exits 3


@pytest.mark.parametrize(
    ("sclk_range", "clock"),
    [
        ("500Mhz - 1500Mhz", 1500),  # capped below the published peak: used
        ("500Mhz - 2000Mhz", 1700),  # an overdrive ceiling above it: the table's kept
        ("garbage", 1700),
    ],
)
def test_a_lower_engine_clock_is_merged_over_the_table(no_gpu, sclk_range, clock):
    install_rocm_smi(
        no_gpu, card(**{"Card Series": "AMD Instinct MI250X", "Valid sclk range": sclk_range})
    )
    table = lookup("MI250X").values
    v = read_from_device().values
    assert v["core_clock_mhz"] == clock
    assert v["peak_sp_gflops"] == pytest.approx(table["peak_sp_gflops"] * clock / 1700)
    assert v["peak_dp_gflops"] == pytest.approx(table["peak_dp_gflops"] * clock / 1700)
    assert v["memory_bandwidth_gbs"] == table["memory_bandwidth_gbs"]


def test_older_rocm_smi_keys_and_pci_ids_names(no_gpu):
    install_rocm_smi(no_gpu, json.dumps(MI100_ROCM5))
    live = read_from_device()
    assert live.name == "Arcturus GL-XL [AMD Instinct MI100]"  # as the driver says it
    assert dict(live.values) == dict(lookup("AMD Instinct MI100").values)


@pytest.mark.parametrize(
    "series",
    [
        "AMD INSTINCT MI200 (MCM) OAM LC MBA HPE C2",  # an MI250X's name on some systems
        "Navi 31 [Radeon RX 7900 XT/7900 XTX/7900 GRE/7900M]",  # several boards
        "AMD Instinct MI250X / MI250",
        "AMD Instinct MI325X",
        "N/A",
    ],
)
def test_a_card_the_table_lacks_is_none(no_gpu, series):
    install_rocm_smi(no_gpu, card(**{"Card Series": series, "Card Model": "0x74a5"}))
    assert read_from_device() is None


def test_no_rocm_smi_is_none(no_gpu):
    assert device_features._read_rocm_smi(0) is None
    assert read_from_device() is None


def test_rocm_smi_exiting_non_zero_is_none(no_gpu):
    install_rocm_smi(no_gpu, json.dumps(MI250X), status=1)
    assert read_from_device() is None


@pytest.mark.parametrize(
    "output",
    [
        "",  # "Driver not initialized": exit 0, nothing on stdout
        "ERROR: No DRM devices available. Exiting",
        json.dumps(MI250X)[:-5],
        "[1, 2]",
        json.dumps({"card0": "AMD Instinct MI250X"}),
        json.dumps({"card3": MI250X["card0"]}),
        json.dumps({"card0": {"Card Series": 250}}),
        "[" * 100_000,
    ],
)
def test_output_that_is_not_the_json_object_is_none(no_gpu, output):
    install_rocm_smi(no_gpu, output)
    assert read_from_device() is None


def test_undecodable_output_is_none(no_gpu):
    install(no_gpu, "rocm-smi", "printf '\\377\\376{'")
    assert read_from_device() is None


def test_a_hanging_rocm_smi_is_given_up(no_gpu, monkeypatch):
    monkeypatch.setattr(device_features, "ROCM_SMI_TIMEOUT_S", 0.2)
    install(no_gpu, "rocm-smi", f"exec {SLEEP} 30")
    start = time.monotonic()
    assert read_from_device() is None
    assert time.monotonic() - start < 10


def test_rocm_smi_runs_without_a_shell_and_with_a_timeout(monkeypatch):
    calls = []

    def run(argv, **options):
        calls.append((argv, options))
        return ToolRun(tuple(argv), None, "", "", 0.0, errno.ENOENT, "No such file")

    monkeypatch.setattr(device_features, "run_tool", run)  # which never takes a shell
    assert device_features._read_rocm_smi(2) is None
    [(argv, options)] = calls
    assert argv == ["rocm-smi", "-d", "2", *ARGS.split()]
    assert options == {"timeout": device_features.ROCM_SMI_TIMEOUT_S}


def test_an_nvidia_reading_comes_first(no_gpu):
    install_rocm_smi(no_gpu, json.dumps(MI250X))
    install(no_gpu, "nvidia-smi", 'echo "NVIDIA GeForce RTX 3090, 1695, 9751"')
    assert read_from_device().name == "NVIDIA GeForce RTX 3090"
    install(no_gpu, "nvidia-smi", "exit 9")  # a broken NVIDIA driver: the AMD GPU is read
    assert read_from_device().name == "AMD Instinct MI250X"
