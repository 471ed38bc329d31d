"""No cliff for unknown GPUs: the user's table, what a name tells, the nearest known stand-in."""

from __future__ import annotations

import numpy as np
import pytest

from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import Candidates
from annotune.results.replay import ReplayDataset
from annotune.transfer.features import FEATURE_NAMES, lookup
from annotune.transfer.headers import stand_in_header
from annotune.transfer.resolve import (
    GpuTable,
    infer_family,
    resolve,
    resolve_dataset,
    shared_names,
    user_table,
)

# Every GPU of the public tuning datasets (benchmark_hub's cache files) and the recorded ones.
BENCHMARK_HUB = {
    "A100": "NVIDIA A100-PCIE-40GB",
    "A4000": "NVIDIA RTX A4000",
    "A6000": "NVIDIA RTX A6000",
    "MI250X": "AMD Instinct MI250X",
    "W6600": "AMD Radeon PRO W6600",
    "W7800": "AMD Radeon PRO W7800",
    "RTX 3090": "NVIDIA GeForce RTX 3090",
    "RTX 2080 Ti": "NVIDIA GeForce RTX 2080 Ti",
    "RTX Titan": "NVIDIA TITAN RTX",
    "RTX 3060 Laptop": "NVIDIA GeForce RTX 3060 Laptop GPU",
    "MI50": "AMD Instinct MI50",
}


@pytest.mark.parametrize(("name", "canonical"), BENCHMARK_HUB.items())
def test_every_public_dataset_gpu_is_in_the_table(name, canonical):
    assert lookup(name).name == canonical


@pytest.mark.parametrize(
    "name",
    ["H100 PCIe", "H100", "H200", "L40S", "L40", "L4", "A10", "A40", "T4", "MI300X", "MI210"],
)
def test_current_data_centre_parts_are_in_the_table(name):
    assert lookup(name) is not None


@pytest.mark.parametrize(
    ("name", "vendor", "architecture", "capability"),
    [
        ("AMD Radeon PRO W7800", "AMD", "RDNA3 (gfx1100)", 11.0),
        ("AMD Radeon RX 7900 XTX", "AMD", "RDNA3 (gfx1100)", 11.0),
        ("AMD Instinct MI325X", "AMD", "CDNA3 (gfx942)", 9.4),
        ("AMD Instinct MI355X", "AMD", "CDNA4 (gfx950)", 9.5),
        ("AMD Radeon RX 6800", "AMD", "RDNA2 (gfx1030)", 10.3),
        ("NVIDIA GeForce RTX 5090", "NVIDIA", "Blackwell (sm_120)", 12.0),
        ("NVIDIA B200", "NVIDIA", "Blackwell (sm_100)", 10.0),
        ("NVIDIA H800", "NVIDIA", "Hopper (sm_90)", 9.0),
        ("NVIDIA GeForce RTX 4070", "NVIDIA", "Ada Lovelace (sm_89)", 8.9),
        ("NVIDIA A100 80GB PCIe", "NVIDIA", "Ampere (sm_80)", 8.0),
        ("NVIDIA RTX A5000", "NVIDIA", "Ampere (sm_86)", 8.6),
        ("NVIDIA A10G", "NVIDIA", "Ampere (sm_86)", 8.6),
        ("NVIDIA GeForce GTX 1660", "NVIDIA", "Turing (sm_75)", 7.5),
        ("Tesla P100-PCIE-16GB", "NVIDIA", "Pascal (sm_60)", 6.0),
    ],
)
def test_a_name_tells_vendor_and_architecture(name, vendor, architecture, capability):
    family = infer_family(name)
    assert (family.vendor, family.architecture, family.capability) == (
        vendor,
        architecture,
        capability,
    )


def test_a_vendor_word_alone_or_nothing():
    assert infer_family("NVIDIA Future 9000").architecture is None
    assert infer_family("NVIDIA Future 9000").vendor == "NVIDIA"
    assert infer_family("Imaginary GPU 9000") is None


def test_a_known_gpu_resolves_to_the_table_without_warnings():
    found = resolve("AMD Radeon PRO W7800", live=False)
    assert found.source == "table" and found.warnings == () and found.missing == ()
    assert found.features() == lookup("W7800")


def test_an_unknown_gpu_gets_the_nearest_of_its_vendor_and_architecture():
    found = resolve("AMD Radeon PRO W7700", live=False)
    assert found.source == "stand-in" and found.stand_in == "AMD Radeon PRO W7800"
    assert found.architecture == "RDNA3 (gfx1100)"
    assert set(found.missing) == set(FEATURE_NAMES) - {"vendor_nvidia", "compute_capability"}
    (warning,) = found.warnings
    assert "AMD Radeon PRO W7700" in warning and "AMD Radeon PRO W7800" in warning
    assert "multiprocessors" in warning and "--gpus" in warning
    features = found.features()
    assert features is not None and features.source == "stand-in"
    assert features.values["cores"] == lookup("W7800").values["cores"]
    # A Blackwell card not in the table: the RTX 5090, the one Blackwell the table knows.
    assert resolve("NVIDIA GeForce RTX 5080", live=False).stand_in == "NVIDIA GeForce RTX 5090"


def test_without_a_known_gpu_of_its_vendor_only_the_known_features():
    nameless = resolve("Imaginary GPU 9000", live=False)
    assert nameless.source == "name" and dict(nameless.values) == {}
    assert nameless.features() is None and "vendor is not in its name" in nameless.warnings[0]
    only_amd = GpuTable()  # the shipped table has AMD GPUs; an empty vendor is Intel-like:
    assert resolve("NVIDIA Future 9000", only_amd, live=False).stand_in is not None
    a100 = resolve("A100", live=False)
    assert shared_names([a100, nameless]) == ()
    assert shared_names([a100, resolve("NVIDIA Future", live=False)]) == FEATURE_NAMES


def write(path, text):
    path.write_text(text)
    return path


def test_the_users_table_wins_and_may_be_partial(tmp_path):
    gpus = write(
        tmp_path / "gpus.toml",
        '[[gpu]]\nname = "AMD Radeon PRO W7700"\naliases = ["W7700"]\nmultiprocessors = 48\n'
        "cores = 3072\n\n"
        '[[gpu]]\nname = "NVIDIA A100-PCIE-40GB"\ncore_clock_mhz = 1200\n',
    )
    table = user_table(gpus)
    a100 = resolve("A100", table, live=False)
    assert a100.source == "user" and a100.values["core_clock_mhz"] == 1200
    assert a100.values["cores"] == 6912  # the rest from the shipped entry
    partial = resolve("W7700", table, live=False)
    assert partial.values["multiprocessors"] == 48 and partial.values["cores"] == 3072
    assert partial.stand_in == "AMD Radeon PRO W7800"
    assert "multiprocessors" not in partial.missing and "l2_kib" in partial.missing


def test_a_complete_user_entry_needs_no_fallback(tmp_path):
    values = "\n".join(f"{n} = {v:g}" for n, v in lookup("W7800").values.items())
    gpus = write(tmp_path / "g.toml", f'[[gpu]]\nname = "My Card"\narchitecture = "X"\n{values}\n')
    found = resolve("my card", user_table(gpus), live=False)
    assert found.source == "user" and found.warnings == () and found.architecture == "X"


def test_config_files_carry_gpu_entries(tmp_path):
    config = write(
        tmp_path / "annotune.toml",
        '[[file]]\npath = "a.cu"\n\n[[gpu]]\nname = "AMD Radeon PRO W7700"\ncores = 3072\n',
    )
    pyproject = write(
        tmp_path / "pyproject.toml",
        '[tool.annotune]\n[[tool.annotune.gpu]]\nname = "Card B"\ncores = 1\n',
    )
    assert user_table(config=config).find("Radeon PRO W7700").values == {"cores": 3072.0}
    assert user_table(config=pyproject).find("card b").name == "Card B"
    both = user_table(
        write(tmp_path / "g.toml", '[[gpu]]\nname = "Card B"\ncores = 2\n'), pyproject
    )
    assert both.find("Card B").values["cores"] == 2  # --gpus wins over the config


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ('[[gpu]]\nname = "X"\ncorez = 3\n', "3:1", "unknown field 'corez'"),
        ('[[gpu]]\nname = "X"\ncores = "many"\n', "3:10", "cores must be a finite number"),
        ('[[gpu]]\nname = "X"\nvendor_nvidia = 2\n', "3:17", "vendor_nvidia must be 1 or 0"),
        ('[[gpu]]\nname = "X"\ncores = true\n', "3:9", "cores must be a finite number"),
        ('[[gpu]]\nname = "X"\n\n[[gpu]]\ncores = 3\n', "4:3", "needs a name"),
        ("[[gpu]]\nname = 3\n", "2:8", "needs a name"),
        ('[[gpu]]\nname = "X"\naliases = "Y"\n', "3:12", "aliases must be a list"),
        ('[[gpu]]\nname = "X"\narchitecture = 3\n', "3:16", "architecture must be a string"),
        ("gpus = 1\n", "1:1", "unknown key 'gpus'"),
        ('[[gpu]]\nname = "X\n', "2:10", "invalid TOML"),
        ("gpu = 3\n", "1:1", "array of tables"),
        # Located as the config's keys are, in any TOML form (the old line scan knew one).
        ('gpu = [{name = "X", cores = -1}]\n', "1:29", "cores must be a finite number"),
        ('[[gpu]]\nname = "X"\n"cores" = "many"\n', "3:12", "cores must be"),
    ],
)
def test_every_mistake_in_a_gpu_table_is_located(tmp_path, text, where, message):
    path = write(tmp_path / "gpus.toml", text)
    with pytest.raises(AnnotuneError) as caught:
        user_table(path)
    error = caught.value
    assert message in error.message
    assert f"{error.location.line}:{error.location.column}" == where
    assert error.location.file == str(path)


def test_a_dataset_of_an_unknown_gpu_resolves_with_a_warning():
    def dataset(name, device):
        return ReplayDataset(
            name, Candidates(np.zeros((1, 1)), ("x",)), np.ones(1), ("",), device=device
        )

    assert resolve_dataset(dataset("convolution_MI250X", "")).name == "AMD Instinct MI250X"
    unknown = resolve_dataset(dataset("convolution_W7700", "AMD Radeon PRO W7700"))
    assert unknown.stand_in == "AMD Radeon PRO W7800" and unknown.warnings


def test_build_uses_the_header_of_the_nearest_gpu_of_the_same_architecture(tmp_path):
    source = write(tmp_path / "k.cu", "int main() {}\n")
    for slug in ("nvidia-a100-pcie-40gb", "amd-radeon-pro-w6600", "some-unknown-board"):
        (tmp_path / "tuned" / slug).mkdir(parents=True)
        write(tmp_path / "tuned" / slug / "k.h", f"/* {slug} */\n")
    found = stand_in_header(source, "NVIDIA A30", None)
    assert found.device == "NVIDIA A100-PCIE-40GB" and "NVIDIA A30" in found.warning
    assert found.header == tmp_path / "tuned" / "nvidia-a100-pcie-40gb" / "k.h"
    assert stand_in_header(source, "NVIDIA GeForce RTX 3090", None).device.endswith("40GB")
    assert stand_in_header(source, "NVIDIA H100 PCIe", None) is None  # no Hopper header
    assert stand_in_header(source, "Imaginary GPU 9000", None) is None
    assert stand_in_header(source, "AMD Radeon RX 6800", None).device == "AMD Radeon PRO W6600"


def test_a_host_processor_is_no_gpu_of_its_vendor():
    """A host tune's device ("cpu-AMD EPYC 7763") must not borrow an AMD GPU's features."""
    resolved = resolve("cpu-AMD EPYC 7763 64-Core Processor")
    assert resolved.source == "name" and resolved.stand_in is None
    assert dict(resolved.values) == {} and resolved.features() is None
    assert "is a host processor, not a GPU" in resolved.warnings[0]
