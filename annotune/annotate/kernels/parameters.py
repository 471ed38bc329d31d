"""A kernel's parameters typed: what each argument item says for the parameter libclang declares
(a pointer takes `in(COUNT)`, `out(COUNT)` or `inout(COUNT)`; a scalar its value), the numpy
dtype of its data, and the kernel's symbol in the cubin.

For a pointer parameter, `in(E)` is random input, `out(E)` an output compared with the default
configuration's, `inout(E)` both, E being the element count."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

import clang.cindex as ci

from annotune.annotate.grammar.kernel_clauses import LocatedText, split_items
from annotune.annotate.grammar.kernel_items import Names, item_expression, parse_fill
from annotune.annotate.kernels.records import KernelArg
from annotune.annotate.kernels.struct_types import KIND_DTYPES, struct_dtype
from annotune.annotate.source import file_name
from annotune.core.diagnostics import AnnotuneError, Location

RECORD_DTYPES = {"__half": "float16"}
_VECTOR = re.compile(r"(u?char|u?short|u?int|u?long|u?longlong|float|double)([1-4])")
_LANES = {
    "char": "int8", "uchar": "uint8", "short": "int16", "ushort": "uint16", "int": "int32",
    "uint": "uint32", "long": "int64", "ulong": "uint64", "longlong": "int64",
    "ulonglong": "uint64", "float": "float32", "double": "float64",
}  # fmt: skip
"""A CUDA vector type's lanes: `float4` is 4 float32, a numpy subarray dtype "(4,)float32",
whose arrays are (count, 4): each lane filled and compared as an element is."""
SUPPORTED = (
    "float, double, __half, bool, char, short, int, long, long long and unsigned, and arrays "
    "of CUDA's vector types (float4, int2, ...) and of structs of numbers"
)

ARRAY_KINDS = (ci.TypeKind.CONSTANTARRAY, ci.TypeKind.INCOMPLETEARRAY)

_STUB = "__device_stub__"

_POINTER_ARG = re.compile(r"\s*(in|out|inout)\s*\(")


def kernel_argument(
    text: LocatedText,
    item: str,
    offset: int,
    param: ci.Cursor,
    ptype: ci.Type,  # the parameter's type: an instance's, T substituted, for a template
    names: Names,
    diagnostics: list[tuple[int, str]],
    hint: str,
) -> KernelArg:
    at = text.location(offset + len(item) - len(item.lstrip()))
    ctype = ptype.spelling
    for error_at, message in diagnostics:
        if param.extent.start.offset <= error_at < param.extent.end.offset:
            raise AnnotuneError(
                f"cannot tell the type of parameter '{param.spelling}': {message}", at, hint=hint
            )
    kind_match = _POINTER_ARG.match(item)
    canonical = ptype.get_canonical()
    if canonical.kind == ci.TypeKind.POINTER or canonical.kind in ARRAY_KINDS:
        pointee = _element(canonical)
        const = _is_const(pointee) or canonical.kind in ARRAY_KINDS and _is_const(canonical)
        if kind_match is None:
            raise AnnotuneError(
                f"'{param.spelling}' is a pointer ({ctype}): pass in(COUNT), out(COUNT) or "
                "inout(COUNT)",
                at,
                hint=hint,
            )
        kind = kind_match.group(1)
        parts, after = split_items(text, offset + kind_match.end() - 1)
        rest = text.text[after : offset + len(item)]
        if rest.strip():
            skipped = len(rest) - len(rest.lstrip())
            raise AnnotuneError(
                f"unexpected text after {kind}(...)", text.location(after + skipped), hint=hint
            )
        if not parts or len(parts) > 2:
            raise AnnotuneError(
                f"{kind}(...) takes the element count and, for an input, how it is filled",
                at,
                hint=hint,
            )
        dtype = _dtype(pointee, param, at, hint, lanes=True)
        if kind != "in" and const:
            raise AnnotuneError(
                f"'{param.spelling}' points to const ({ctype}): it can only be in(...)",
                at,
                hint=hint,
            )
        _, count_text, count_at = parts[0]
        expr = item_expression(text, count_text, count_at, names)
        fill = parse_fill(text, *parts[1][1:], kind, names) if len(parts) == 2 else None
        return KernelArg(param.spelling, kind, dtype, ctype, expr, at, const=const, fill=fill)
    if kind_match is not None:
        raise AnnotuneError(
            f"'{param.spelling}' is a scalar ({ctype}): give its value, not {kind_match.group(1)}"
            "(...)",
            at,
            hint=hint,
        )
    dtype = _dtype(ptype.get_canonical(), param, at, hint)
    return KernelArg(
        param.spelling, "scalar", dtype, ctype, item_expression(text, item, offset, names), at
    )


def _element(pointer: ci.Type) -> ci.Type:
    """What a pointer parameter points to; an array parameter (`double c[][NY][NX]`, a
    pointer to planes once it decays) to its element arrays."""
    if pointer.kind == ci.TypeKind.POINTER:
        return pointer.get_pointee()
    return pointer.get_array_element_type()


def _is_const(pointee: ci.Type) -> bool:
    """Whether the data are const: libclang puts an array parameter's const on the array
    (`const double[][4][8]`, its elements `double[4][8]`), a pointee's on any level."""
    while True:
        if pointee.is_const_qualified():
            return True
        if pointee.get_canonical().kind not in ARRAY_KINDS:
            return False
        pointee = pointee.get_canonical().get_array_element_type()


def _dtype(
    ctype: ci.Type, param: ci.Cursor, at: Location, hint: str, *, lanes: bool = False
) -> str:
    """The numpy dtype of a value of `ctype`; of an array's elements (the count an argument
    gives counts them, not the arrays). `lanes`: an array's elements may be a vector type
    (a value may not: one number cannot say its lanes)."""
    canonical = ctype.get_canonical()
    while canonical.kind in ARRAY_KINDS:
        canonical = canonical.get_array_element_type().get_canonical()
    if canonical.kind in KIND_DTYPES:
        return KIND_DTYPES[canonical.kind]
    if canonical.kind == ci.TypeKind.RECORD:
        record = canonical.get_declaration().spelling
        if record in RECORD_DTYPES:
            return RECORD_DTYPES[record]
        vector = _VECTOR.fullmatch(record)
        if vector is not None and lanes:
            return f"({vector.group(2)},){_LANES[vector.group(1)]}"
        layout = struct_dtype(canonical) if lanes else None
        if layout is not None:
            return layout
    raise AnnotuneError(
        f"parameter '{param.spelling}' has type '{param.type.spelling}', for which annotune cannot "
        f"make data (supported: pointers to and values of {SUPPORTED})",
        at,
        hint=hint,
    )


def declared_at(param: ci.Cursor, shown: Mapping[str, str]) -> str:
    """A hint pointing at the parameter's declaration, named as the user's files are."""
    location = param.location
    name = os.path.realpath(location.file.name)
    return f"'{param.spelling}' is declared at {shown.get(name, name)}:{location.line}:" + str(
        location.column
    )


def device_mangled_name(cursor: ci.Cursor) -> str:
    """The kernel's symbol in the cubin.

    Parsed host-side, libclang mangles the host stub (`_Z21__device_stub__jacobiPf`); the device
    symbol is the same with the stub's prefix gone (`_Z6jacobiPf`). `extern "C"` names are
    unmangled either way.
    """
    mangled, name = cursor.mangled_name, cursor.spelling
    stub = f"{len(_STUB) + len(name)}{_STUB}{name}"
    return mangled.replace(stub, f"{len(name)}{name}", 1)


def error_diagnostics(cursor: ci.Cursor) -> list[tuple[int, str]]:
    """Errors in the kernel's file (offset, text): a parameter of unknown type reads as int."""
    tu = cursor.translation_unit
    file = os.path.realpath(file_name(cursor.location.file))
    found = []
    for diagnostic in tu.diagnostics:
        location = diagnostic.location
        if diagnostic.severity < ci.Diagnostic.Error or location.file is None:
            continue
        if os.path.realpath(file_name(location.file)) == file:
            found.append((location.offset, diagnostic.spelling))
    return found
