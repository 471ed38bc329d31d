"""Digests of what a result depends on: bytes, text, files. One hash (SHA-256, hex) and one
spelling of "no file there" (None) for every stage, so that a cache entry, a build record, a
shadow manifest and a study key agree on what "unchanged" means.

A file is read as every input is: only a regular file (a FIFO put in a header's place is
"no file", never waited on), streamed (a library of hundreds of MiB is not held in memory),
and, where the caller bounds it, no larger than `max_bytes`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from annotune.core.files import open_regular

_CHUNK = 1 << 20


def bytes_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def text_digest(text: str) -> str:
    """The digest of `text`'s UTF-8 bytes (a name's odd bytes as they were)."""
    return bytes_digest(text.encode("utf-8", "surrogateescape"))


def file_digest(path: str | Path, *, max_bytes: int | None = None) -> str | None:
    """The digest of the file's bytes; None when there is no regular file at `path`, it cannot
    be read, or it holds more than `max_bytes`."""
    found = regular_file_digest(path, max_bytes=max_bytes)
    return None if found is None else found[0].hex()


def regular_file_digest(
    path: str | Path, *, max_bytes: int | None = None
) -> tuple[bytes, os.stat_result] | None:
    """The raw SHA-256 of a regular file's bytes (to feed another hash) and its status when
    opened (which names that content for a memo); None as for `file_digest`."""
    opened = open_regular(path, limit=max_bytes)
    if opened is None:
        return None
    file, info = opened
    with file:
        try:
            h = hashlib.sha256()
            read = 0
            while chunk := file.read(_CHUNK):
                read += len(chunk)
                if max_bytes is not None and read > max_bytes:
                    return None
                h.update(chunk)
        except OSError:
            return None
    return h.digest(), info
