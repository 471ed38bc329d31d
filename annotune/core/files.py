"""Writing the user's files safely: never a half-written file, whoever reads it and when; never
a hang or an endless read on a path that is not a regular file; and, asked before any work,
whether a path can be written at all, so that a long run does not end with its output lost."""

from __future__ import annotations

import errno
import hashlib
import io
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from annotune.core.diagnostics import AnnotuneError
from annotune.core.inputs import read_bounded

NAME_MAX = 255
"""The most bytes one file name may have (ext4, XFS, APFS, NTFS in UTF-16 units)."""


def bounded_name(name: str, limit: int = NAME_MAX) -> str:
    """`name` as it is when its UTF-8 encoding has at most `limit` bytes; else as many of its
    first characters as leave room for '-' and 16 hex digits of a hash of the whole name, so that
    a long name (a 5,000-character device) still makes a file name, and two long names that
    share their beginning make two. Every file name annotune makes from user text goes through
    here: a short name, hence every name made before there was a bound, is unchanged."""
    data = name.encode("utf-8", "surrogateescape")
    if len(data) <= limit:
        return name
    digest = hashlib.sha256(data).hexdigest()[:16]
    head = data[: max(0, limit - len(digest) - 1)].decode("utf-8", "ignore")
    return f"{head}-{digest}"


def write_file(path: Path, data: bytes) -> None:
    """`replace_atomically`, with every failure (no space left, a read-only or missing
    directory, a directory in the way) an AnnotuneError naming `path`: for what a command
    writes where the user says (`--plot`), so that a failed write is an error, never exit 0."""
    try:
        replace_atomically(path, data)
    except OSError as error:
        reason = why_not_writable(path) or error.strerror or str(error)
        raise AnnotuneError(f"cannot write {path}: {reason}") from None


def replace_atomically(path: Path, data: bytes, *, follow_links: bool = True) -> None:
    """Write `data` to a temporary file unique to this call beside `path`, then rename it over
    `path`: readers see the old file or the new one, even with many writers (`make -j`). On any
    error (no space left, I/O error, read-only) the old file stays as it was and OSError says why.

    The new file keeps the old one's permissions, else gets what `open()` would give (0666
    less the umask): mkstemp alone would leave it readable by its owner only.

    A symbolic link stays a link: the file it names is replaced (so `-o /dev/stdout` redirected
    into a file replaces that file, not /dev/stdout). A `path` that leads to no regular file (a
    device such as /dev/full, a terminal, a pipe or FIFO) is written in place instead: renaming
    over it would replace the device node itself, and the bytes were meant for what it leads to.

    `follow_links=False`, for annotune's own files (a workspace a link or FIFO may have been
    put into): whatever is at `path` is replaced where it is, never written through.
    """
    if not follow_links:
        mode = 0o666 & ~_umask()
    elif _is_special(path):
        _write_in_place(path, data)
        return
    else:
        path = Path(os.path.realpath(path))
        mode = _file_mode(path)
    prefix = f".{bounded_name(path.name, NAME_MAX - 20)}."  # mkstemp adds 8 characters, and .tmp
    fd, temp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def save_figure(figure: Any, path: str | Path, *, dpi: int) -> None:
    """Write a matplotlib figure to `path` (`write_file`), in the format its suffix names, PNG
    when it names none matplotlib knows. Rendered in memory first: matplotlib's own `savefig`
    to a path reports no error when the write fails (a full disk, /dev/full)."""
    buffer = io.BytesIO()
    kind = Path(path).suffix[1:].lower()
    known = kind in figure.canvas.get_supported_filetypes()
    figure.savefig(buffer, dpi=dpi, format=kind if known else "png")
    write_file(Path(path), buffer.getvalue())


def same_content(path: Path, data: bytes) -> bool:
    """Whether `path` is a regular file holding exactly `data`.

    Only a regular file of exactly `len(data)` bytes is read, and no further than that: a
    device (/dev/zero, /dev/full) reads without end, a FIFO blocks, and a large unrelated file
    would be read whole just to learn that it differs.
    """
    return read_regular(path, limit=len(data)) == data


def read_regular(
    path: Path, *, limit: int | None = None, follow_links: bool = True
) -> bytes | None:
    """The bytes of `path` when it is a regular file (of at most `limit` bytes, if given; not
    a symbolic link unless `follow_links`); None for anything else, or when it cannot be read.
    Never blocks on a FIFO (opened without waiting for a writer) nor reads a device without
    end."""
    opened = open_regular(path, limit=limit, follow_links=follow_links)
    if opened is None:
        return None
    with opened[0] as file:
        try:
            return file.read() if limit is None else read_bounded(file, limit)
        except OSError:
            return None


def open_regular(
    path: str | Path, *, limit: int | None = None, follow_links: bool = True
) -> tuple[io.BufferedReader, os.stat_result] | None:
    """`path` opened for reading, with its status, when it is a regular file of at most
    `limit` bytes; None for anything else (missing, unreadable, a directory, a FIFO, a device,
    a NUL in the name): the one way every bounded read opens a file."""
    try:
        flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow_links else os.O_NOFOLLOW)
        fd = os.open(path, flags)
    except (OSError, ValueError):
        return None
    try:
        info = os.fstat(fd)
    except OSError:
        os.close(fd)
        return None
    if not stat.S_ISREG(info.st_mode) or (limit is not None and info.st_size > limit):
        os.close(fd)
        return None
    return os.fdopen(fd, "rb"), info


def why_not_writable(path: Path, *, directory: bool = False) -> str | None:
    """Why a file (or, with `directory`, a directory to write files in) cannot be made at
    `path`, or None when it can: "is a directory", "a/b is not a directory", "permission
    denied", "read-only file system". Missing directories count as ones to be created, so the
    nearest existing one above must be writable. Cheap (a few system calls, nothing written):
    `annotune build` asks on every `make`."""
    try:
        info = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return _why_not_creatable(path.parent if not directory else path)
    except OSError as error:
        return error.strerror.lower()
    if directory:
        if not stat.S_ISDIR(info.st_mode):
            return "is not a directory"
        return _why_not_writable_dir(path)
    if stat.S_ISDIR(info.st_mode):
        return "is a directory"
    if stat.S_ISREG(info.st_mode):  # replaced by a rename in its (the link's target's) directory
        return _why_not_writable_dir(Path(os.path.realpath(path)).parent)
    return None if os.access(path, os.W_OK) else _denied(path)


def _why_not_creatable(directory: Path) -> str | None:
    """Why `directory` and the missing ones above it cannot be created, or None."""
    for ancestor in (directory, *directory.parents):
        try:
            info = ancestor.stat()
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as error:
            return f"{ancestor}: {error.strerror.lower()}"
        if not stat.S_ISDIR(info.st_mode):
            return f"{ancestor} is not a directory"
        reason = _why_not_writable_dir(ancestor)
        return None if reason is None else f"{ancestor}: {reason}"
    return None


def _why_not_writable_dir(directory: Path) -> str | None:
    if os.access(directory, os.W_OK | os.X_OK):
        return None
    return _denied(directory)


def _denied(path: Path) -> str:
    """What `access()` refusing to write means: a read-only mount, else permissions."""
    try:
        read_only = bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    return "read-only file system" if read_only else "permission denied"


def _is_special(path: Path) -> bool:
    try:
        return not stat.S_ISREG(path.stat().st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False


def _write_in_place(path: Path, data: bytes) -> None:
    """Write `data` into an existing device or FIFO, never waiting for a reader that may not
    come: opening a FIFO nobody reads is an error (ENXIO) instead of a hang."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as error:
        if error.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, "nothing reads from it (a FIFO with no reader)") from None
        raise
    with os.fdopen(fd, "wb") as file:
        os.set_blocking(fd, True)
        file.write(data)


def _file_mode(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        return 0o666 & ~_umask()


def _umask() -> int:
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def same_file(first: Path, second: Path) -> bool:
    """Whether two paths name one file: the same file where both exist (hard links, symbolic
    links, `..` alike), else the same real path (one that does not exist yet)."""
    try:
        return os.path.samefile(first, second)
    except OSError:
        return os.path.realpath(first) == os.path.realpath(second)


def refuse_overwrite(output: Path, option: str, inputs: dict[str, Path | None]) -> None:
    """AnnotuneError when `output` (written by `option`) is one of the command's `inputs`
    (by what each is): annotune never writes over a file it reads, or another output of its
    own. A device such as /dev/stdout is no input, and may be written."""
    try:
        if not stat.S_ISREG(os.stat(output).st_mode):
            return
    except OSError:
        pass  # no file there yet: it may still be an input's path (an output of the command)
    for what, path in inputs.items():
        if path is not None and same_file(output, path):
            raise AnnotuneError(
                f"{option} {output} is {what}: annotune writes no output over a file it "
                "reads, nor over another of its outputs",
                hint="write it somewhere else",
            )
