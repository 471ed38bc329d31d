"""Replay runner: "measure" a configuration by looking up its recorded time in a dataset.

Two file formats are read:

* Kernel Tuner cache files (`.json` or `.json.gz`): `tune_params_keys` gives the parameter
  order and `cache` maps each configuration to a record whose `time` is a number, or one of the
  strings `InvalidConfig`, `CompilationFailedConfig`, `RuntimeFailedConfig` for an invalid
  configuration. A cache Kernel Tuner left unclosed (interrupted run: no final braces) is
  read too.
* T4 result files (the community "Open Autotuning Results" format, `annotune.results.t4`),
  as `annotune export` writes them: their `metadata` may name the `device` and hold its
  `device_features`.

Every configuration present in the file is the legal space. Invalid records become invalid
results (time None, error = the marker), so strategies learn from them exactly as they would
from a real failed compile or crash.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.inputs import read_results
from annotune.core.records import Candidates, Result, normalized_performance
from annotune.results.rows import Row, time_or_marker
from annotune.results.t4 import is_t4, read_t4


@dataclass(frozen=True)
class ReplayDataset:
    """A recorded, complete tuning run: the space and each configuration's time.

    `times[i]` is the recorded time of row i of `candidates.values` (NaN when invalid) and
    `errors[i]` its invalid marker ("" when valid). Exact evaluation of a search uses
    `normalized()`: best time / time, 0 for invalid configurations. `device`, `kernel` and
    `problem_size` are what the file says about where and on what it was measured ("" and
    () when it does not say), for learning across GPUs and problem sizes; `device_features`
    the device's features as a T4 file's metadata stores them (`DeviceFeatures.to_json()`),
    None when the file has none.
    """

    name: str
    candidates: Candidates
    times: np.ndarray
    errors: tuple[str, ...]
    device: str = ""
    kernel: str = ""
    problem_size: tuple[float, ...] = ()
    device_features: dict | None = None

    def __len__(self) -> int:
        return len(self.candidates)

    @property
    def names(self) -> tuple[str, ...]:
        return self.candidates.names

    @property
    def best_time(self) -> float:
        valid = self.times[~np.isnan(self.times)]
        return float(valid.min()) if valid.size else math.nan

    def normalized(self) -> np.ndarray:
        """Normalized performance of every row: best time / its time (invalid = 0)."""
        return normalized_performance(self.times)

    def measure(self, indices: Sequence[int]) -> list[Result]:
        """The runner interface: recorded results for `indices`, in order."""
        out = []
        for i in indices:
            t = self.times[i]
            invalid = np.isnan(t)
            out.append(Result(int(i), None if invalid else float(t), self.errors[i]))
        return out


def load_replay(path: str | Path) -> ReplayDataset:
    """Read a Kernel Tuner cache or T4 results file; AnnotuneError if it cannot be used."""
    path = Path(path)
    data = _read_json(path)
    name = path.name.removesuffix(".gz").removesuffix(".json")
    device, kernel, problem_size, device_features = "", "", (), None
    if isinstance(data, dict) and isinstance(data.get("cache"), dict):
        rows = _kernel_tuner_rows(data, path)
        device = str(data.get("device_name") or "")
        kernel = str(data.get("kernel_name") or "")
        problem_size = _problem_size(data.get("problem_size"))
        keys = data.get("tune_params_keys")
        if not isinstance(keys, list) or not keys:
            raise AnnotuneError(
                f"{path}: Kernel Tuner cache without tune_params_keys (a list of names)"
            )
        keys = [str(k) for k in keys]
    elif is_t4(data):
        t4 = read_t4(data, path)
        rows, keys, device, device_features = t4.rows, t4.names, t4.device, t4.device_features
    else:
        raise AnnotuneError(f"{path}: neither a Kernel Tuner cache nor a T4 results file")
    if not rows:
        raise AnnotuneError(f"{path}: the file holds no configurations")
    values = _encode_values(rows, keys, path)
    times = np.array([t for _, t, _ in rows], dtype=np.float64)
    errors = tuple(e for _, _, e in rows)
    return ReplayDataset(
        name,
        Candidates(values, tuple(keys)),
        times,
        errors,
        device,
        kernel,
        problem_size,
        device_features,
    )


def values_in_order(
    dataset: ReplayDataset, names: Sequence[str], path: Path, *, hint: str
) -> np.ndarray:
    """The recorded configurations with their columns in the order of `names` (a source's
    parameters); AnnotuneError, with `hint`, when the recording has other parameters."""
    if set(dataset.names) != set(names):
        raise AnnotuneError(
            f"{path}: the recording's parameters ({', '.join(dataset.names)}) are not the "
            f"source's ({', '.join(names)})",
            hint=hint,
        )
    return dataset.candidates.values[:, [dataset.names.index(name) for name in names]]


def _problem_size(value: Any) -> tuple[float, ...]:
    """Kernel Tuner's problem_size (a number or a list of numbers) as a tuple; else ()."""
    items = value if isinstance(value, list) else [value]
    if items and all(isinstance(v, int | float) and not isinstance(v, bool) for v in items):
        try:
            return tuple(float(v) for v in items)
        except OverflowError:  # an integer beyond any float
            return ()
    return ()


def _read_json(path: Path) -> Any:
    """The parsed file: a regular file, gzip or not, bounded in size before and after
    decompression, UTF-8 (`core.inputs`); a mistake in the JSON located in the text."""
    text = read_results(path)
    try:
        return _parse_json(text, path)
    except AnnotuneError as error:
        # Kernel Tuner writes its cache incrementally and closes it only at the end.
        repaired = text.rstrip().rstrip(",") + "}}"
        try:
            return _parse_json(repaired, path)
        except AnnotuneError:
            raise error from None


def _parse_json(text: str, path: Path) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        where = Location(str(path), error.lineno, error.colno)
        raise AnnotuneError(f"not valid JSON: {error.msg}", where) from None
    except ValueError as error:  # an integer of more digits than Python converts
        raise AnnotuneError(f"not valid JSON: {error}", Location(str(path), 1, 1)) from None
    except RecursionError:  # json reads nested arrays and objects recursively
        raise AnnotuneError(
            "not valid JSON: arrays or objects nested too deeply", Location(str(path), 1, 1)
        ) from None


def _kernel_tuner_rows(data: dict, path: Path) -> list[Row]:
    objective = str(data.get("objective") or "time")
    rows = []
    for key, record in data["cache"].items():
        if not isinstance(record, dict):
            raise AnnotuneError(f"{path}: cache entry {key!r} is not an object")
        time, error = time_or_marker(record.get(objective))
        rows.append((record, time, error))
    return rows


def _encode_values(rows: list[Row], keys: list[str], path: Path) -> np.ndarray:
    """The float matrix of parameter values; non-numeric values become their rank."""
    values = np.empty((len(rows), len(keys)), dtype=np.float64)
    for j, key in enumerate(keys):
        try:
            column = [config[key] for config, _, _ in rows]
        except KeyError:
            raise AnnotuneError(f"{path}: a configuration lacks parameter {key!r}") from None
        if _numbers(column):
            values[:, j] = column
        else:
            levels = {v: r for r, v in enumerate(sorted({json.dumps(v) for v in column}))}
            values[:, j] = [levels[json.dumps(v)] for v in column]
    return values


def _numbers(column: list) -> bool:
    """Whether a parameter's values are numbers a float holds (else they are ranked)."""
    try:
        return all(isinstance(v, int | float) and math.isfinite(v) for v in column)
    except OverflowError:  # an integer beyond any float
        return False
