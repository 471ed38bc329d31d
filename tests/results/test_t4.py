"""The T4 format: what `write_t4` writes, `read_t4` reads back the same, status by status."""

from __future__ import annotations

import json
import math

from annotune.core.records import Measurement
from annotune.results.t4 import T4_SCHEMA_VERSION, is_t4, read_t4, write_t4

STATUSES = {
    "ok": "correct",
    "compile_error": "compile",
    "runtime_error": "runtime",
    "timeout": "timeout",
    "wrong_output": "correctness",
}


def measurements() -> list[Measurement]:
    out = [Measurement({"B": 1, "A": 8}, "ok", 2.5, times=(2.5, 2.6), created="t0")]
    for b, status in enumerate(list(STATUSES)[1:], start=2):
        out.append(Measurement({"B": b, "A": 8}, status, error="failed"))
    return out


def test_every_status_survives_the_round_trip(tmp_path):
    path = tmp_path / "deep" / "study.json"
    features = {"name": "gpu", "sm_count": 108}
    write_t4(path, measurements(), device="gpu", device_features=features)
    data = json.loads(path.read_text())
    assert data["schema_version"] == T4_SCHEMA_VERSION and is_t4(data)
    assert [r["invalidity"] for r in data["results"]] == list(STATUSES.values())
    read = read_t4(data, path)
    assert (read.device, read.device_features, read.names) == ("gpu", features, ["B", "A"])
    assert [config for config, _, _ in read.rows] == [m.params for m in measurements()]
    assert read.rows[0][1:] == (2.5, "")
    assert all(math.isnan(time) for _, time, _ in read.rows[1:])
    assert [error for _, _, error in read.rows[1:]] == list(STATUSES.values())[1:]


def test_a_file_without_metadata_names_no_device(tmp_path):
    write_t4(tmp_path / "bare.json", measurements()[:1], device="gpu")
    data = json.loads((tmp_path / "bare.json").read_text())
    assert data["metadata"] == {"device": "gpu"}
    del data["metadata"]
    read = read_t4(data, tmp_path / "bare.json")
    assert (read.device, read.device_features) == ("", None)
    assert not is_t4({"cache": {}}) and not is_t4([])
