"""Which studies of the results database a command means: a source file's own (`find_study`,
one rule for `explain`, `export` and whatever else asks), and the same problem measured on
other GPUs (`studies_elsewhere`, what `tune` and `predict` learn from)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from annotune.annotate.problem import Problem
from annotune.core.diagnostics import AnnotuneError, Location, printable
from annotune.core.records import Measurement
from annotune.results.database import (
    Database,
    Study,
    StudyKey,
    default_db_path,
    existing,
    sources_hash,
)
from annotune.results.storage import Storage
from annotune.results.t4 import write_t4


@dataclass(frozen=True)
class StudyRecord:
    """A study and its measurements, in the order they were recorded."""

    study: Study
    measurements: tuple[Measurement, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """The space's parameter names, in its order."""
        return tuple(str(param["name"]) for param in self.study.key.space["params"])

    @property
    def valid(self) -> int:
        """How many of the measurements are valid (status "ok")."""
        return sum(m.status == "ok" for m in self.measurements)

    def values(self, names: Sequence[str] | None = None) -> np.ndarray:
        """(measurements, parameters): each one's values in `names` order (default `names`)."""
        columns = self.names if names is None else names
        return np.array(
            [[float(m.params[n]) for n in columns] for m in self.measurements], dtype=np.float64
        )

    def times(self) -> np.ndarray:
        """Each measurement's time in ms, NaN when it is invalid."""
        return np.array(
            [np.nan if m.time is None else m.time for m in self.measurements], dtype=np.float64
        )


def find_study(
    database: Database,
    source: Path,
    *,
    device: str | None = None,
    content_hash: str | None = None,
) -> StudyRecord | None:
    """The study of `source`, the one rule for "this file's measurements": its newest.

    A study is the file's when it was recorded from it (`tune` records the path as typed: the
    recorded path is this file, or, relative to another directory, has its name), or when it
    measured `content_hash` (`sources_hash` of the source and its local headers, for callers
    that read them: the key ignores the path, so a copy tuned elsewhere resumed that study).
    Of the file's studies that hold measurements, on `device` when given, the newest (started
    last) of `content_hash`, the current source before its earlier versions, else the newest of
    all. None when the file has none.
    """
    ranked = []
    for study in database.studies():
        if device is not None and study.key.device != device:
            continue
        current = study.key.content_hash == content_hash
        if not (current or _same_file(study.key.source, source)):
            continue
        measurements = tuple(database.measurements(study))
        if measurements:
            ranked.append(((current, study.id), StudyRecord(study, measurements)))
    return max(ranked, key=lambda item: item[0])[1] if ranked else None


def _same_file(recorded: str, source: Path) -> bool:
    """Whether a study's recorded source (as the user typed it at tune time) is this file: the
    same path, or, when it was recorded relative to another directory, the same name. It was
    recorded `printable`: a name's bytes that are not UTF-8 as escapes (`k\\xff.c`)."""
    path = Path(recorded)
    if path.is_absolute() or path.exists():
        return printable(str(path.resolve())) == printable(str(source.resolve()))
    return path.name == printable(source.name)


def read_study(
    source: Path, *, db_path: Path | None = None, device: str | None = None
) -> StudyRecord:
    """`find_study` of `source` in its results database (`default_db_path`), by path alone, as
    `explain` needs for a file it does not parse. AnnotuneError, with what to run, when the
    file, the database (never created here) or the study is missing."""
    if not source.is_file():
        raise AnnotuneError(f"{source}: no such file")
    db_path = db_path or default_db_path(source)
    hint = f"run 'annotune tune {source}' first"
    with existing(db_path) as database:
        if database is None:
            raise AnnotuneError(f"no results database at {db_path}", hint=hint)
        found = find_study(database, source, device=device)
    if found is None:
        on = f" on device '{device}'" if device else ""
        raise AnnotuneError(f"no measurements of {source}{on} in {db_path}", hint=hint)
    return found


def export_study(
    problem: Problem, output: Path, *, db_path: Path | None = None, device: str | None = None
) -> StudyRecord:
    """Write the current source's study (`find_study` with the content of `problem`'s files) to
    `output` as a T4 file and return it. Only the current version is exported: a T4 file does
    not say which version it measured, and results of an older one would teach wrongly.
    AnnotuneError when the database (never created here) or such a study is missing."""
    db_path = db_path or default_db_path(problem.source)
    content = sources_hash(problem.files)
    with existing(db_path) as database:
        if database is None:  # no location: there is no file to point into
            raise AnnotuneError(
                f"no results database here yet: {db_path}",
                hint=f"run 'annotune tune {problem.source}' first",
            )
        found = find_study(database, problem.source, device=device, content_hash=content)
    if found is None or found.study.key.content_hash != content:
        raise AnnotuneError(
            "no measurements of this version of the source"
            + (f" on device '{device}'" if device else ""),
            Location(str(problem.source), 1, 1),
        )
    write_t4(
        output,
        found.measurements,
        device=found.study.key.device,
        device_features=found.study.device_features,
    )
    return found


def studies_elsewhere(database: Storage, key: StudyKey) -> list[StudyRecord]:
    """Per device other than `key`'s, its study of `key`'s content and space with the most
    valid measurements (the first recorded among equals); devices with none valid are left out.

    Not `find_study`'s question (which study is this file's) but which results of the same
    problem on other GPUs `tune` and `predict` can learn from: the path does not matter, the
    content and space must be the same.
    """
    best: dict[str, StudyRecord] = {}
    for study in database.studies():
        other = study.key
        if (
            other.device == key.device
            or other.content_hash != key.content_hash
            or dict(other.space) != dict(key.space)
        ):
            continue
        record = StudyRecord(study, tuple(database.measurements(study)))
        known = best.get(other.device)
        if known is None or record.valid > known.valid:
            best[other.device] = record
    return [record for record in best.values() if record.valid]


def size_studies(
    database: Database, key: StudyKey, name: str, device: str
) -> dict[int, StudyRecord]:
    """Per problem size of `name`, the study on `device` of `key`'s content and space with that
    size fixed (`annotune tune --sizes`), the one with the most valid measurements; `key` is
    the study key of the problem read without the size. Sizes with none valid are left out."""
    params = list(key.space["params"])
    best: dict[int, StudyRecord] = {}
    for study in database.studies():
        other = study.key
        if (
            other.device != device
            or other.content_hash != key.content_hash
            or other.space.get("constraints") != key.space["constraints"]
        ):
            continue
        theirs = list(other.space["params"])
        sized = [p for p in theirs if p["name"] == name]
        rest = [p for p in theirs if p["name"] != name]
        if len(sized) != 1 or len(sized[0]["values"]) != 1 or rest != params:
            continue
        size = sized[0]["values"][0]
        if not float(size).is_integer():
            continue
        record = StudyRecord(study, tuple(database.measurements(study)))
        known = best.get(int(size))
        if known is None or record.valid > known.valid:
            best[int(size)] = record
    return {size: record for size, record in sorted(best.items()) if record.valid}
