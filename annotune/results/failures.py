"""What the results database says when its file cannot be used: each failure an AnnotuneError
with the path and what to do, and SQLite's own failures of the file said the same way
(`reported`). Nothing here touches the file."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

from annotune import __version__
from annotune.core.diagnostics import AnnotuneError
from annotune.results.schema import SCHEMA_VERSION
from annotune.results.workspace import can_write

_P = ParamSpec("_P")
_T = TypeVar("_T")


def reported(method: Callable[_P, _T]) -> Callable[_P, _T]:
    """SQLite's failures of the file (locked, read-only, corrupt, disk full) as AnnotuneError
    with the path and what to do; misuse of SQL (a bug in annotune) stays an exception."""

    @functools.wraps(method)
    def reporting(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return method(*args, **kwargs)
        except (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError):
            raise
        except sqlite3.DatabaseError as error:
            raise failure(args[0].path, error) from None  # type: ignore[attr-defined]

    return reporting


def foreign(path: Path, why: str) -> AnnotuneError:
    return AnnotuneError(f"{path}: not an annotune results database ({why})", hint=aside(path))


def aside(path: Path) -> str:
    return (
        f"nothing in it was changed; move it aside and run again (mv {path} {path}.broken), "
        "or use --db for another database"
    )


def newer(path: Path, version: int, written_by: str) -> AnnotuneError:
    by = written_by or "a newer annotune"
    return AnnotuneError(
        f"{path}: written by {by} (schema version {version}); this annotune {__version__} "
        f"reads schema version {SCHEMA_VERSION}",
        hint="upgrade annotune to read it, or use --db for another database; nothing in it "
        "was changed",
    )


def read_only(path: Path) -> AnnotuneError:
    where = path if not can_write(path) else path.parent
    return AnnotuneError(
        f"{path}: the results database cannot be written ({where} is read-only)",
        hint=f"make it writable (chmod u+w {where}), or use --db for a database elsewhere",
    )


def failure(path: Path, error: sqlite3.Error) -> AnnotuneError:
    """SQLite's error about the file at `path`, said as what happened and what to do."""
    name = getattr(error, "sqlite_errorname", "")
    text = str(error)
    if name in ("SQLITE_BUSY", "SQLITE_LOCKED") or "locked" in text:
        return AnnotuneError(
            f"{path}: the results database is locked: another annotune (or another program) "
            f"holds it ({text})",
            hint="wait for it to finish and run again, or use --db for another database",
        )
    if name.startswith("SQLITE_READONLY") or "readonly" in text:
        return read_only(path)
    if name == "SQLITE_FULL" or "full" in text:
        return AnnotuneError(
            f"{path}: the disk is full ({text}); every measurement committed so far is kept",
            hint="free some space and run again: the tune resumes",
        )
    if isinstance(error, sqlite3.OperationalError) and name not in (
        "SQLITE_CORRUPT",
        "SQLITE_NOTADB",
    ):
        return AnnotuneError(
            f"{path}: cannot use the results database ({text})",
            hint="check the file and the disk it is on, or use --db for another database",
        )
    return foreign(path, text)


def reason(error: BaseException) -> str:
    return getattr(error, "strerror", None) or str(error)
