"""What `annotune build` worked out from a source, kept so that the next call on unchanged files
need not parse it again: the defaults header, the stand-in header chosen for a device with
none, and each header text whose values were checked to reach the compiler.

A record holds the digest of every input file it was worked out from (the source, every file
the front end read, every place it looked for a header and found none, each response file of
the compile command, the config and every place a config could be found or its search would
stop, the `--gpus` table), None for a place that held no file, and `OTHER` for one that holds
something else (a directory: the `.git` that ends the search for a config), and is used only
while every one of them still holds the same; otherwise it is worked out again and replaced.
Its name is a hash of the rest of what the result depends on (`build_key`). Records live in
the source's workspace (`results.workspace`), under `build/`, each written atomically, so that
`make -j` runs may race; an unreadable or garbled record is only a miss. A record is
annotune's own file in a directory others may write: read bounded (its size, its nesting, a
regular file only, never through a link) and replaced where it is, never written through what
stands in its place.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from annotune.core.digests import file_digest, text_digest
from annotune.core.files import read_regular, replace_atomically
from annotune.core.inputs import SOURCE
from annotune.results.workspace import workspace

FOLDER = "build"
OTHER = "other"
"""The digest of a place holding no regular file yet something (a directory, a FIFO, a link to
nothing): unlike None, no digest of bytes, and its going is a change as a file's appearing is."""
RECORD_LIMIT = 16 * 2**20
"""The largest record read: far above any real one (the checked notes of a few headers), so
that a record replaced by something huge or sparse is a miss, never read whole."""


@dataclass(frozen=True)
class BuildRecord:
    """`inputs`: path -> digest of its bytes (None: no file there). `stand_in`: the tuned
    header of another device that stands in, and the warning that says so. `defaults`: the
    defaults header. `checked`: digest of a header text -> the note its check said ("": none)."""

    inputs: Mapping[str, str | None]
    stand_in: tuple[str, str] | None = None
    defaults: str | None = None
    checked: Mapping[str, str] = field(default_factory=dict)


def build_key(*parts: object) -> str:
    """The record name of one `annotune build` question: a hash of `parts` (JSON-able)."""
    text = json.dumps(parts, sort_keys=True, default=str)
    return text_digest(text)[:32]


def file_digests(paths: Iterable[str | Path]) -> dict[str, str | None]:
    """The digest of each file's bytes by absolute path; None where nothing is, `OTHER` where
    no regular file can be read (read as every input is, bounded: a FIFO swapped in for a
    header is refused, not waited on)."""
    return {path: _digest(path) for path in map(os.path.abspath, paths)}


def _digest(path: str) -> str | None:
    found = file_digest(path, max_bytes=SOURCE.limit)
    return found if found is not None or not os.path.lexists(path) else OTHER


def record_path(source: Path, key: str) -> Path:
    return workspace(source).directory / FOLDER / f"{key}.json"


def load_record(source: Path, key: str) -> BuildRecord | None:
    """The record of `key` when every input still holds the bytes it was worked out from."""
    text = read_regular(record_path(source, key), limit=RECORD_LIMIT, follow_links=False)
    if text is None or len(text) > RECORD_LIMIT:  # none, a link, a FIFO, a huge file: a miss
        return None
    try:
        data = json.loads(text)
        inputs = {str(k): v for k, v in data["inputs"].items()}
        header, warning = data["stand_in"] or (None, None)
        stand_in = (str(header), str(warning)) if header is not None else None
        record = BuildRecord(inputs, stand_in, data["defaults"], dict(data["checked"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    if file_digests(record.inputs) != record.inputs:
        return None
    return record


def save_record(source: Path, key: str, record: BuildRecord) -> str:
    """Write `record`; "" when done, else why it could not be (the caller says so)."""
    path = record_path(source, key)
    data = {
        "inputs": dict(record.inputs),
        "stand_in": list(record.stand_in) if record.stand_in else None,
        "defaults": record.defaults,
        "checked": dict(record.checked),
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_atomically(path, json.dumps(data, sort_keys=True).encode(), follow_links=False)
    except OSError as error:
        return f"cannot write {path}: {error.strerror or error}"
    return ""
