"""What identifies what is stored: a study's key (a hash over the content of the source and its
local headers, the space, the device and the build, `StudyKey`), the study as stored (`Study`)
and a configuration's canonical text (`config_key`); with the canonical JSON they are made of."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from annotune.annotate.problem import Problem
from annotune.core.diagnostics import printable
from annotune.core.digests import bytes_digest
from annotune.core.inputs import SOURCE, read_input
from annotune.core.records import Number


def config_key(params: Mapping[str, Any]) -> str:
    """The canonical text of a configuration: sorted, compact JSON of normalized values.

    Never a comma-joined string: values may contain commas and names may share prefixes.
    """
    return dumps({name: plain(value) for name, value in params.items()}, sort=True)


def sources_hash(files: Sequence[str | Path]) -> str:
    """SHA-256 over each file's path (relative to the first file's directory) and content.

    The first file is the source; the others are its local headers (`Problem.files`).
    """
    base = Path(files[0]).parent
    digest = hashlib.sha256()
    for file in files:
        name = os.path.relpath(file, base).replace(os.sep, "/")
        content = bytes_digest(read_input(Path(file), SOURCE))
        digest.update(os.fsencode(f"{name}\0{content}\n"))  # a name's bytes, UTF-8 or not
    return digest.hexdigest()


@dataclass(frozen=True)
class StudyKey:
    """Everything that must match for an old measurement to be reused.

    `source` is for display only (the same content measured from another path is the same
    study). `space` and `build` are JSON-able dicts compared by their canonical JSON; `build`
    holds whatever the build and run stages let change a time: compiler command and flags,
    problem size, program arguments.
    """

    source: str
    content_hash: str
    space: Mapping[str, Any]
    device: str
    build: Mapping[str, Any]

    @classmethod
    def for_problem(cls, problem: Problem, *, device: str, build: Mapping[str, Any]) -> StudyKey:
        """The key of `problem` (its files are read and hashed now) measured on `device`."""
        space = {
            "params": [{"name": p.name, "values": list(p.values)} for p in problem.params],
            "constraints": [c.text for c in problem.constraints],
        }
        return cls(
            source=printable(str(problem.source)),  # for display: a name's odd bytes escaped
            content_hash=sources_hash(problem.files),
            space=space,
            device=device,
            build=build,
        )

    @property
    def digest(self) -> str:
        """The stored key: SHA-256 of the canonical JSON of everything but `source`."""
        return hashlib.sha256(
            dumps(
                {
                    "content_hash": self.content_hash,
                    "space": self.space,
                    "device": self.device,
                    "build": self.build,
                },
                sort=True,
            ).encode()
        ).hexdigest()


@dataclass(frozen=True)
class Study:
    """A study as stored: its row id, its key, when it was first opened (ISO 8601, UTC) and the
    features of its device (`DeviceFeatures.to_json()`; None when nobody stored them)."""

    id: int
    key: StudyKey
    created: str
    device_features: dict | None = None


def plain(value: Any) -> Number:
    """A parameter value as a JSON number: numpy scalars unwrapped, 32.0 the same as 32."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, int | float):
        return value
    raise TypeError(f"parameter values are numbers, not {value!r}")


def dumps(data: Any, *, sort: bool = False) -> str:
    """Compact JSON, keys `sort`ed where it is compared or hashed; never NaN."""
    return json.dumps(data, sort_keys=sort, separators=(",", ":"), allow_nan=False)


def now() -> str:
    """The time a row is stored: ISO 8601, UTC, in milliseconds."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
