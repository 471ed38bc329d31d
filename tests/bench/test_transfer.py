"""Leave-one-GPU-out on a tiny synthetic group of datasets that share a space."""

from __future__ import annotations

import json

import numpy as np
import pytest

from annotune.bench.transfer import group_by_space, naive_baseline, transfer_bench
from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import Candidates
from annotune.results.replay import ReplayDataset
from annotune.transfer.features import lookup

X, Y = np.meshgrid(np.arange(12), np.arange(6), indexing="ij")
VALUES = np.stack([X.ravel(), Y.ravel()], axis=1).astype(float)

# The NVIDIA GPUs want x = 9, the AMD ones x = 2: the vendor decides.
GPUS = {
    "NVIDIA A100-PCIE-40GB": 9,
    "NVIDIA RTX A4000": 9,
    "AMD Radeon PRO W6600": 2,
    "AMD Instinct MI250X": 2,
}


def dataset(device: str, order: np.ndarray | None = None, values=VALUES) -> ReplayDataset:
    rows = np.arange(len(values)) if order is None else order
    times = 1.0 + 0.3 * np.abs(values[:, 0] - GPUS[device]) + 0.1 * np.abs(values[:, 1] - 2)
    return ReplayDataset(
        f"kernel_{device.split()[-1]}",
        Candidates(values[rows], ("x", "y")),
        times[rows],
        ("",) * len(rows),
        device=device,
    )


def test_datasets_group_by_their_set_of_configurations_not_row_order():
    shuffled = dataset("NVIDIA RTX A4000", np.random.default_rng(0).permutation(len(VALUES)))
    other = dataset("AMD Radeon PRO W6600", values=VALUES[:-1])
    groups = group_by_space([dataset("NVIDIA A100-PCIE-40GB"), other, shuffled])
    assert [[d.device for d in g] for g in groups] == [
        ["NVIDIA A100-PCIE-40GB", "NVIDIA RTX A4000"],
        ["AMD Radeon PRO W6600"],
    ]
    with pytest.raises(AnnotuneError, match="no other dataset given shares its space"):
        transfer_bench([dataset("NVIDIA A100-PCIE-40GB"), other], repeats=1, workers=1)


def test_another_kernel_or_problem_size_is_another_space():
    from dataclasses import replace

    base = dataset("NVIDIA A100-PCIE-40GB")
    same = replace(dataset("NVIDIA RTX A4000"), kernel="", problem_size=())
    bigger = replace(dataset("AMD Radeon PRO W6600"), problem_size=(8192.0,))
    other_kernel = replace(dataset("AMD Instinct MI250X"), kernel="transpose")
    groups = group_by_space([base, same, bigger, other_kernel])
    assert [[d.device for d in g] for g in groups] == [
        ["NVIDIA A100-PCIE-40GB", "NVIDIA RTX A4000"],
        ["AMD Radeon PRO W6600"],
        ["AMD Instinct MI250X"],
    ]


def test_the_naive_baseline_measures_each_source_best_on_the_target():
    target = dataset("NVIDIA A100-PCIE-40GB")
    sources = [dataset("AMD Radeon PRO W6600"), dataset("NVIDIA RTX A4000")]
    assert naive_baseline(target, sources) == (1.0, "NVIDIA RTX A4000")
    value, whose = naive_baseline(target, sources[:1])
    assert whose == "AMD Radeon PRO W6600"
    assert value == pytest.approx(1.0 / (1.0 + 0.3 * 7)) == target.normalized()[2 * 6 + 2]


@pytest.mark.slow
def test_leave_one_gpu_out():
    group = [dataset(device) for device in GPUS]
    rows = transfer_bench(group, repeats=3, workers=1, seed=1)
    assert [row.device for row in rows] == list(GPUS)
    for row in rows:
        assert row.size == len(VALUES) and row.one_percent == 0
        assert set(row.sources) == set(GPUS) - {row.device}
        assert row.features.method == "cv"
        # The other GPU of the same vendor is in every source group: the lead hits at once.
        assert row.transfer.std1 is not None and row.transfer.std1 <= 3
        assert row.iterml.std2 is not None and row.transfer.std2 <= row.iterml.std2
        assert 0.0 < row.zero_shot <= 1.0 and 0.0 < row.naive <= 1.0
    record = rows[0].to_json()
    assert record["sources"] == list(GPUS)[1:]
    assert {"features", "transfer_std1_evals", "iterml_std2_evals", "zero_shot", "naive"} <= set(
        record
    )


@pytest.mark.slow
def test_bench_transfer_on_the_command_line(cli, tmp_path):
    paths = []
    for device in ("NVIDIA A100-PCIE-40GB", "NVIDIA RTX A4000", "AMD Radeon PRO W6600"):
        data = dataset(device)
        results = [
            {
                "configuration": {"x": int(v[0]), "y": int(v[1])},
                "objectives": ["time"],
                "measurements": [{"name": "time", "value": float(t), "unit": "ms"}],
                "invalidity": "correct",
            }
            for v, t in zip(data.candidates.values, data.times, strict=True)
        ]
        # T4 files as `annotune export` writes them carry the device and its features.
        metadata = {"device": device, "device_features": lookup(device).to_json()}
        path = tmp_path / f"{data.name}.json"
        path.write_text(json.dumps({"metadata": metadata, "results": results}))
        paths.append(path)
    out = cli.json("bench", "--transfer", *paths, "--repeats", "2", "--workers", "1", "--json")
    assert [r["device"] for r in out["results"]] == [
        "NVIDIA A100-PCIE-40GB",
        "NVIDIA RTX A4000",
        "AMD Radeon PRO W6600",
    ]
    table = cli("bench", "--transfer", *paths, "--repeats", "1", "--workers", "1")
    assert table.exit_code == 0 and "zero-shot" in table.stdout
    alone = cli("bench", "--transfer", paths[0], "--repeats", "2")
    assert alone.exit_code == 2 and "shares its space" in alone.stderr


@pytest.mark.slow
def test_a_gpu_known_nowhere_gets_its_row_and_a_warning():
    """An AMD card not in the table: the nearest known AMD GPU stands in, said in every row."""
    group = [dataset(device) for device in GPUS]
    renamed = ReplayDataset(
        "kernel_W7700",
        group[2].candidates,
        group[2].times,
        group[2].errors,
        device="AMD Radeon PRO W7700",
    )
    nameless = ReplayDataset(
        "kernel_X", group[3].candidates, group[3].times, group[3].errors, device="Mystery X"
    )
    rows = transfer_bench([*group[:2], renamed, nameless], repeats=2, workers=1, seed=1)
    assert [row.device for row in rows] == [*list(GPUS)[:2], "AMD Radeon PRO W7700", "Mystery X"]
    for row in rows:
        assert any("'AMD Radeon PRO W7700'" in w and "W7800" in w for w in row.warnings)
        assert any("'Mystery X'" in w and "vendor is not in its name" in w for w in row.warnings)
        # Mystery X has no features at all: the model pools the GPUs, no feature is chosen.
        assert row.features.names == ()
        assert 0.0 < row.zero_shot <= 1.0
    assert rows[0].to_json()["warnings"] == list(rows[0].warnings)


def test_a_malformed_file_feature_record_is_an_error():
    broken = ReplayDataset(
        "kernel_bad",
        Candidates(VALUES, ("x", "y")),
        np.ones(len(VALUES)),
        ("",) * len(VALUES),
        device="NVIDIA A100-PCIE-40GB",
        device_features={"name": "x"},
    )
    with pytest.raises(AnnotuneError, match="kernel_bad: not a device-features object"):
        transfer_bench([broken, dataset("NVIDIA RTX A4000")], repeats=1, workers=1)
