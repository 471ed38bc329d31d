"""Reading the files a user names: regular files only, bounded in size, decoded with a location.

Every source, header, config and results file annotune reads comes through here, so that a
hostile path is an AnnotuneError naming the file rather than a hang (a FIFO, which blocks
`open` until a writer comes), exhausted memory (`/dev/zero`, a 10 GiB file, a gzip bomb) or a
traceback (invalid UTF-8). Errors about the file as a whole are located at its 1:1, as a
compiler does, so that an editor jumps to the file.
"""

from __future__ import annotations

import codecs
import gzip
import os
import stat
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from annotune.core.diagnostics import AnnotuneError, Location

MiB = 1 << 20
# O_NONBLOCK: opening a FIFO swapped in after the check returns at once instead of waiting for
# a writer; O_NOCTTY: a terminal device never becomes our controlling terminal.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 * MiB  # what `read_bounded` asks for at once


@dataclass(frozen=True)
class InputKind:
    """What a file is read as, and the most bytes it may hold (decompressed, for results)."""

    name: str
    limit: int


SOURCE = InputKind("source file", 64 * MiB)  # sources and the local headers they include
CONFIG = InputKind("config file", 1 * MiB)  # annotune.toml, pyproject.toml
RESULTS = InputKind("results file", 1024 * MiB)  # Kernel Tuner caches, T4 files (gzip or not)


def read_input(path: Path, kind: InputKind) -> bytes:
    """The bytes of `path`, a regular file of at most `kind.limit` bytes."""
    with _open_regular(path, kind) as file:
        data = read_bounded(file, kind.limit)  # the file may have grown since its stat
    if len(data) > kind.limit:
        raise _too_large(path, kind)
    return data


def read_bounded(file: BinaryIO, limit: int) -> bytes:
    """At most `limit` + 1 bytes of `file` (one more than allowed says it is too large), a
    chunk at a time: `read(limit + 1)` would allocate the whole limit up front, 64 MiB for a
    source of a few lines and 1 GiB for a results file, which a process under `ulimit -v` (a
    login node's, a batch job's) may not have."""
    chunks: list[bytes] = []
    total = 0
    while total <= limit:
        chunk = file.read(min(_CHUNK, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def check_input(path: Path, kind: InputKind) -> os.stat_result:
    """The error `read_input` would raise, without reading the file; else the file's status
    (its owner and mode: those of the file opened, not of a name that may change)."""
    with _open_regular(path, kind) as file:
        return os.fstat(file.fileno())


def read_text(path: Path, kind: InputKind) -> str:
    """`read_input` decoded as UTF-8 (a leading byte order mark dropped); an invalid byte is a
    located error."""
    return decode_utf8(read_input(path, kind).removeprefix(codecs.BOM_UTF8), str(path))


def read_results(path: Path) -> str:
    """A results file's text, gunzipped when it is gzip: the decompressed size is bounded too,
    read a chunk at a time, so a small gzip bomb cannot exhaust memory."""
    where = Location(str(path), 1, 1)
    with _open_regular(path, RESULTS) as file:
        if file.peek(2)[:2] != _GZIP_MAGIC:
            data = read_bounded(file, RESULTS.limit)
        else:
            try:
                with gzip.GzipFile(fileobj=file) as unzipped:
                    data = read_bounded(unzipped, RESULTS.limit)
            except (OSError, EOFError, zlib.error) as error:
                raise AnnotuneError(f"not a readable gzip file: {error}", where) from None
    if len(data) > RESULTS.limit:
        raise _too_large(path, RESULTS)
    return decode_utf8(data.removeprefix(codecs.BOM_UTF8), str(path))


def decode_utf8(data: bytes, file: str) -> str:
    """`data` as text; the first invalid byte is an error at its line and (character) column."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line_start = data.rfind(b"\n", 0, error.start) + 1
        line = data.count(b"\n", 0, error.start) + 1
        column = len(data[line_start : error.start].decode("utf-8")) + 1  # valid: before it
        raise AnnotuneError(
            f"invalid UTF-8 byte 0x{data[error.start]:02x}",
            Location(file, line, column),
            hint="save the file as UTF-8",
        ) from None


def argument_path(path: Path) -> str:
    """`path` as an argument to a tool (libclang, a compiler): one starting with `-` (a file
    named `-x.c`) would be read as an option, so it gets a leading `./`, naming the same file."""
    text = str(path)
    return os.path.join(".", text) if text.startswith("-") else text


def _open_regular(path: Path, kind: InputKind):
    """A buffered reader of `path`, once both its name and the opened file are known to be a
    regular file within `kind`'s limit: stat first (a FIFO is never opened), then fstat what
    was opened (a FIFO swapped in between is refused, not waited on)."""
    where = Location(str(path), 1, 1)
    try:
        _check_status(os.stat(path), path, kind)
        descriptor = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise AnnotuneError("no such file", where) from None
    except OSError as error:
        raise AnnotuneError(f"cannot read: {error.strerror}", where) from None
    except ValueError:  # a NUL byte in the name
        raise AnnotuneError("not a valid file name", where) from None
    try:
        _check_status(os.fstat(descriptor), path, kind)
    except BaseException:
        os.close(descriptor)
        raise
    return os.fdopen(descriptor, "rb")


def _check_status(status: os.stat_result, path: Path, kind: InputKind) -> None:
    where = Location(str(path), 1, 1)
    if not stat.S_ISREG(status.st_mode):
        raise AnnotuneError(f"is {_file_type(status.st_mode)}, not a regular file", where)
    if status.st_size > kind.limit:
        raise _too_large(path, kind, status.st_size)


def _file_type(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "a special file"


def _too_large(path: Path, kind: InputKind, size: int | None = None) -> AnnotuneError:
    found = f"{size:,} bytes, more than" if size is not None else "more than"
    return AnnotuneError(
        f"is too large for a {kind.name}: {found} {kind.limit // MiB} MiB",
        Location(str(path), 1, 1),
    )
