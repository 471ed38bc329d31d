"""Classes and typedefs lacking a type only a system header has (`struct timeval`, `pthread_t`):
host code when no code kept names them, kept otherwise (a class's layout is the kernels')."""

from __future__ import annotations

import bisect
from collections.abc import Mapping

import clang.cindex as ci

from annotune.annotate.device_code.host_library import CUDA_TYPE
from annotune.annotate.device_code.kinds import RECORDS
from annotune.annotate.device_code.walk import Walk, line_column


def lacks_a_type(walk: Walk, key: str, cursor: ci.Cursor) -> bool:
    """Whether a class's field, or a typedef, has a type the parse has not: incomplete
    (`struct timeval t;`, the system header unread) or unknown (`pthread_t`), CUDA's own
    aside. Only a named declaration standing alone: a class that a typedef or variable
    declares with it (`typedef struct {...} T;`) has other names, as has such a typedef."""
    if not cursor.spelling.isidentifier():
        return False
    tokens, starts = walk.code(key)
    first = bisect.bisect_left(starts, cursor.extent.start.offset)
    after = bisect.bisect_left(starts, cursor.extent.end.offset)
    if cursor.kind in RECORDS:
        if after == len(tokens) or tokens[after].text != ";":
            return False
        parts = [c.extent for c in cursor.get_children() if c.kind == ci.CursorKind.FIELD_DECL]
    else:
        if any(t.text == "{" for t in tokens[first:after]):
            return False
        parts = [cursor.extent]
    for extent in parts:
        for text in walk.errors_in(key, extent.start, extent.end):
            lacking = text.startswith(("field has incomplete type", "unknown type name"))
            if lacking and not CUDA_TYPE.search(text):
                return True
    return False


def unused_lacking(walk: Walk) -> None:
    """Blank whole the classes and typedefs `lacking` holds that no code NVRTC sees
    names: a class whose field's type only a system header has is host code, as is a
    typedef of such a type, unless something kept (a kernel, a device function, a class
    kept) names it; then it stays, a class's layout being the kernels', and NVRTC says
    what it lacks (the variant goes to nvcc). What only another such declaration names
    goes when that one goes. A name in a branch the front end skipped (`typedef HANDLE
    Thread;` under `#ifdef _WIN32`) is none: a variant taking it finds the class blanked,
    and NVRTC says so."""
    if not walk.lacking:
        return
    names: dict[str, list[tuple[str, int]]] = {}
    for key, source in walk.sources.items():
        for token in walk.code(key)[0]:
            if token.kind == "identifier" and source.is_active(token.start):
                names.setdefault(token.text, []).append((key, token.start))
    pending = list(walk.lacking)
    while True:
        unused = [entry for entry in pending if not _named_outside(walk, names, *entry[:2])]
        if not unused:
            return
        for key, _, blanked in unused:
            walk.blank(key, blanked, statement=True)
        pending = [entry for entry in pending if entry not in unused]


def _named_outside(
    walk, names: Mapping[str, list[tuple[str, int]]], key: str, cursor: ci.Cursor
) -> bool:
    """Whether the declaration's name stands anywhere but in itself and in code blanked."""
    extent = cursor.extent
    for where, offset in names.get(cursor.spelling, ()):
        if where == key and extent.start.offset <= offset < extent.end.offset:
            continue
        at = line_column(walk.sources[where], offset)
        if not any(s[:2] <= at < s[2:] for s in walk.found[where]):
            return True
    return False
