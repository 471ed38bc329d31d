"""Device features: table lookups, the table's own consistency, reading a (faked) live GPU."""

from __future__ import annotations

import enum
import shutil
import sys
import types

import numpy as np
import pytest

from annotune.core.records import Candidates
from annotune.results.replay import ReplayDataset
from annotune.run import device as devices
from annotune.transfer import live_device as device_features
from annotune.transfer.features import (
    FEATURE_NAMES,
    DeviceFeatures,
    dataset_device,
    dataset_features,
    lookup,
    table,
)
from annotune.transfer.live_device import features_for, read_from_device

SLEEP = shutil.which("sleep")  # looked up before a test empties PATH
LIVE_MODULES = ("pycuda.driver", "cuda.bindings.driver", "cuda.cuda")

# The device names as the replay datasets in /work/shared/data/replay spell them.
REPLAY_DEVICES = {
    "NVIDIA A100-PCIE-40GB": "NVIDIA A100-PCIE-40GB",
    "NVIDIA RTX A4000": "NVIDIA RTX A4000",
    "AMD Radeon PRO W6600": "AMD Radeon PRO W6600",
    "NVIDIA GeForce RTX 3090": "NVIDIA GeForce RTX 3090",
    "MI250X": "AMD Instinct MI250X",  # that file's device name is empty
}


@pytest.mark.parametrize(("name", "canonical"), REPLAY_DEVICES.items())
def test_every_replay_dataset_device_is_in_the_table(name, canonical):
    features = lookup(name)
    assert features is not None and features.name == canonical
    assert features.source == "table"


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("A100", "NVIDIA A100-PCIE-40GB"),  # the documented default variant
        ("a100 pcie 40gb", "NVIDIA A100-PCIE-40GB"),
        ("  nvidia a100-pcie-40GB ", "NVIDIA A100-PCIE-40GB"),
        ("A100 80GB", "NVIDIA A100-SXM4-80GB"),
        ("NVIDIA A100 80GB PCIe", "NVIDIA A100 80GB PCIe"),
        ("AMD Instinct MI250X", "AMD Instinct MI250X"),
        ("Radeon Pro W6600", "AMD Radeon PRO W6600"),
        ("W6600", "AMD Radeon PRO W6600"),
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"),
        ("H100 80 GB HBM3", "NVIDIA H100 80GB HBM3"),
        ("H100", "NVIDIA H100 80GB HBM3"),
        ("H100 SXM5", "NVIDIA H100 80GB HBM3"),
        ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"),
        ("NVIDIA H200", "NVIDIA H200"),
        ("H200 SXM", "NVIDIA H200"),
        ("Tesla T4", "Tesla T4"),
        ("NVIDIA T4", "Tesla T4"),
        ("Tesla V100-SXM2-32GB", "Tesla V100-SXM2-16GB"),
        ("GeForce RTX 4090", "NVIDIA GeForce RTX 4090"),
        ("AMD Instinct MI300X", "AMD Instinct MI300X"),
    ],
)
def test_lookup_tolerates_how_results_spell_names(name, canonical):
    features = lookup(name)
    assert features is not None and features.name == canonical


@pytest.mark.parametrize(
    "name", ["", "   ", "NVIDIA GeForce RTX 3090 Ti", "NVIDIA A1000", "cpu-Intel Xeon", "NVIDIA"]
)
def test_unknown_names_are_none(name):
    assert lookup(name) is None


def test_every_entry_has_every_feature_in_plausible_ranges():
    entries = table()
    assert len(entries) >= 32
    assert len({e.name for e in entries}) == len(entries)
    for entry in entries:
        v = entry.values
        assert set(FEATURE_NAMES) <= set(v), entry.name
        where = entry.name
        assert v["vendor_nvidia"] in (0.0, 1.0), where
        assert 7.0 <= v["compute_capability"] <= 12.0, where
        lanes = v["cores"] / v["multiprocessors"]
        assert lanes in (64.0, 128.0), where
        assert 1000 <= v["core_clock_mhz"] <= 3000, where
        assert 800 <= v["memory_clock_mhz"] <= 15000, where
        assert v["memory_bus_bits"] in (
            (128, 192, 256, 320, 352, 384, 512, 3072, 4096, 5120, 6144, 8192)
        ), where
        assert 2048 <= v["l2_kib"] <= 98304, where
        assert v["shared_per_block_kib"] in (64, 96, 99, 163, 227), where
        assert v["registers_per_block"] in (65536, 98304, 131072), where
        # bandwidth = 2 * memory clock * bus / 8 (the memory clock as CUDA reports it)
        derived = 2 * v["memory_clock_mhz"] * v["memory_bus_bits"] / 8 / 1000
        assert v["memory_bandwidth_gbs"] == pytest.approx(derived, rel=0.10), where
        # peak FP32 = 2 * lanes * clock, to the GFLOPS the table rounds to
        peak = 2 * v["cores"] * v["core_clock_mhz"] / 1000
        assert v["peak_sp_gflops"] == pytest.approx(peak, abs=1.0), where
        ratio = v["peak_dp_gflops"] / v["peak_sp_gflops"]
        assert min(abs(ratio / r - 1) for r in (1, 1 / 2, 1 / 16, 1 / 32, 1 / 64)) < 0.01, where


def test_nvidia_entries_agree_with_the_per_architecture_constants():
    """What read_from_device derives for a GPU the driver describes must match the table."""
    for entry in table():
        v = entry.values
        if not v["vendor_nvidia"]:
            assert "gfx" in entry.architecture
            continue
        major, minor = divmod(round(v["compute_capability"] * 10), 10)
        assert f"(sm_{major}{minor})" in entry.architecture
        lanes = device_features._LANES_PER_SM.get(
            (major, minor), device_features._LANES_PER_SM_BY_MAJOR.get(major)
        )
        assert v["cores"] == v["multiprocessors"] * lanes, entry.name
        ratio = device_features._FP64_RATIO.get(
            (major, minor), device_features._FP64_RATIO_BY_MAJOR.get(major)
        )
        assert v["peak_dp_gflops"] == pytest.approx(v["peak_sp_gflops"] * ratio, abs=1.0)


def test_the_mi250x_entry_is_one_gcd():
    gcd = lookup("MI250X").values
    assert (gcd["multiprocessors"], gcd["memory_bus_bits"], gcd["l2_kib"]) == (110, 4096, 8192)
    assert gcd["peak_dp_gflops"] == gcd["peak_sp_gflops"] == 23936  # 47.9 TFLOPS per package


def test_vector_follows_the_requested_order():
    a100 = lookup("A100")
    vector = a100.vector()
    assert vector.dtype == np.float64 and vector.shape == (len(FEATURE_NAMES),)
    assert vector[FEATURE_NAMES.index("multiprocessors")] == 108
    assert vector[FEATURE_NAMES.index("core_clock_mhz")] == 1410
    assert a100.vector(["l2_kib", "cores"]).tolist() == [40960.0, 6912.0]
    assert FEATURE_NAMES[:2] == ("vendor_nvidia", "compute_capability")
    assert FEATURE_NAMES[-2:] == ("peak_sp_gflops", "peak_dp_gflops")


def test_json_round_trip_and_checks():
    w6600 = lookup("W6600")
    data = w6600.to_json()
    assert data["source"] == "table" and data["values"]["compute_capability"] == 10.3
    assert DeviceFeatures.from_json(data) == w6600
    with pytest.raises(ValueError, match="missing device features"):
        DeviceFeatures.from_json({**data, "values": {"cores": 1.0}})
    with pytest.raises(ValueError, match="not a device-features object"):
        DeviceFeatures.from_json({"name": "x"})
    with pytest.raises(ValueError, match="source"):
        DeviceFeatures("x", "y", dict(w6600.values), "guess")
    with pytest.raises(TypeError):
        w6600.values["cores"] = 1.0  # read-only


def test_a_dataset_names_its_device_by_file_name_when_the_file_does_not():
    def dataset(name: str, **metadata) -> ReplayDataset:
        return ReplayDataset(
            name, Candidates(np.zeros((1, 1)), ("x",)), np.ones(1), ("",), **metadata
        )

    mi250x = dataset("convolution_MI250X")
    assert dataset_device(mi250x) == "MI250X"
    assert dataset_features(mi250x) == lookup("MI250X")
    assert dataset_features(dataset("kernel_nowhere")) is None
    # A file's own features (`annotune export`) win over the table's for its name.
    own = dataset("convolution_MI250X", device_features=lookup("W6600").to_json())
    assert dataset_features(own) == lookup("W6600")


# --- the live GPU, faked ---


@pytest.fixture
def no_gpu(tmp_path, monkeypatch):
    """No CUDA Python package importable and nothing but `tmp_path` on PATH."""
    for module in LIVE_MODULES:
        monkeypatch.setitem(sys.modules, module, None)  # import raises ImportError
    monkeypatch.setenv("PATH", str(tmp_path))
    return tmp_path


def install_smi(directory, body: str) -> None:
    script = directory / "nvidia-smi"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)


def test_no_gpu_means_none(no_gpu):
    assert read_from_device() is None
    assert read_from_device(3) is None


def test_no_gpu_here_means_none_without_faking_anything(monkeypatch):
    if shutil.which("nvidia-smi") or shutil.which("rocm-smi"):
        pytest.skip("this machine has nvidia-smi or rocm-smi")
    assert read_from_device() is None


def test_a_failing_driver_is_none_not_an_exception(no_gpu, monkeypatch):
    class Error(Exception):
        pass

    def init():
        raise Error("cuInit failed: no CUDA-capable device is detected")

    monkeypatch.setitem(sys.modules, "pycuda.driver", types.SimpleNamespace(init=init))
    install_smi(no_gpu, "echo 'NVIDIA-SMI has failed' >&2; exit 9")
    assert read_from_device() is None


@pytest.mark.parametrize(
    ("line", "clock", "memory", "bandwidth"),
    [
        # GeForce: nvidia-smi's ceiling (2100) is above the rated boost: the table's is kept.
        ("NVIDIA GeForce RTX 3090, 2100, 9751", 1695, 9751, 936),
        # A board clocked below its published boost; memory slower too.
        ("NVIDIA GeForce RTX 3090, 1500, 9501", 1500, 9501, 936 * 9501 / 9751),
        ("NVIDIA GeForce RTX 3090, [N/A], [N/A]", 1695, 9751, 936),
    ],
)
def test_nvidia_smi_is_merged_over_the_table(no_gpu, line, clock, memory, bandwidth):
    install_smi(
        no_gpu,
        '[ "$1 $2 $3 $4" = "--query-gpu=name,clocks.max.sm,clocks.max.memory '
        '--format=csv,noheader,nounits -i 0" ] || exit 3\n'
        f'echo "{line}"',
    )
    live = read_from_device()
    table_3090 = lookup("RTX 3090").values
    assert live is not None and live.source == "device"
    assert live.name == "NVIDIA GeForce RTX 3090" and live.architecture == "Ampere (sm_86)"
    v = live.values
    assert (v["core_clock_mhz"], v["memory_clock_mhz"]) == (clock, memory)
    assert v["memory_bandwidth_gbs"] == pytest.approx(bandwidth)
    assert v["peak_sp_gflops"] == pytest.approx(2 * 10496 * clock / 1000, abs=1.0)
    assert v["peak_dp_gflops"] == pytest.approx(v["peak_sp_gflops"] / 64, rel=0.01)
    assert v["multiprocessors"] == table_3090["multiprocessors"] == 82


def test_nvidia_smi_naming_an_unknown_gpu_is_none(no_gpu):
    install_smi(no_gpu, 'echo "NVIDIA Future GPU 9000, 3000, 12000"')
    assert read_from_device() is None


def test_a_hanging_nvidia_smi_is_given_up(no_gpu, monkeypatch):
    monkeypatch.setattr(devices, "NVIDIA_SMI_TIMEOUT_S", 0.2)
    install_smi(no_gpu, f"exec {SLEEP} 30")
    assert read_from_device() is None


# An H100 SXM5 as CUDA describes it (deviceQuery units: kHz, bits, bytes).
H100_ATTRIBUTES = {
    "COMPUTE_CAPABILITY_MAJOR": 9,
    "COMPUTE_CAPABILITY_MINOR": 0,
    "MULTIPROCESSOR_COUNT": 132,
    "CLOCK_RATE": 1980000,
    "MEMORY_CLOCK_RATE": 2619000,
    "GLOBAL_MEMORY_BUS_WIDTH": 5120,
    "L2_CACHE_SIZE": 52428800,
    "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 232448,
    "MAX_SHARED_MEMORY_PER_BLOCK": 49152,
    "MAX_REGISTERS_PER_BLOCK": 65536,
}


def fake_pycuda(name: str, attributes: dict[str, int]) -> types.SimpleNamespace:
    """Enough of `pycuda.driver`: init, Device(n).name() / .get_attribute(device_attribute.X)."""
    device_attribute = enum.IntEnum("device_attribute", list(attributes))

    class Device:
        def __init__(self, ordinal: int) -> None:
            if ordinal != 0:
                raise RuntimeError("cuDeviceGet failed: invalid device ordinal")

        def name(self) -> str:
            return name

        def get_attribute(self, attribute) -> int:
            return attributes[attribute.name]

    return types.SimpleNamespace(
        init=lambda: None, Device=Device, device_attribute=device_attribute
    )


def fake_cuda_python(name: str, attributes: dict[str, int]) -> types.SimpleNamespace:
    """Enough of `cuda.bindings.driver`: every call returns (CUresult, value...)."""
    result = enum.IntEnum("CUresult", {"CUDA_SUCCESS": 0, "CUDA_ERROR_INVALID_DEVICE": 101})
    members = {f"CU_DEVICE_ATTRIBUTE_{key}": n for n, key in enumerate(attributes, 1)}
    members["CU_DEVICE_ATTRIBUTE_UNSUPPORTED"] = 999
    attribute_enum = enum.IntEnum("CUdevice_attribute", members)

    def get_attribute(attribute, device):
        key = attribute.name.removeprefix("CU_DEVICE_ATTRIBUTE_")
        if key not in attributes:
            return (result.CUDA_ERROR_INVALID_DEVICE, 0)
        return (result.CUDA_SUCCESS, attributes[key])

    return types.SimpleNamespace(
        CUresult=result,
        CUdevice_attribute=attribute_enum,
        cuInit=lambda flags: (result.CUDA_SUCCESS,),
        cuDeviceGet=lambda n: (result.CUDA_SUCCESS, n) if n == 0 else (result(101), None),
        cuDeviceGetName=lambda length, device: (result.CUDA_SUCCESS, name.encode() + b"\0\0"),
        cuDeviceGetAttribute=get_attribute,
    )


def check_h100(live: DeviceFeatures) -> None:
    assert live.source == "device" and live.architecture == "Hopper (sm_90)"
    v = live.values
    assert v["compute_capability"] == 9.0 and v["cores"] == 132 * 128
    assert (v["core_clock_mhz"], v["memory_clock_mhz"]) == (1980, 2619)
    assert (v["l2_kib"], v["shared_per_block_kib"]) == (51200, 227)
    assert v["memory_bandwidth_gbs"] == pytest.approx(2 * 2619 * 5120 / 8 / 1000)
    assert v["peak_dp_gflops"] == pytest.approx(v["peak_sp_gflops"] / 2)
    # the live reading and the published table describe the same GPU the same way
    table_h100 = lookup("H100")
    assert live.vector() == pytest.approx(table_h100.vector(), rel=0.01)


def test_pycuda_attributes_are_read_and_derived(no_gpu, monkeypatch):
    fake = fake_pycuda("NVIDIA H100 80GB HBM3", H100_ATTRIBUTES)
    monkeypatch.setitem(sys.modules, "pycuda.driver", fake)
    live = read_from_device()
    assert live is not None and live.name == "NVIDIA H100 80GB HBM3"
    check_h100(live)
    assert read_from_device(1) is None  # no such device: not an exception


def test_cuda_python_is_used_without_pycuda(no_gpu, monkeypatch):
    fake = fake_cuda_python("NVIDIA H100 80GB HBM3", H100_ATTRIBUTES)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", fake)
    check_h100(read_from_device())


def test_a_gpu_the_table_lacks_is_described_from_its_attributes(no_gpu, monkeypatch):
    attributes = {**H100_ATTRIBUTES, "COMPUTE_CAPABILITY_MAJOR": 12, "MULTIPROCESSOR_COUNT": 170}
    del attributes["MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"]  # an old pycuda: the default instead
    monkeypatch.setitem(sys.modules, "pycuda.driver", fake_pycuda("Some RTX 50", attributes))
    live = read_from_device()
    assert live.architecture == "Blackwell (sm_120)"
    assert live.values["cores"] == 170 * 128 and live.values["shared_per_block_kib"] == 48
    assert live.values["peak_dp_gflops"] == pytest.approx(live.values["peak_sp_gflops"] / 64)


def test_missing_attributes_come_from_the_table(no_gpu, monkeypatch):
    attributes = {**H100_ATTRIBUTES, "CLOCK_RATE": 0}  # 0: the driver does not know
    del attributes["L2_CACHE_SIZE"]
    monkeypatch.setitem(sys.modules, "pycuda.driver", fake_pycuda("NVIDIA H200", attributes))
    live = read_from_device()
    assert (live.values["core_clock_mhz"], live.values["l2_kib"]) == (1980, 51200)
    attributes["COMPUTE_CAPABILITY_MAJOR"] = 11  # unknown lanes and FP64 rate, no table entry
    monkeypatch.setitem(sys.modules, "pycuda.driver", fake_pycuda("Mystery GPU", attributes))
    assert read_from_device() is None


def test_features_for_prefers_this_machines_gpu(monkeypatch):
    live = DeviceFeatures(
        "NVIDIA RTX A4000", "Ampere (sm_86)", dict(lookup("A4000").values), "device"
    )
    monkeypatch.setattr(devices, "gpu_name", lambda: "NVIDIA RTX A4000")
    monkeypatch.setattr(device_features, "read_from_device", lambda ordinal=0: live)
    assert features_for("NVIDIA RTX A4000") is live
    assert features_for("NVIDIA A100-PCIE-40GB").source == "table"
    assert features_for("MI250X").name == "AMD Instinct MI250X"
    assert features_for("cpu-Intel Xeon") is None
    assert features_for("") is None
    # CUDA's device 0 is another GPU than nvidia-smi's first: the table, not a wrong reading
    monkeypatch.setattr(devices, "gpu_name", lambda: "NVIDIA GeForce RTX 3090")
    assert features_for("NVIDIA GeForce RTX 3090").source == "table"
