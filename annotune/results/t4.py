"""The T4 results format (the community "Open Autotuning Results", schema 1.0.0): written by
`annotune export`, read back by the replay runner, here and only here, so both sides agree.

Written: `metadata` (a field T4 leaves open) holds the `device` name and, when the study has
them, its `device_features`, so the file can teach about its GPU on its own. Per measurement:
`timestamp`, `configuration`, `objectives` (["time"]), `times` (`runtimes`: the repeats in ms;
`compilation` in seconds where the compiler stage recorded `compile_info["seconds"]`),
`invalidity` ("correct", "compile", "runtime", "timeout" or "correctness"), `correctness` (0
for a wrong answer, else 1) and `measurements`: the median `time` in ms and every numeric
compiler figure.

Read: `results` is a list of records with `configuration`, `objectives`, `measurements`
(name/value/unit) and `invalidity` ("correct" for a valid measurement; "compile", "runtime",
"correctness", "constraints" or "timeout" otherwise). When a configuration appears more than
once, its first record is used. `metadata` may name the `device` and hold its
`device_features`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from annotune.core.diagnostics import AnnotuneError
from annotune.core.files import replace_atomically
from annotune.core.records import Measurement
from annotune.results.rows import Row, time_or_marker

T4_SCHEMA_VERSION = "1.0.0"

_INVALIDITY = {
    "ok": "correct",
    "compile_error": "compile",
    "runtime_error": "runtime",
    "timeout": "timeout",
    "wrong_output": "correctness",
}
"""A measurement's status -> its T4 invalidity."""


@dataclass(frozen=True)
class T4Results:
    """What a T4 file holds: one row per configuration (the first record of each), the
    parameter names in the first record's order, and the device ("" and None when unnamed)."""

    rows: list[Row]
    names: list[str]
    device: str
    device_features: dict | None


def is_t4(data: Any) -> bool:
    """Whether parsed JSON has T4's shape (a `results` list)."""
    return isinstance(data, dict) and isinstance(data.get("results"), list)


def write_t4(
    path: Path,
    measurements: Sequence[Measurement],
    *,
    device: str,
    device_features: Mapping[str, Any] | None = None,
) -> None:
    """Write `measurements` of one study on `device` as a T4 file (parent folders created)."""
    metadata: dict[str, Any] = {"device": device}
    if device_features is not None:
        metadata["device_features"] = dict(device_features)
    document = {
        "schema_version": T4_SCHEMA_VERSION,
        "metadata": metadata,
        "results": [_record(m) for m in measurements],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_atomically(path, (json.dumps(document, indent=1) + "\n").encode())


def read_t4(data: dict, path: Path) -> T4Results:
    """The rows and device of a parsed T4 file (`is_t4`); AnnotuneError naming `path` when a
    record has no configuration."""
    rows: list[Row] = []
    seen: set[tuple] = set()
    names: list[str] | None = None
    for n, record in enumerate(data["results"]):
        config = record.get("configuration") if isinstance(record, dict) else None
        if not isinstance(config, dict):
            raise AnnotuneError(f"{path}: results[{n}] has no configuration object")
        if names is None:
            names = [str(k) for k in config]
        ident = tuple(json.dumps(config.get(k)) for k in names)
        if ident in seen:
            continue
        seen.add(ident)
        objectives = record.get("objectives")
        objective = objectives[0] if isinstance(objectives, list) and objectives else "time"
        measurements = record.get("measurements")
        value = next(
            (
                m.get("value")
                for m in (measurements if isinstance(measurements, list) else ())
                if isinstance(m, dict) and m.get("name") == objective
            ),
            None,
        )
        invalidity = str(record.get("invalidity", "correct"))
        if invalidity != "correct":
            rows.append((config, math.nan, invalidity))
        else:
            time, error = time_or_marker(value)
            rows.append((config, time, error))
    device, features = _device(data)
    return T4Results(rows, names or [], device, features)


def _device(data: dict) -> tuple[str, dict | None]:
    """The device name and features from `metadata`, ("", None) where absent."""
    metadata = data.get("metadata")
    if not isinstance(metadata, dict):
        return "", None
    features = metadata.get("device_features")
    return str(metadata.get("device") or ""), features if isinstance(features, dict) else None


def _record(m: Measurement) -> dict:
    times: dict[str, Any] = {"runtimes": list(m.times)}
    seconds = m.compile_info.get("seconds")
    if isinstance(seconds, int | float):
        times["compilation"] = seconds
    measurements = []
    if m.time is not None:
        measurements.append({"name": "time", "value": m.time, "unit": "ms"})
    for name, value in m.compile_info.items():
        if name != "seconds" and isinstance(value, int | float) and not isinstance(value, bool):
            measurements.append({"name": name, "value": value, "unit": ""})
    return {
        "timestamp": m.created,
        "configuration": dict(m.params),
        "objectives": ["time"],
        "times": times,
        "invalidity": _INVALIDITY[m.status],
        "correctness": 0 if m.status == "wrong_output" else 1,
        "measurements": measurements,
    }
