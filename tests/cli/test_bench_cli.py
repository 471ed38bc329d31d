"""`annotune bench`: one JSON object with --json, a table otherwise, exit 2 on bad input."""

from __future__ import annotations

import json

import numpy as np


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


def test_across_sizes_lets_predictive_learn_a_new_size_from_the_others(cli, tmp_path):
    paths = []
    for size in (400, 600, 1400, 1600, 500):
        paths.append(tmp_path / f"scale_{size}.json")
        write_sized_cache(paths[-1], size)
    args = ["bench", *paths, "--repeats", "10", "--workers", "1", "--json", "-s", "predictive"]
    learned = {r["dataset"]: r for r in cli.json(*args, "--across-sizes")["results"]}
    alone = {r["dataset"]: r for r in cli.json(*args)["results"]}
    # From the other sizes, the first pick on size 500 is already the optimum (3, 5).
    assert learned["scale_500"]["std2_evals"] == 1
    assert alone["scale_500"]["std1_evals"] > 1
