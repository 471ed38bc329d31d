"""The CUDA re-parse: the main file parsed again as CUDA with its AST kept, for the kernels'
signatures and the device code NVRTC may see.

The kernel's parameter types and mangled name come from libclang. The front end's parse does
not keep its AST, so the main file is parsed again here with a shim that also declares what
kernel signatures use from headers that are not installed (`size_t`, `int64_t`, `__half`):
without them libclang would read such a parameter as `int`, and the mangled name and the
generated inputs would be wrong."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

import clang.cindex as ci

from annotune.annotate.source import (
    CUDA_SHIM,
    KEEP_GOING,
    SHIM_PATH,
    ParsedSource,
    clang_args,
    file_name,
)
from annotune.core.diagnostics import AnnotuneError, Location

# What kernel signatures commonly take from headers that -nostdinc leaves out.
SIGNATURE_SHIM = """
typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;
typedef __INT8_TYPE__ int8_t;
typedef __INT16_TYPE__ int16_t;
typedef __INT32_TYPE__ int32_t;
typedef __INT64_TYPE__ int64_t;
typedef __UINT8_TYPE__ uint8_t;
typedef __UINT16_TYPE__ uint16_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __UINT64_TYPE__ uint64_t;
namespace std {
using ::size_t; using ::ptrdiff_t; using ::int8_t; using ::int16_t; using ::int32_t;
using ::int64_t; using ::uint8_t; using ::uint16_t; using ::uint32_t; using ::uint64_t;
}
struct __half { unsigned short __x; };
typedef unsigned long long cudaTextureObject_t;
typedef unsigned long long cudaSurfaceObject_t;
typedef struct __half half;
""" + "".join(
    f"struct __attribute__((aligned({align}))) {name}{n} {{ {base} {', '.join('xyzw'[:n])}; }};\n"
    for name, base, size in (
        ("char", "signed char", 1),
        ("uchar", "unsigned char", 1),
        ("short", "short", 2),
        ("ushort", "unsigned short", 2),
        ("int", "int", 4),
        ("uint", "unsigned", 4),
        ("long", "long", 8),
        ("ulong", "unsigned long", 8),
        ("longlong", "long long", 8),
        ("ulonglong", "unsigned long long", 8),
        ("float", "float", 4),
        ("double", "double", 8),
    )  # fmt: skip
    for n in (1, 2, 3, 4)
    for align in (size if n == 3 else min(size * n, 16),)
)
"""CUDA's vector types (`float4`, `double2`, `uchar3`, ...), as vector_types.h declares them:
the lanes x..w of one base type, aligned to their size up to 16 (a 3-vector to its base)."""


def parse_cuda(
    parsed: ParsedSource, include_dirs: Iterable[str] = (), defines: Iterable[str] = ()
) -> ci.TranslationUnit:
    """The main file parsed again as CUDA, its AST kept, with the signature shim.

    The kernels' signatures are read from it here, and the device code NVRTC may see
    (`annotate.device_code`): a caller that needs both parses once and passes it to each.
    `include_dirs` and `defines` must be those the front end parsed with.
    """
    return ci.Index.create().parse(
        os.fsencode(parsed.main.path),  # bytes: a name need not be UTF-8 (`k\xff.cu`)
        args=[os.fsencode(a) for a in cuda_args(include_dirs, defines)],
        unsaved_files=[(SHIM_PATH, CUDA_SHIM + SIGNATURE_SHIM)],
        options=ci.TranslationUnit.PARSE_INCOMPLETE | KEEP_GOING,
    )


def cuda_args(include_dirs: Iterable[str], defines: Iterable[str]) -> list[str]:
    """libclang's arguments for the CUDA parse, with no limit on errors: missing system headers
    spend clang's default 20 at the top of a file, and an error after those is what tells the
    slice that a declaration names a type only the host has (`std::vector`)."""
    return [*clang_args("cuda", list(include_dirs), list(defines)), "-ferror-limit=0"]


def kernel_definitions(tu: ci.TranslationUnit, parsed: ParsedSource) -> dict[str, list[ci.Cursor]]:
    """`__global__` definitions (templates included) in the user's files, by name."""
    user_files = {os.path.realpath(f.path) for f in parsed.files}
    found: dict[str, list[ci.Cursor]] = {}
    stack = list(tu.cursor.get_children())
    while stack:
        cursor = stack.pop()
        if cursor.location.file is None:
            continue
        if os.path.realpath(file_name(cursor.location.file)) not in user_files:
            continue
        if cursor.kind in (ci.CursorKind.NAMESPACE, ci.CursorKind.LINKAGE_SPEC):
            stack.extend(cursor.get_children())
        elif (
            cursor.kind in (ci.CursorKind.FUNCTION_DECL, ci.CursorKind.FUNCTION_TEMPLATE)
            and cursor.is_definition()
            and any(c.kind == ci.CursorKind.CUDAGLOBAL_ATTR for c in cursor.get_children())
        ):
            found.setdefault(cursor.spelling, []).append(cursor)
    return found


def kernel_cursor(
    name: str, where: Location, kernels: Mapping[str, list[ci.Cursor]], parsed: ParsedSource
) -> ci.Cursor:
    candidates = kernels.get(name, [])
    if not candidates:
        if any(f.name == name for f in parsed.functions):
            raise AnnotuneError(f"'{name}' is not a __global__ function", where)
        known = ", ".join(sorted(kernels)) or "none"
        raise AnnotuneError(
            f"unknown kernel '{name}'", where, hint=f"kernels defined in these files: {known}"
        )
    if len(candidates) > 1:
        raise AnnotuneError(f"kernel '{name}' is overloaded: annotune needs one definition", where)
    return candidates[0]


def namespace_scope(cursor: ci.Cursor) -> str:
    """The named namespaces around a kernel, as a qualifier: "ns::inner::" ("" for none; an
    anonymous namespace's names are reachable from its file without one)."""
    names = []
    parent = cursor.semantic_parent
    while parent is not None and parent.kind != ci.CursorKind.TRANSLATION_UNIT:
        if parent.kind == ci.CursorKind.NAMESPACE and parent.spelling:
            names.append(parent.spelling)
        parent = parent.semantic_parent
    return "".join(f"{name}::" for name in reversed(names))
