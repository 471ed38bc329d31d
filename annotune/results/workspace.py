"""Where a source's own files go: `.annotune` beside it, or a directory of the user's cache when
that is read-only. Kept apart from the database (and free of numpy and the front end) so that
`annotune build`'s cache can find it at the cost of a few `stat` calls."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from annotune.core.files import NAME_MAX, bounded_name

DB_NAME = "results.db"
WORKSPACE_NAME = ".annotune"


@dataclass(frozen=True)
class Workspace:
    """Where a source's results database and compile cache live: `.annotune` beside it, or,
    when that is read-only, a directory of the user's cache (`read_only` names the place it
    replaces, so that the tune can say where its results went)."""

    directory: Path
    read_only: Path | None = None

    @property
    def db_path(self) -> Path:
        return self.directory / DB_NAME

    @property
    def cache_dir(self) -> Path:
        return self.directory / "cache"

    @property
    def warning(self) -> str:
        """What a tune reports when its files do not go beside the source; "" when they do."""
        if self.read_only is None:
            return ""
        return (
            f"{self.read_only} is read-only: annotune keeps this source's files in {self.directory}"
        )


def workspace(source: Path) -> Workspace:
    """The `.annotune` directory of `source`: beside it when it can be written there (it, and
    its cache, when they exist, else the directory that would hold it), else one in the user's
    cache directory named by a hash of the source directory's absolute path, stable across
    runs."""
    local = source.parent / WORKSPACE_NAME
    places = [place for place in (local, local / "cache") if place.exists()] or [local]
    blocking = next((_nearest(place) for place in places if not can_write(place)), None)
    if blocking is None:
        return Workspace(local)
    directory = source.parent.resolve()
    digest = hashlib.sha256(str(directory).encode()).hexdigest()[:16]
    name = f"{bounded_name(directory.name, NAME_MAX - 1 - len(digest))}-{digest}"
    cached = platformdirs.user_cache_path("annotune") / "sources" / name
    return Workspace(cached, read_only=blocking)


def default_db_path(source: Path) -> Path:
    """The results database of `source`: its `workspace`'s. When that is in the user's cache
    and has no database yet, one beside the read-only source (shipped with it) is read."""
    place = workspace(source)
    beside = source.parent / WORKSPACE_NAME / DB_NAME
    if place.read_only is not None and not place.db_path.exists() and beside.is_file():
        return beside
    return place.db_path


def can_write(path: Path) -> bool:
    """Whether files can be made in the directory `path` (or changed, if it is a file), or,
    when it does not exist yet, in the directory that would hold it. Permission bits as the
    OS applies them: root may write where the bits say no."""
    path = _nearest(path)
    return os.access(path, os.W_OK | (os.X_OK if path.is_dir() else 0))


def _nearest(path: Path) -> Path:
    """`path`, or the nearest of its parents that exists."""
    while not os.path.lexists(path) and path != path.parent:
        path = path.parent
    return path
