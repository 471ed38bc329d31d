"""The replay runner: Kernel Tuner caches (plain, gzipped, unclosed) and T4 result files."""

from __future__ import annotations

import gzip
import json
import os

import numpy as np
import pytest

from annotune.core import inputs
from annotune.core.diagnostics import AnnotuneError
from annotune.core.inputs import InputKind
from annotune.results.replay import load_replay


def kernel_tuner_cache() -> dict:
    times = {
        (16, 1): 4.0,
        (32, 1): 2.0,
        (64, 1): "InvalidConfig",
        (16, 2): "CompilationFailedConfig",
        (32, 2): 1.0,
        (64, 2): "RuntimeFailedConfig",
    }
    cache = {
        f"{x},{y}": {"block_size_x": x, "tile": y, "time": t, "times": [t]}
        for (x, y), t in times.items()
    }
    return {
        "device_name": "test GPU",
        "kernel_name": "k",
        "problem_size": [1024],
        "tune_params_keys": ["block_size_x", "tile"],
        "tune_params": {"block_size_x": [16, 32, 64], "tile": [1, 2]},
        "objective": "time",
        "cache": cache,
    }


def check_cache_dataset(dataset) -> None:
    assert len(dataset) == 6 and dataset.names == ("block_size_x", "tile")
    assert dataset.best_time == 1.0
    results = dataset.measure(range(6))
    invalid = {r.error for r in results if r.time is None}
    assert invalid == {"InvalidConfig", "CompilationFailedConfig", "RuntimeFailedConfig"}
    assert [r.time for r in results if r.time is not None] == [4.0, 2.0, 1.0]
    assert np.allclose(dataset.normalized(), [0.25, 0.5, 0, 0, 1.0, 0])
    assert dataset.candidates.values[4].tolist() == [32.0, 2.0]


def test_kernel_tuner_cache_plain_and_gzipped(tmp_path):
    plain = tmp_path / "k.json"
    plain.write_text(json.dumps(kernel_tuner_cache()))
    zipped = tmp_path / "k_gpu.json.gz"
    zipped.write_bytes(gzip.compress(plain.read_bytes()))
    check_cache_dataset(load_replay(plain))
    dataset = load_replay(zipped)
    check_cache_dataset(dataset)
    assert dataset.name == "k_gpu"


def test_unclosed_kernel_tuner_cache_is_read(tmp_path):
    text = json.dumps(kernel_tuner_cache(), indent=1)
    unclosed = text.rstrip().removesuffix("}").rstrip().removesuffix("}").rstrip() + ",\n"
    path = tmp_path / "open.json"
    path.write_text(unclosed)
    check_cache_dataset(load_replay(path))


def test_t4_results_file(tmp_path):
    records = []
    for x, t, invalidity in [
        (16, 3.0, "correct"),
        (32, 1.5, "correct"),
        (64, None, "compile"),
        (128, 9.0, "runtime"),
        (16, 0.1, "correct"),
    ]:  # last: duplicate
        records.append(
            {
                "timestamp": "2024-01-01T00:00:00Z",
                "configuration": {"block_size_x": x, "layout": "row" if x < 64 else "col"},
                "objectives": ["time"],
                "measurements": [{"name": "time", "value": t, "unit": "ms"}],
                "invalidity": invalidity,
                "correctness": 1,
            }
        )
    path = tmp_path / "run.T4.json"
    path.write_text(json.dumps({"schema_version": "1.0.0", "results": records}))
    dataset = load_replay(path)
    assert len(dataset) == 4  # the duplicate of 16 is dropped, its first record kept
    results = dataset.measure(range(4))
    assert [r.time for r in results] == [3.0, 1.5, None, None]
    assert [r.error for r in results] == ["", "", "compile", "runtime"]
    assert dataset.candidates.values[:, 1].tolist() == [1.0, 1.0, 0.0, 0.0]  # strings ranked


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "no such file"),
        ("{not json", "not valid JSON"),
        ('{"something": 1}', "neither a Kernel Tuner cache nor a T4"),
        ('{"cache": {}, "tune_params_keys": ["a"]}', "holds no configurations"),
    ],
)
def test_unusable_files_are_user_errors(tmp_path, content, message):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(AnnotuneError, match=message):
        load_replay(path)


def test_a_real_replay_file(replay_file):
    dataset = load_replay(replay_file("pnpoly_RTX_3090"))
    assert len(dataset) == 4092
    assert int(np.isnan(dataset.times).sum()) == 318
    assert int((dataset.normalized() >= 0.95).sum()) == 35


@pytest.mark.parametrize(
    ("data", "message", "where"),
    [
        (b'{"cache": {},\n "x": "\xff"}', "invalid UTF-8 byte 0xff", (2, 8)),
        (b'{"cache": {},\n  "x": nope}', "not valid JSON: Expecting value", (2, 8)),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply", (1, 1)),
        (b'{"x": ' + b"1" * 5000 + b"}", "not valid JSON: Exceeds the limit", (1, 1)),
        (gzip.compress(b'{"cache": {}', mtime=0) + b"junk", "not a readable gzip file", (1, 1)),
    ],
)
def test_hostile_files_are_located_user_errors(tmp_path, data, message, where):
    path = tmp_path / "bad.json"
    path.write_bytes(data)
    with pytest.raises(AnnotuneError, match=message) as caught:
        load_replay(path)
    location = caught.value.location
    assert (location.file, location.line, location.column) == (str(path), *where)


def test_special_files_and_gzip_bombs_are_refused_without_reading_them(tmp_path, monkeypatch):
    fifo, bomb = tmp_path / "fifo.json", tmp_path / "bomb.json.gz"
    os.mkfifo(fifo)
    with pytest.raises(AnnotuneError, match="is a FIFO"):
        load_replay(fifo)  # before: blocked forever
    bomb.write_bytes(gzip.compress(b" " * (3 << 20)))
    monkeypatch.setattr(inputs, "RESULTS", InputKind("results file", 1 << 20))
    with pytest.raises(AnnotuneError, match="too large for a results file: more than 1 MiB"):
        load_replay(bomb)


def test_odd_but_readable_values_are_no_crash(tmp_path):
    cache = kernel_tuner_cache()
    cache["problem_size"] = [10**400]
    for record in cache["cache"].values():
        record["tile"] = 10**400 + record["tile"]  # beyond a float: ranked as a label
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(cache))
    dataset = load_replay(path)
    assert dataset.problem_size == ()
    assert sorted(set(dataset.candidates.values[:, 1])) == [0.0, 1.0]
    cache["tune_params_keys"] = "block_size_x"
    path.write_text(json.dumps(cache))
    with pytest.raises(AnnotuneError, match="tune_params_keys \\(a list of names\\)"):
        load_replay(path)
