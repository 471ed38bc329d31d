"""`annotune bench`: one JSON object with --json, a table otherwise, exit 2 on bad input."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from annotune.transfer.features import lookup


def write_cache(path) -> None:
    cache = {}
    for x in range(12):
        for y in range(12):
            time = 1.0 + 0.2 * ((x - 7) ** 2 + (y - 2) ** 2)
            value = "CompilationFailedConfig" if (x, y) == (0, 0) else time
            cache[f"{x},{y}"] = {"bx": x, "by": y, "time": value}
    path.write_text(json.dumps({"tune_params_keys": ["bx", "by"], "cache": cache}))


def test_json_output_shape(cli, tmp_path):
    data = tmp_path / "tiny.json"
    write_cache(data)
    out = cli.json(
        "bench", data, "--repeats", "3", "--workers", "1", "--json", "-s", "iterml", "-s", "random"
    )
    assert list(out) == ["results"]
    rows = out["results"]
    assert [r["strategy"] for r in rows] == ["iterml", "random"]
    for row in rows:
        assert set(row) == {
            "dataset",
            "strategy",
            "size",
            "std1_evals",
            "std2_evals",
            "random_std1_evals",
            "random_std2_evals",
        }
        assert row["dataset"] == "tiny" and row["size"] == 144
        assert row["random_std1_evals"] is not None
        assert all(v is None or isinstance(v, int) for k, v in row.items() if k.endswith("evals"))


def test_table_output(cli, tmp_path):
    data = tmp_path / "tiny.json"
    write_cache(data)
    result = cli("bench", data, "--repeats", "2", "--workers", "1")
    assert result.exit_code == 0, result.stderr
    assert "tiny" in result.stdout and "iterml" in result.stdout


def test_bad_input_exits_2_with_one_line(cli, tmp_path):
    data = tmp_path / "tiny.json"
    write_cache(data)
    for args in (
        [tmp_path / "missing.json.gz"],
        [data, "--strategy", "annealing"],
        [data, "--repeats", "0"],
    ):
        result = cli("bench", *args, "--json")
        assert result.exit_code == 2, result.stdout
        assert result.stdout == ""
        assert len(result.stderr.strip().splitlines()) == 1
        assert "Traceback" not in result.stderr
    np.testing.assert_equal(len(list(tmp_path.iterdir())), 1)


def write_sized_cache(path, size: int, kernel: str = "scale") -> None:
    """A kernel whose best `bx` follows the problem size: 3 below 1000, 9 from 1000 up."""
    best = 3 if size < 1000 else 9
    cache = {
        f"{x},{y}": {"bx": x, "by": y, "time": 1.0 + 0.3 * abs(x - best) + 0.2 * abs(y - 5)}
        for x in range(12)
        for y in range(12)
    }
    path.write_text(
        json.dumps(
            {
                "kernel_name": kernel,
                "problem_size": [size],
                "tune_params_keys": ["bx", "by"],
                "cache": cache,
            }
        )
    )


@pytest.mark.slow
def test_across_sizes_lets_predictive_learn_a_new_size_from_the_others(cli, tmp_path):
    paths = []
    for size in (400, 600, 1400, 1600, 500):
        paths.append(tmp_path / f"scale_{size}.json")
        write_sized_cache(paths[-1], size)
    args = ["bench", *paths, "--repeats", "4", "--workers", "1", "--json", "-s", "predictive"]
    learned = {r["dataset"]: r for r in cli.json(*args, "--across-sizes")["results"]}
    alone = {r["dataset"]: r for r in cli.json(*args)["results"]}
    # From the other sizes, the first pick on size 500 is already the optimum (3, 5).
    assert learned["scale_500"]["std2_evals"] == 1
    assert alone["scale_500"]["std1_evals"] > 1


def write_gpu_cache(path, device: str, best: int) -> None:
    """A Kernel Tuner cache measured on `device`, whose best `bx` is `best`."""
    cache = {
        f"{x},{y}": {"bx": x, "by": y, "time": 1.0 + 0.3 * abs(x - best) + 0.1 * abs(y - 2)}
        for x in range(8)
        for y in range(4)
    }
    keys = {"device_name": device, "kernel_name": "k", "tune_params_keys": ["bx", "by"]}
    path.write_text(json.dumps({**keys, "cache": cache}))


def gpu_group(tmp_path) -> list:
    devices = {"NVIDIA A100-PCIE-40GB": 6, "NVIDIA RTX A4000": 6, "AMD Radeon PRO W7700": 1}
    paths = []
    for n, (device, best) in enumerate(devices.items()):
        paths.append(tmp_path / f"k_{n}.json")
        write_gpu_cache(paths[-1], device, best)
    return paths


@pytest.mark.slow
def test_transfer_with_a_gpu_known_nowhere_warns_and_gives_every_row(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    paths = gpu_group(tmp_path)
    group = ["bench", "--transfer", *paths, "--workers", "1", "--max-evals", "5"]
    done = cli(*group, "--repeats", "2", "--json")
    assert done.exit_code == 0, done.stderr
    rows = json.loads(done.stdout)["results"]
    assert [r["device"] for r in rows] == [
        "NVIDIA A100-PCIE-40GB",
        "NVIDIA RTX A4000",
        "AMD Radeon PRO W7700",
    ]
    (warning,) = done.stderr.strip().splitlines()  # said once, not once per row
    assert warning.startswith("annotune: warning: no device features known for 'AMD Radeon PRO")
    assert "'AMD Radeon PRO W7800'" in warning
    # Described in a --gpus file, or in annotune.toml here: no warning.
    entry = (
        '[[gpu]]\nname = "AMD Radeon PRO W7700"\narchitecture = "RDNA3 (gfx1101)"\n'
        + "\n".join(f"{n} = {v:g}" for n, v in lookup("W7800").values.items())
    )
    (tmp_path / "gpus.toml").write_text(entry)
    quick = [*group, "--repeats", "1", "--json"]  # only what it says on stderr is read now
    described = cli(*quick, "--gpus", tmp_path / "gpus.toml")
    assert described.exit_code == 0 and described.stderr == ""
    (tmp_path / "annotune.toml").write_text(entry)
    assert cli(*quick).stderr == ""


def test_a_malformed_gpu_table_is_a_located_error(cli, tmp_path):
    paths = gpu_group(tmp_path)
    bad = tmp_path / "gpus.toml"
    bad.write_text('[[gpu]]\nname = "AMD Radeon PRO W7700"\ncores = "many"\n')
    done = cli("bench", "--transfer", *paths, "--repeats", "1", "--gpus", bad)
    assert done.exit_code == 2 and done.stdout == ""
    assert done.stderr.startswith(f"{bad}:3:10: error: cores must be a finite number")
    missing = cli("bench", "--transfer", *paths, "--gpus", tmp_path / "nope.toml")
    assert missing.exit_code == 2 and "Traceback" not in missing.stderr


@pytest.mark.slow
def test_recorded_datasets_with_a_renamed_gpu_give_a_row_per_target(cli, tmp_path, replay_dir):
    """The recorded convolution runs of the A100 and the A4000 (one space; dedispersion's
    took twice as long), the A4000's renamed to a GPU no table knows."""
    renamed = tmp_path / "convolution_future.json.gz"
    data = json.loads(gzip.decompress((replay_dir / "convolution_A4000.json.gz").read_bytes()))
    data["device_name"] = "NVIDIA RTX A4500 Ada"
    renamed.write_bytes(gzip.compress(json.dumps(data).encode()))
    args = [replay_dir / "convolution_A100.json.gz", renamed, "--repeats", "1", "--max-evals", "5"]
    done = cli("bench", "--transfer", *args, "--workers", "1", "--json")
    assert done.exit_code == 0, done.stderr
    rows = json.loads(done.stdout)["results"]
    assert [r["device"] for r in rows] == ["NVIDIA A100-PCIE-40GB", "NVIDIA RTX A4500 Ada"]
    assert "no device features known for 'NVIDIA RTX A4500 Ada'" in done.stderr
    assert "Ada" in rows[0]["warnings"][0]
