"""`parse_source`: a source read as its compile command has the compiler read it, parsed by
libclang in a bounded child (`bounded`), and what the front end takes from the translation
unit: the user's files (`lexing`), their local headers (`headers`), their function
definitions, to say in which function (or kernel) a parameter is used, and every place the
preprocessor looked for a file (`search`). File names pass through as bytes (`os.fsencode`),
UTF-8 or not."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path

import clang.cindex as ci

from annotune.annotate.source.arguments import (
    ANNOTUNE_INCLUDE_DIR,
    CUDA_SHIM,
    SHIM_PATH,
    clang_args,
    language_of,
)
from annotune.annotate.source.bounded import bounded
from annotune.annotate.source.headers import check_headers, collect_local_includes
from annotune.annotate.source.lexing import expansions, load_file
from annotune.annotate.source.records import FunctionDef, ParsedSource
from annotune.annotate.source.search import SearchPath, has_includes, search_path
from annotune.annotate.source.strings import file_name
from annotune.core.diagnostics import Location
from annotune.core.inputs import SOURCE, argument_path, check_input, read_input

_FORCED = ("-include", "-imacros")  # compile-command options naming a file, not a directory

# CXTranslationUnit_KeepGoing: keep parsing after a fatal error such as a missing header.
KEEP_GOING = 0x200
_PARSE_OPTIONS = (
    ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD
    | ci.TranslationUnit.PARSE_INCOMPLETE
    | KEEP_GOING
)


def check_readable(path: Path) -> None:
    """A located error for a path that is missing, unreadable, not a regular file (a
    directory, a FIFO, a device) or too large to be a source."""
    check_input(path, SOURCE)


def parse_source(
    path: Path,
    *,
    include_dirs: list[str] | None = None,
    defines: list[str] | None = None,
    language: str | None = None,
    flags: Sequence[tuple[str, str]] = (),
) -> ParsedSource:
    """Parse `path` and collect its own and its local headers' tokens and directives.

    As the compiler reads it: in `language` (by default the extension's), with `include_dirs`
    (their headers are the project's, however included), `defines` and `flags` (`clang_args`).
    """
    data = read_input(path, SOURCE)
    language = language or language_of(path)
    search = search_path(include_dirs or [], flags, language, str(ANNOTUNE_INCLUDE_DIR))
    forced = [Path(p) for option, p in flags if option in _FORCED]
    check_headers(path, data, search, forced)
    args = clang_args(language, include_dirs or [], defines or [], flags)
    parsed = bounded(
        functools.partial(_parse, path, data, args, include_dirs or [], language, search),
        Location(str(path), 1, 1),
    )
    parsed.searched = list(dict.fromkeys([*map(os.path.abspath, forced), *parsed.searched]))
    return parsed


def _parse(
    path: Path,
    data: bytes,
    args: list[str],
    include_dirs: list[str],
    language: str,
    search: SearchPath,
) -> ParsedSource:
    """libclang's translation unit of `path` (whose bytes are `data`), and what the front end
    takes from it (`parse_source`); run in a child process (`bounded`)."""
    index = ci.Index.create()
    # The bytes just read, not the file again: what the front end saw is what it reports on.
    name = argument_path(path)  # `-x.c` is no option
    # Bytes, not text: a name that is not UTF-8 (`k\xff.c`, legal on Linux) is passed as it is.
    unsaved = [(SHIM_PATH, CUDA_SHIM), (os.fsencode(name), data)]
    arguments = [os.fsencode(arg) for arg in args]
    try:
        tu = index.parse(
            os.fsencode(name), args=arguments, unsaved_files=unsaved, options=_PARSE_OPTIONS
        )
    except ci.TranslationUnitLoadError:  # libclang's own answer to running out of memory:
        # said by the parent, which knows the limits it inherited (this child lowered its own)
        raise MemoryError from None

    display = {os.path.realpath(str(path)): str(path)}
    user_dirs = [os.path.realpath(d) for d in include_dirs]
    inclusions, timing_header, searched = collect_local_includes(tu, display, user_dirs, search)

    expanded = expansions(tu, display)
    main = next(iter(display))
    loaded = {
        key: load_file(tu, key, shown, data if key == main else None, expanded[key])
        for key, shown in display.items()
    }
    missing: list[tuple[Location, str]] = []
    includes: dict[tuple[str, int], str] = {}
    for includer, offset, written, header in inclusions:
        where = loaded[includer].location(offset)  # the lines and columns of our Locations
        if header is None:
            missing.append((where, written))
        else:
            includes[(where.file, where.line)] = display[header]
    files = list(loaded.values())
    for file in files:  # `__has_include`: a lookup without an #include
        for quoted, header in has_includes(file.data):
            searched += search.candidates(file.path, header, quoted)
    functions = _functions(tu, display)
    return ParsedSource(
        files[0],
        files,
        functions,
        missing,
        language,
        includes,
        timing_header=timing_header,
        searched=list(dict.fromkeys(searched)),
    )


def _functions(tu: ci.TranslationUnit, display: dict[str, str]) -> list[FunctionDef]:
    kinds = {
        ci.CursorKind.FUNCTION_DECL,
        ci.CursorKind.CXX_METHOD,
        ci.CursorKind.FUNCTION_TEMPLATE,
        ci.CursorKind.CONSTRUCTOR,
    }
    found: list[FunctionDef] = []
    stack = list(tu.cursor.get_children())
    while stack:
        cursor = stack.pop()
        location = cursor.location
        if location.file is None:
            continue
        key = os.path.realpath(file_name(location.file))
        if key not in display:
            continue
        if cursor.kind in kinds and cursor.is_definition():
            attributes = {c.kind for c in cursor.get_children()}
            found.append(
                FunctionDef(
                    display[key],
                    cursor.spelling,
                    cursor.extent.start.offset,
                    cursor.extent.end.offset,
                    ci.CursorKind.CUDAGLOBAL_ATTR in attributes,
                    ci.CursorKind.CUDADEVICE_ATTR in attributes,
                )
            )
        elif cursor.kind in (
            ci.CursorKind.NAMESPACE,
            ci.CursorKind.LINKAGE_SPEC,
        ) or cursor.kind in (ci.CursorKind.STRUCT_DECL, ci.CursorKind.CLASS_DECL):
            stack.extend(cursor.get_children())
    return found
