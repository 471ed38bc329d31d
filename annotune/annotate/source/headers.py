"""The headers a source includes: refused before clang opens them when they are no regular file
of a source's size (`check_headers`), and, once it has, the local ones followed through the
translation unit (`collect_local_includes`): quoted, or found in a configured directory; with
them, every place an include of the unit was looked for (`search`)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import clang.cindex as ci

from annotune.annotate.source.arguments import ANNOTUNE_INCLUDE_DIR, SHIM_PATH, TIMING_HEADER
from annotune.annotate.source.records import SourceFile
from annotune.annotate.source.search import SearchPath
from annotune.annotate.source.strings import file_name, spelling
from annotune.core.diagnostics import AnnotuneError
from annotune.core.inputs import SOURCE, read_input

_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*(["<])([^">\r\n]+)[">]', re.MULTILINE)


def check_headers(path: Path, data: bytes, search: SearchPath, forced: list[Path]) -> None:
    """Refuse a header clang would hang on or read without end, before clang opens it: a FIFO
    blocks it forever, `/dev/zero` fills memory, and libclang cannot be told not to open them.

    The `#include` lines of the source, of the `forced` includes and, recursively, of each
    header they find are followed as written (in every `#if` branch, no macro expanded),
    looked up as clang does (`search`: a quoted name beside its includer first). Each
    header found must be a regular file within the size of a source; one not found is clang's
    to report.
    """
    pending = [(path, data), *((header, read_input(header, SOURCE)) for header in forced)]
    seen = {os.path.realpath(path), *(os.path.realpath(header) for header in forced)}
    while pending:
        includer, text = pending.pop()
        for match in _INCLUDE.finditer(text):
            name = os.fsdecode(match.group(2))
            places = search.candidates(str(includer), name, match.group(1) == b'"')
            header = _first_existing([Path(place) for place in places])
            if header is None or os.path.realpath(header) in seen:
                continue
            try:
                contents = read_input(header, SOURCE)
            except AnnotuneError as error:
                where = SourceFile(str(includer), text, []).location(match.start(2))
                raise AnnotuneError(f"header '{name}' {error.message}", where) from None
            seen.add(os.path.realpath(header))
            pending.append((header, contents))


def _first_existing(candidates: list[Path]) -> Path | None:
    """The header clang's lookup stops at: the first candidate that exists and is not a
    directory (a missing one, a loop of links or a NUL byte in the name: clang's to report)."""
    for candidate in candidates:
        try:
            if not stat.S_ISDIR(os.stat(candidate).st_mode):
                return candidate
        except (OSError, ValueError):
            continue
    return None


def collect_local_includes(
    tu: ci.TranslationUnit, display: dict[str, str], user_dirs: list[str], search: SearchPath
) -> tuple[list[tuple[str, int, str, str | None]], bool, list[str]]:
    """Follow `#include "..."` from the main file through local headers, and `#include <...>`
    where it finds a header in one of `user_dirs` (the configured include directories: their
    headers are the project's, however included). Return each inclusion in a user's file (the
    includer's real path, the byte offset of the directive, the name written, the real path
    of the local header or None when a quoted one was not found), whether one of the
    headers is annotune's timing header (then every run must print its time), and every place
    an include of any file of the unit was looked for, up to the header found (`search`).

    The preprocessing record lists inclusions in translation order, and a header's own
    inclusions follow the line that includes it, so one pass reaches every depth.
    """
    timing_header = False
    inclusions: list[tuple[str, int, str, str | None]] = []
    searched: list[str] = []
    for cursor in tu.cursor.get_children():
        if cursor.kind != ci.CursorKind.INCLUSION_DIRECTIVE or cursor.location.file is None:
            continue
        tokens = [spelling(t) for t in cursor.get_tokens()]
        quoted = any(t.startswith('"') for t in tokens)
        try:
            included = cursor.get_included_file()
        except AssertionError:  # libclang returns a null file when the header was not found
            included = None
        named = file_name(cursor.location.file)
        if named != SHIM_PATH:  # `#include HEADER`, a macro: as quoted, the wider search
            angled = len(tokens) > 2 and tokens[2] == "<"
            found = file_name(included) if included is not None else None
            searched += search.looked_at(named, spelling(cursor), not angled, found)
        includer = os.path.realpath(named)
        if includer not in display:
            continue
        offset = cursor.location.offset
        if included is None:
            if quoted:
                inclusions.append((includer, offset, spelling(cursor), None))
            continue
        key = os.path.realpath(file_name(included))
        if Path(key).parent == ANNOTUNE_INCLUDE_DIR:
            timing_header = timing_header or Path(key).name == TIMING_HEADER
            continue
        if key == SHIM_PATH or not (quoted or _inside(key, user_dirs)):
            continue
        if key not in display:
            display[key] = os.path.normpath(file_name(included))
        inclusions.append((includer, offset, spelling(cursor), key))
    return inclusions, timing_header, list(dict.fromkeys(searched))


def _inside(path: str, directories: list[str]) -> bool:
    return any(os.path.commonpath([path, d]) == d for d in directories)
