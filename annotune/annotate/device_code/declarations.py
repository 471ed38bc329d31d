"""What is blanked, declaration by declaration, in one pass over the AST: host functions and
friends, namespace-scope variables NVRTC rejects (no memory space, not a constant it accepts),
classes and names that use the standard library, and what only a system header's type
declares (left to `lacking`)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import clang.cindex as ci

from annotune.annotate.device_code.host_library import CUDA_TYPE, names_std
from annotune.annotate.device_code.host_templates import is_host_template
from annotune.annotate.device_code.kinds import (
    ARRAYS,
    CONSTANT_TYPES,
    DEVICE_ATTRS,
    FUNCTIONS,
    MEMORY_SPACES,
    METHODS,
    NAMES,
    RECORDS,
    SCOPES,
    TYPEDEFS,
)
from annotune.annotate.device_code.lacking import lacks_a_type
from annotune.annotate.device_code.records import Span
from annotune.annotate.device_code.walk import Walk, span


def _braced(linkage: ci.Cursor) -> bool:
    """Whether `extern "C"` opens a block (`extern "C" { ... }`) rather than one declaration."""
    tokens = linkage.get_tokens()
    return any(token.spelling == "{" for token in itertools.islice(tokens, 2, 3))


def _is_host_function(cursor: ci.Cursor) -> bool:
    """Neither `__global__` nor `__device__` (`__host__ __device__` is both); a defaulted or
    deleted member is implicitly both."""
    if any(c.kind in DEVICE_ATTRS for c in cursor.get_children()):
        return False
    return not (
        cursor.kind in METHODS and (cursor.is_default_method() or cursor.is_deleted_method())
    )


def _is_host_friend(friend: ci.Cursor) -> bool:
    return any(c.kind in FUNCTIONS and _is_host_function(c) for c in friend.get_children())


def declarations(walk: Walk, cursors: Iterator[ci.Cursor], outer: ci.Cursor | None = None) -> None:
    """Collect the spans among `cursors`; `outer`: a braceless `extern "C"` around them,
    blanked with its one declaration (`extern "C"` before the next one is no C++)."""
    for cursor in cursors:
        key = walk.file(cursor)
        if key is None:
            continue
        kind, blanked = cursor.kind, outer or cursor
        if kind not in SCOPES:
            walk.seen[key].append(span(cursor.extent))
        if kind == ci.CursorKind.LINKAGE_SPEC and not _braced(cursor):
            declarations(walk, cursor.get_children(), outer=cursor)
        elif kind in SCOPES:
            declarations(walk, cursor.get_children())
        elif kind in FUNCTIONS:
            host = _is_host_function(cursor)
            (walk.host_functions if host else walk.device_functions).add(cursor.spelling)
            if host:
                walk.blank(key, blanked)
        elif kind == ci.CursorKind.FRIEND_DECL:
            if _is_host_friend(cursor):
                walk.blank(key, cursor)
        elif kind == ci.CursorKind.VAR_DECL:
            if not _is_device_variable(walk, key, cursor):
                walk.blank(key, blanked, statement=True)
                walk.blanked.add((key, cursor.location.offset))
        elif kind in RECORDS:
            mark = len(walk.found[key])
            if cursor.is_definition():
                declarations(walk, cursor.get_children())
            if names_std(walk, key, cursor, besides=_host_members(walk, key, cursor)):
                del walk.found[key][mark:]
                walk.blank(key, blanked, statement=True)
            elif cursor.is_definition() and lacks_a_type(walk, key, cursor):
                walk.lacking.append((key, cursor, blanked))
        elif (kind in NAMES and names_std(walk, key, cursor)) or (
            kind == ci.CursorKind.UNEXPOSED_DECL and is_host_template(walk, key, cursor)
        ):
            walk.blank(key, blanked, statement=True)
            if kind in NAMES:
                walk.host_names.add(cursor.spelling)
        elif kind in TYPEDEFS and lacks_a_type(walk, key, cursor):
            walk.lacking.append((key, cursor, blanked))


def _is_device_variable(walk: Walk, key: str, cursor: ci.Cursor) -> bool:
    """A variable in a memory space, or a constant NVRTC accepts as it is: of arithmetic,
    enum, const pointer or the user's class type, its type known (an unknown one reads as
    `int`), initialised without a call and from no blanked variable."""
    children = list(cursor.get_children())
    if any(c.kind in MEMORY_SPACES for c in children):
        return True
    if not walk.words(key, cursor).isdisjoint(("__managed__", "__global__")):
        # libclang exposes no attribute for `__managed__`, nor for a kernel it read as a
        # variable (a parameter's type unknown), which stays for NVRTC to say why.
        return True
    if not _is_constant_type(walk, cursor.type):
        return False
    unknown = walk.errors_in(key, cursor.extent.start, cursor.location)
    if any(not CUDA_TYPE.search(e) for e in unknown):
        return False
    for child in children:
        for node in child.walk_preorder():
            if node.kind in (ci.CursorKind.CALL_EXPR, ci.CursorKind.LAMBDA_EXPR):
                return False
            if node.kind == ci.CursorKind.DECL_REF_EXPR and _refers_to_blanked(walk, node):
                return False
    return True


def _is_constant_type(walk: Walk, type_: ci.Type) -> bool:
    type_ = type_.get_canonical()
    const = type_.is_const_qualified()  # libclang puts an array's const on the array
    while type_.kind in ARRAYS:
        type_ = type_.get_array_element_type()
        const = const or type_.is_const_qualified()
    if not const:
        return False
    if type_.kind in CONSTANT_TYPES:
        return True
    if type_.kind != ci.TypeKind.RECORD:
        return False
    declared = type_.get_declaration().location.file
    return declared is not None and walk.key(declared.name) is not None


def _refers_to_blanked(walk: Walk, node: ci.Cursor) -> bool:
    target = node.referenced
    if target is None or target.kind != ci.CursorKind.VAR_DECL or target.location.file is None:
        return False
    key = walk.key(target.location.file.name)
    return (key, target.location.offset) in walk.blanked


def _host_members(walk: Walk, key: str, record: ci.Cursor) -> list[Span]:
    """The spans of the record's members blanked as host code: functions (friends too)
    and static data members, which no field's type or kept member can need."""
    return [
        span(member.extent)
        for member in record.get_children()
        if (member.kind in FUNCTIONS and _is_host_function(member))
        or (member.kind == ci.CursorKind.FRIEND_DECL and _is_host_friend(member))
        or (member.kind == ci.CursorKind.VAR_DECL and (key, member.location.offset) in walk.blanked)
    ]
