"""The results database's file on disk, before it is used: a missing one made whole
(`create`), an empty one filled in place (`fill`), what cannot be a whole SQLite database
refused before SQLite opens it (`check_file`), and the connection to it (`connect`)."""

from __future__ import annotations

import os
import secrets
import sqlite3
import stat
from contextlib import suppress
from pathlib import Path

from annotune.core.diagnostics import AnnotuneError
from annotune.core.files import NAME_MAX, bounded_name
from annotune.results.failures import failure, foreign, read_only, reason
from annotune.results.schema import create_tables
from annotune.results.workspace import can_write

BUSY_TIMEOUT_S = 60.0
"""How long a writer waits for another process's transaction before giving up."""

_SQLITE_MAGIC = b"SQLite format 3\x00"


def prepare(path: Path, *, create: bool) -> bool:
    """Make the file at `path` ready to be connected to, and say whether it may be written.

    `create` (a tune): a missing file is made, whole, an empty one filled, and the file must
    be writable. Without it nothing is created. AnnotuneError, before anything is written,
    when the path is no SQLite database or cannot be used."""
    if create and not os.path.lexists(path):
        _create(path)
    new = create and empty(path)  # an empty file given as --db: a new database
    if not new:
        check_file(path)
    writable = can_write(path) and can_write(path.parent)
    if create and not writable:
        raise read_only(path)
    if new:
        _fill(path)
    return writable


def connect(path: Path, writable: bool) -> sqlite3.Connection:
    """Read-write; else read-only, and in a directory that may not be written, `immutable`: a
    WAL database's reader must otherwise make its `-shm` file beside it. A writer waits
    `BUSY_TIMEOUT_S` for another process's transaction."""
    if writable:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    else:
        options = "mode=ro" if can_write(path.parent) else "mode=ro&immutable=1"
        uri = f"{path.absolute().as_uri()}?{options}"
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    except BaseException:
        conn.close()
        raise
    return conn


def empty(path: Path) -> bool:
    """Whether `path` is an empty regular file with no write-ahead log beside it: a new
    database to be (`touch results.db; annotune tune --db results.db`), never a WAL
    database whose pages are all still in its log."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size == 0 and not os.path.lexists(f"{path}-wal")


def check_file(path: Path) -> None:
    """Refuse, before SQLite opens it, what cannot be a whole SQLite database: a directory,
    a FIFO or device (SQLite would block on one, or write a journal beside /dev/null), a file
    that is empty, not SQLite, or shorter than its header says (cut short)."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise AnnotuneError(f"no results database at {path}") from None
    except OSError as error:
        raise AnnotuneError(
            f"{path}: cannot reach the results database ({reason(error)})"
        ) from None
    if stat.S_ISDIR(info.st_mode):
        raise AnnotuneError(
            f"{path} is a directory, not a results database",
            hint="the results database is a file: move the directory aside, or give --db a "
            "file path",
        )
    if not stat.S_ISREG(info.st_mode):
        raise AnnotuneError(
            f"{path} is not a regular file (a FIFO, device or socket), so not a results database",
            hint="--db names a database file, e.g. --db results.db",
        )
    try:
        with path.open("rb") as file:
            head = file.read(100)
    except OSError as error:
        raise AnnotuneError(
            f"{path}: cannot read the results database ({reason(error)})",
            hint=f"check its permissions (ls -l {path}), or use --db for another database",
        ) from None
    if not head:
        raise foreign(path, "an empty file")
    if len(head) < 100 or not head.startswith(_SQLITE_MAGIC):
        raise foreign(path, "not a SQLite file")
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    size_valid = head[24:28] == head[92:96]  # the header's page count is current
    if page_size < 512 or (size_valid and info.st_size < page_size * pages):
        raise foreign(
            path, f"cut short: {info.st_size} bytes of the {page_size * pages} its header declares"
        )


def _create(path: Path) -> None:
    """Make a new database at `path` whole: built under a name of its own, then linked into
    place (which fails if another process made one first: theirs is used). No process ever
    sees a half-made file, so an empty or tableless file is never one of annotune's."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        unique = f".{os.getpid()}.{secrets.token_hex(4)}.new"
        room = NAME_MAX - 1 - len(unique) - len("-journal")  # SQLite's files beside it
        temp = path.with_name(f".{bounded_name(path.name, room)}{unique}")
        try:
            conn = sqlite3.connect(temp, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("BEGIN IMMEDIATE")
                create_tables(conn)
                conn.execute("COMMIT")
            finally:
                conn.close()
            with suppress(FileExistsError):  # another process made it first: theirs is used
                os.link(temp, path)
        finally:
            for leftover in ("", "-wal", "-shm"):
                Path(f"{temp}{leftover}").unlink(missing_ok=True)
    except (OSError, sqlite3.Error) as error:
        raise AnnotuneError(
            f"{path}: cannot create the results database ({reason(error)})",
            hint="pick a writable place with --db",
        ) from None


def _fill(path: Path) -> None:
    """Make the empty file at `path` a new database, in place, under SQLite's write lock: a
    process that filled it first is seen, and then nothing is done."""
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if version == 0 and tables == 0:
                create_tables(conn)
            conn.execute("COMMIT")
        finally:
            conn.close()
    except sqlite3.Error as error:
        raise failure(path, error) from None
