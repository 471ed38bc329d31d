"""Leave-one-size-out on synthetic datasets whose answers are known, bad input, and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from annotune.bench.sizes import SizeRow, held_out_sizes, mean_fractions
from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import Candidates
from annotune.results.replay import ReplayDataset

X, Y = np.meshgrid(np.arange(16), np.arange(8), indexing="ij")
VALUES = np.stack([X.ravel(), Y.ravel()], axis=1).astype(float)

# Two regimes: small problems want x = 1, large ones x = 10 (y matters a little, 0 is best).
REGIMES = {64: 1, 128: 1, 256: 1, 1024: 10, 2048: 10}


def dataset(size: int, best_x: int, values=VALUES, names=("x", "y"), **extra) -> ReplayDataset:
    times = (1.0 + 0.1 * np.abs(values[:, 0] - best_x)) * (1.0 + 0.02 * values[:, 1])
    where = {"device": "host", "kernel": "k", "problem_size": (float(size),), **extra}
    return ReplayDataset(
        f"k_{size}", Candidates(values, names), times, ("",) * len(values), **where
    )


def regimes(sizes=tuple(REGIMES)) -> list[ReplayDataset]:
    return [dataset(size, REGIMES[size]) for size in sizes]


@pytest.fixture(scope="module")
def regime_rows() -> list[SizeRow]:
    return held_out_sizes(regimes(), seed=0)


def test_nearest_size_beats_the_single_best_when_the_best_changes_with_size(regime_rows):
    rows = {row.problem_size[0]: row for row in regime_rows}
    assert sorted(rows) == sorted(REGIMES)
    top = rows[2048]
    assert top.nearest_size == (1024.0,) and top.nearest.config == (10.0, 0.0)
    assert top.nearest.fraction == 1.0
    # Three of the four tuned sizes want x = 1: the compromise is x = 1, 1.9x off at 2048.
    assert top.single_best.config == (1.0, 0.0)
    assert top.single_best.fraction == pytest.approx(1 / 1.9)
    assert not top.between and rows[256].between and not rows[64].between
    assert top.best == (10.0, 0.0)
    # The model learns the size: beyond 1024 it follows the large regime.
    assert top.model.fraction >= 0.9
    assert top.features.names == ("log2 problem_size[0]",)
    means = mean_fractions(list(rows.values()))
    assert set(means) == {"nearest", "model", "single_best"}
    assert means["nearest"] > means["single_best"]


def test_a_tie_in_log_distance_goes_to_the_larger_size():
    data = [dataset(128, 2), dataset(256, 5), dataset(512, 9)]
    middle = {row.problem_size[0]: row for row in held_out_sizes(data)}[256]
    assert middle.nearest_size == (512.0,)
    assert middle.nearest.config == (9.0, 0.0)
    assert middle.nearest.fraction == pytest.approx(1 / 1.4)


def test_a_choice_not_recorded_at_the_held_out_size_reaches_nothing_and_is_said():
    keep = ~((VALUES[:, 0] == 10) & (VALUES[:, 1] == 0))
    data = [*regimes((64, 1024)), dataset(2048, 10, values=VALUES[keep])]
    top = held_out_sizes(data)[-1]
    assert top.nearest.config == (10.0, 0.0) and top.nearest.fraction == 0.0
    assert any("not here" in w for w in top.warnings)


def test_the_default_is_reported_when_named():
    rows = held_out_sizes(regimes((64, 128, 1024)), default={"x": 4, "y": 2})
    assert rows[0].default is not None and rows[0].default.config == (4.0, 2.0)
    assert rows[0].default.fraction == pytest.approx(1 / (1.3 * 1.04))
    assert "default" in mean_fractions(rows)
    assert rows[0].to_json()["default"]["config"] == {"x": 4, "y": 2}


def test_json_rows_are_plain(regime_rows):
    row = regime_rows[-1].to_json()
    assert row["problem_size"] == [2048] and row["nearest_size"] == [1024]
    assert row["nearest"] == {"config": {"x": 10, "y": 0}, "fraction": 1.0}
    assert row["default"] is None and row["tuned_sizes"] == [[64], [128], [256], [1024]]
    json.dumps(row)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([dataset(64, 1)], "two sizes or more"),
        ([dataset(64, 1), dataset(64, 2)], "also k_64's"),
        ([dataset(64, 1), dataset(128, 1, names=("x", "z"))], "parameters"),
        ([dataset(64, 1), dataset(128, 1, kernel="other")], "kernel"),
        ([dataset(64, 1), dataset(128, 1, device="gpu")], "device"),
        ([dataset(64, 1), dataset(128, 1, problem_size=())], "no problem size"),
        ([dataset(64, 1), dataset(128, 1, problem_size=(0.0,))], "not all positive"),
        ([dataset(64, 1), dataset(128, 1, problem_size=(8.0, 8.0))], "dimensions"),
        ([dataset(64, 1), dataset(128, 1, values=VALUES + 100)], "no configuration is recorded"),
    ],
)
def test_bad_input_is_a_clear_error(data, message):
    with pytest.raises(AnnotuneError, match=message):
        held_out_sizes(data)


def test_a_default_must_name_every_parameter():
    with pytest.raises(AnnotuneError, match="missing y; unknown z"):
        held_out_sizes(regimes(), default={"x": 1, "z": 2})


def write_cache(path, size: int, best_x: int, keys=("x", "y")) -> None:
    cache = {}
    for x, y in VALUES.astype(int).tolist():
        time = (1.0 + 0.1 * abs(x - best_x)) * (1.0 + 0.02 * y)
        cache[f"{x},{y}"] = {keys[0]: x, keys[1]: y, "time": time}
    data = {"tune_params_keys": list(keys), "problem_size": [size], "cache": cache}
    path.write_text(json.dumps(data))


def caches(tmp_path, sizes=(64, 1024, 2048)) -> list:
    paths = []
    for size in sizes:
        paths.append(tmp_path / f"k_{size}.json")
        write_cache(paths[-1], size, REGIMES[size])
    return paths


def test_cli_json(cli, tmp_path):
    out = cli.json("bench", "--held-out-size", *caches(tmp_path), "--json")
    assert set(out) == {"results", "mean"}
    assert [r["problem_size"] for r in out["results"]] == [[64], [1024], [2048]]
    assert out["results"][-1]["nearest"]["fraction"] == 1.0
    assert out["mean"]["nearest"] > out["mean"]["single_best"]


def test_cli_table(cli, tmp_path):
    result = cli("bench", "--held-out-size", *caches(tmp_path))
    assert result.exit_code == 0, result.stderr
    assert "2048 (outside)" in result.stdout and "mean" in result.stdout
    assert "1.000 (1024: 10,0)" in result.stdout


def test_cli_bad_input_exits_2(cli, tmp_path):
    paths = caches(tmp_path)
    other = tmp_path / "other.json"
    write_cache(other, 4096, 10, keys=("x", "w"))
    for args in (
        [paths[0]],
        [paths[0], other],
        [*paths, "--transfer"],
        [*paths, "--across-sizes"],
    ):
        result = cli("bench", "--held-out-size", *args)
        assert result.exit_code == 2, (args, result.stdout)
        assert "error:" in result.stderr and "Traceback" not in result.stderr
