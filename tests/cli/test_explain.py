"""`annotune explain`: the tree of a replay dataset or of a source's measurements."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from annotune.core.records import Measurement
from annotune.results.database import Database, StudyKey, default_db_path
from annotune.results.replay import load_replay


def write_cache(path: Path) -> None:
    """A 12 x 6 space where `bx` <= 7 is three times slower; one configuration fails."""
    cache = {}
    for x in range(12):
        for y in range(6):
            time = (3.0 if x <= 7 else 1.0) + 0.01 * y
            value = "RuntimeFailedConfig" if (x, y) == (0, 0) else time
            cache[f"{x},{y}"] = {"bx": x, "by": y, "time": value}
    path.write_text(json.dumps({"tune_params_keys": ["bx", "by"], "cache": cache}))


def most_variance_explained(values: np.ndarray, performance: np.ndarray) -> int:
    """The column whose value groups' means explain the most variance (eta squared)."""
    shares = []
    for column in values.T:
        _, group = np.unique(column, return_inverse=True)
        counts = np.bincount(group)
        means = np.bincount(group, performance) / counts
        shares.append((counts * (means - performance.mean()) ** 2).sum())
    return int(np.argmax(shares))


@pytest.mark.parametrize("name", ["convolution_A100", "convolution_RTX_3090", "gemm_RTX_3090"])
def test_top_split_is_the_parameter_that_matters_most(cli, name, replay_file):
    path = replay_file(name)
    dataset = load_replay(path)
    column = most_variance_explained(dataset.candidates.values, dataset.normalized())
    expected = dataset.names[column]
    out = cli.json("explain", path, "--json", "--depth", "2")
    assert out["tree"]["parameter"] == expected
    assert out["samples"] == len(dataset)


def test_json_shape(cli, tmp_path):
    data = tmp_path / "tiny.json"
    write_cache(data)
    out = cli.json("explain", data, "--json")
    assert list(out) == ["tree", "importance", "samples"]
    assert out["samples"] == 72
    root = out["tree"]
    assert (root["parameter"], root["threshold"]) == ("bx", 7.0)
    assert root["low"]["samples"] + root["high"]["samples"] == 72
    assert root["low"]["mean"] < root["high"]["mean"]  # performance: higher is better
    assert [row["parameter"] for row in out["importance"]] == ["bx", "by"]
    assert sum(row["importance"] for row in out["importance"]) == pytest.approx(1.0)


def test_table_output_and_plot(cli, tmp_path):
    data = tmp_path / "tiny.json"
    write_cache(data)
    pytest.importorskip("matplotlib")
    png = tmp_path / "tree.png"
    result = cli("explain", data, "--plot", png)
    assert result.exit_code == 0, result.stderr
    assert "bx <= 7" in result.stdout and "bx > 7" in result.stdout and "n=72" in result.stdout
    assert "importance" in result.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000
    assert str(png) in result.stderr


def record_study(db: Database, source: Path, device: str, count: int) -> None:
    key = StudyKey(
        source=str(source),
        content_hash="c0ffee",
        space={"params": [{"name": "B", "values": list(range(8))}, {"name": "U", "values": [1]}]},
        device=device,
        build={},
    )
    study = db.open_study(key)
    for b in range(count):
        time = 2.0 if b < 3 else 1.0
        db.record(study, Measurement(params={"B": b, "U": 1}, status="ok", time=time))


def test_source_file_uses_its_measurements(cli, tmp_path):
    source = tmp_path / "k.cu"
    source.write_text("// a kernel\n")
    with Database(default_db_path(source)) as db:
        record_study(db, source, "gpu-a", 5)
        record_study(db, source, "gpu-b", 8)
        record_study(db, tmp_path / "other.cu", "gpu-c", 8)
    out = cli.json("explain", source, "--json")
    assert out["samples"] == 8  # the device with the most measurements
    assert (out["tree"]["parameter"], out["tree"]["threshold"]) == ("B", 2.0)
    assert cli.json("explain", source, "--json", "--device", "gpu-a")["samples"] == 5
    result = cli("explain", source, "--device", "gpu-c")
    assert result.exit_code == 2 and "no measurements" in result.stderr


def test_bad_input_exits_2(cli, tmp_path):
    data = tmp_path / "tiny.json"
    write_cache(data)
    source = tmp_path / "k.cu"
    source.write_text("// a kernel\n")
    for args, message in (
        ([tmp_path / "missing.json.gz"], "no such file"),
        ([tmp_path / "missing.cu"], "no such file"),
        ([source], "annotune tune"),
        ([data, "--depth", "0"], "--depth"),
    ):
        result = cli("explain", *args)
        assert result.exit_code == 2, args
        assert message in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / ".annotune").exists()  # a failed explain creates no database


def test_plot_without_matplotlib_says_how_to_get_it(cli, tmp_path, monkeypatch):
    data = tmp_path / "tiny.json"
    write_cache(data)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    result = cli("explain", data, "--plot", tmp_path / "tree.png")
    assert result.exit_code == 2
    assert "pip install 'annotune[plot]'" in result.stderr
    assert not (tmp_path / "tree.png").exists()
