"""Rows of the results database <-> the records the rest of annotune holds: a stored study or
measurement read back with every column checked (`stored_study`, `stored_measurement`), and a
record as the values of the row that stores it (`study_values`, `measurement_values`).

A row that holds garbage (text where a number belongs, a NULL, JSON that is not, a
configuration of another space) is an AnnotuneError naming the file, the table and the row
(`checked_row`), never a traceback. Reading changes nothing."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import Measurement
from annotune.results.failures import aside
from annotune.results.keys import Study, StudyKey, dumps, now


def study_values(key: StudyKey, features: str | None) -> tuple:
    """The row of a new study of `key` (key, source, content_hash, device, space_json,
    build_json, created, device_features), created now; `features` as stored JSON."""
    return (
        key.digest,
        key.source,
        key.content_hash,
        key.device,
        dumps(key.space, sort=True),
        dumps(key.build, sort=True),
        now(),
        features,
    )


def measurement_values(
    study_id: int, key: str, params: Mapping[str, Any], measurement: Measurement
) -> tuple:
    """The row of `measurement` (study_id, config_key, params_json, time, times_json, status,
    error, compile_info_json, created, energy, energies_json), recorded now; `params` its
    configuration's plain values (`keys.plain`) and `key` their `config_key`."""
    return (
        study_id,
        key,
        dumps(params),
        measurement.time,
        dumps(list(measurement.times)),
        measurement.status,
        measurement.error,
        dumps(measurement.compile_info, sort=True),
        now(),
        measurement.energy,
        dumps(list(measurement.energies)),
    )


@contextmanager
def checked_row(path: Path, table: str, row: object) -> Iterator[None]:
    """Turn what a damaged or foreign row raises while it is checked (text where a number
    belongs, a NULL, JSON that is not, a configuration of another space) into an error that
    names the database, the table and the row. Nothing is written: reading changes nothing."""
    try:
        yield
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as error:
        which = f"row {row}" if isinstance(row, int) else f"the row {row}"
        raise AnnotuneError(
            f"{path}: {which} of table '{table}' is damaged or not annotune's ({error})",
            hint=aside(path),
        ) from None


def shown(value: object) -> str:
    """A stored value as an error shows it: NULL, or its repr cut to 60 characters."""
    text = "NULL" if value is None else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def finite(value: object, what: str) -> float:
    """A number column or JSON number: an int or float, finite, never a bool or text."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"'{what}' is {shown(value)}, not a finite number")
    return value


def space_names(space: object) -> set[str] | None:
    """The names of a study's parameters, as its key's space stores them (None or none: it
    lists none, as no study of a source does, so there is nothing to check a row against).
    Their values are checked to be numbers; a measurement's value outside them is not
    refused (a domain narrowed by hand)."""
    if not isinstance(space, dict):
        raise ValueError(f"'space_json' holds {shown(space)}, not a space")
    if "params" not in space:
        return None
    if not isinstance(space["params"], list):
        raise ValueError(f"'space_json' holds parameters {shown(space['params'])}")
    names: set[str] = set()
    for param in space["params"]:
        if not isinstance(param, dict) or not isinstance(param.get("name"), str):
            raise ValueError(f"'space_json' holds a parameter {shown(param)}")
        values = param.get("values")
        if not isinstance(values, list):
            raise ValueError(f"'space_json' holds values {shown(values)} of {param['name']}")
        names.add(param["name"])
        for v in values:
            finite(v, "space_json")
    if not isinstance(space.get("constraints", []), list):
        raise ValueError(f"'space_json' holds constraints {shown(space['constraints'])}")
    return names


def features(text: object) -> dict | None:
    """A study's stored device features, decoded (None when it has none)."""
    return None if text is None else _json(text, dict, "device_features")


def all_studies(conn: sqlite3.Connection, path: Path) -> list[Study]:
    """Every study in the file at `path`, oldest first."""
    rows = conn.execute(
        "SELECT id, source, content_hash, device, space_json, build_json, created,"
        " device_features FROM studies ORDER BY id"
    ).fetchall()
    return [stored_study(path, row) for row in rows]


def stored_study(path: Path, row: tuple) -> Study:
    """A study as stored, every column checked."""
    with checked_row(path, "studies", row[0]):
        study_id, source, content_hash, device, space, build, created, stored = row
        for name, value in (
            ("source", source),
            ("content_hash", content_hash),
            ("device", device),
            ("created", created),
        ):
            if not isinstance(value, str):
                raise ValueError(f"'{name}' is {shown(value)}, not text")
        if isinstance(study_id, bool) or not isinstance(study_id, int):
            raise ValueError(f"'id' is {shown(study_id)}")
        space = _json(space, dict, "space_json")
        space_names(space)
        key = StudyKey(source, content_hash, space, device, _json(build, dict, "build_json"))
        return Study(study_id, key, created, features(stored))


def stored_measurement(
    path: Path, row: tuple, study: Study, names: set[str] | None = None
) -> Measurement:
    """A measurement as stored, every column checked, its configuration one of `study`'s
    space: a foreign or damaged row is an error naming the database, never a traceback."""
    row_id, *columns = row
    with checked_row(path, "measurements", row_id):
        params, status, time, times, error, compile_info, created, energy, energies = columns
        params = _json(params, dict, "params_json")
        space = names if names is not None else space_names(study.key.space)
        if space and set(params) != space:
            raise ValueError(
                f"its configuration {shown(params)} names other parameters than its study's "
                f"({', '.join(sorted(space)) or 'none'})"
            )
        for name, value in params.items():
            finite(value, f"params_json {name}")
        if not isinstance(status, str):
            raise ValueError(f"'status' is {shown(status)}, not text")
        if time is not None:
            finite(time, "time")
        if not isinstance(error, str | None) or not isinstance(created, str | None):
            raise ValueError(f"'error' or 'created' is {shown(error)}, not text")
        if energy is not None:
            finite(energy, "energy")
        return Measurement(
            params=params,
            status=status,
            time=time,
            times=tuple(finite(t, "times_json") for t in _json(times, list, "times_json")),
            error=error or "",
            compile_info=_json(compile_info, dict, "compile_info_json"),
            created=created,
            energy=energy,
            energies=tuple(
                finite(e, "energies_json") for e in _json(energies, list, "energies_json")
            ),
        )


def _json(text: object, kind: type, what: str) -> Any:
    """A column's JSON text, decoded, which must be a `kind` (dict or list)."""
    if not isinstance(text, str):
        raise ValueError(f"'{what}' is {shown(text)}, not JSON text")
    data = json.loads(text)
    if not isinstance(data, kind):
        raise ValueError(f"'{what}' holds {shown(data)}, not a JSON {kind.__name__}")
    return data
