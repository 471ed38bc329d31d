"""Device names: the override, nvidia-smi (faked on PATH), the CPU fallback, and slugs."""

from __future__ import annotations

import shutil

import pytest

from annotune.run import device as devices
from annotune.run.device import cpu_name, current_device_name, gpu_name

SLEEP = shutil.which("sleep")  # looked up before fake_smi empties PATH


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    """Put a fake `nvidia-smi` running `body` (a shell script) alone on PATH."""

    def install(body: str) -> None:
        script = tmp_path / "nvidia-smi"
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(0o755)

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv(devices.DEVICE_ENV, raising=False)
    return install


def test_first_gpu_name_from_nvidia_smi(fake_smi):
    fake_smi(
        '[ "$1 $2" = "--query-gpu=name --format=csv,noheader" ] || exit 3\n'
        'printf "NVIDIA A100-PCIE-40GB\\nTesla V100-SXM2-16GB\\n"'
    )
    assert gpu_name() == "NVIDIA A100-PCIE-40GB"
    assert current_device_name() == "NVIDIA A100-PCIE-40GB"


@pytest.mark.parametrize("body", ["echo 'NVIDIA-SMI has failed' >&2; exit 9", "exit 0"])
def test_a_failing_nvidia_smi_means_no_gpu(fake_smi, body):
    fake_smi(body)
    assert gpu_name() is None
    assert current_device_name().startswith("cpu-")


def test_a_hanging_nvidia_smi_is_given_up(fake_smi, monkeypatch):
    monkeypatch.setattr(devices, "NVIDIA_SMI_TIMEOUT_S", 0.2)
    fake_smi(f"exec {SLEEP} 30")
    assert gpu_name() is None


def test_no_nvidia_smi_falls_back_to_the_cpu(fake_smi):
    assert gpu_name() is None
    assert current_device_name() == cpu_name()


def test_the_environment_overrides_detection(fake_smi, monkeypatch):
    fake_smi("echo NVIDIA A100-PCIE-40GB")
    monkeypatch.setenv(devices.DEVICE_ENV, "  my-gpu  ")
    assert current_device_name() == "my-gpu"
    monkeypatch.setenv(devices.DEVICE_ENV, "")
    assert current_device_name() == "NVIDIA A100-PCIE-40GB"


def test_cpu_name_reads_the_model(tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nvendor_id\t: GenuineIntel\n"
        "model name\t: Intel(R) Xeon(R) Gold 6230  CPU @ 2.10GHz\nflags\t: fpu\n"
    )
    assert cpu_name(cpuinfo) == "cpu-Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz"
    monkeypatch.setattr(devices.platform, "processor", lambda: "aarch64")
    assert cpu_name(tmp_path / "missing") == "cpu-aarch64"
