"""A kernel's array of structs of numbers, as numpy lays it out.

Real kernels take `Particle *p` as often as `float *x`: a struct of numbers, arrays of them
and other such structs (`float pos[3]; float mass;`, CUDA's `float4`). Kernel mode makes data
for it as it does for an array of floats: each number filled by the default rule (or the
argument's), the outputs compared number by number. The layout is the compiler's, read from
libclang (each field's offset, the struct's size: alignment and padding included), written as
numpy's comma-separated format with padding as void bytes (`"<f4,V4,<f8"`): a string, so the
dtype travels as every other kernel argument's does, and numpy reads it without evaluating
anything. A struct with a pointer, a union, a bit-field, a base class or a field whose layout
libclang cannot say is not one annotune can make data for: `struct_dtype` says None, and the
caller says why.
"""

from __future__ import annotations

import clang.cindex as ci
import numpy as np

KIND_DTYPES = {
    ci.TypeKind.FLOAT: "float32",
    ci.TypeKind.DOUBLE: "float64",
    ci.TypeKind.HALF: "float16",
    ci.TypeKind.BOOL: "bool",
    ci.TypeKind.CHAR_S: "int8",
    ci.TypeKind.SCHAR: "int8",
    ci.TypeKind.CHAR_U: "uint8",
    ci.TypeKind.UCHAR: "uint8",
    ci.TypeKind.SHORT: "int16",
    ci.TypeKind.USHORT: "uint16",
    ci.TypeKind.INT: "int32",
    ci.TypeKind.UINT: "uint32",
    ci.TypeKind.LONG: "int64",  # LP64: CUDA on Linux
    ci.TypeKind.ULONG: "uint64",
    ci.TypeKind.LONGLONG: "int64",
    ci.TypeKind.ULONGLONG: "uint64",
}
"""The numpy dtype of each C number type a kernel's argument (or a struct's member) may be."""
_NUMBERS = {kind: np.dtype(name).str.lstrip("|") for kind, name in KIND_DTYPES.items()}
_DEEPEST = 8  # structs within structs: deeper is no data layout a kernel's argument has
_MOST = 1024  # numbers (or number arrays) in one struct, arrays of structs in it unrolled


def struct_dtype(ctype: ci.Type) -> str | None:
    """numpy's format of an array element of struct type `ctype` (its fields flattened, in
    offset order, padding as void bytes, the struct's own size); None when one of its members
    is not a number, an array of numbers or such a struct."""
    canonical = ctype.get_canonical()
    size = canonical.get_size()
    fields = _fields(canonical, 0, 0)
    if size <= 0 or not fields or len(fields) > _MOST:
        return None
    parts, at = [], 0
    for offset, code in sorted(fields):
        if offset < at:  # overlapping members: a union, however it is spelled
            return None
        if offset > at:
            parts.append(f"V{offset - at}")
        parts.append(code)
        at = offset + np.dtype(code).itemsize
    if at > size:
        return None
    if at < size:
        parts.append(f"V{size - at}")
    return ",".join(parts) + ("," if len(parts) == 1 else "")


def _fields(record: ci.Type, base: int, depth: int) -> list[tuple[int, str]] | None:
    """(byte offset, numpy code) of each number of `record` placed at `base`; None when a
    member is no number."""
    declaration = record.get_declaration()
    if depth > _DEEPEST or declaration.kind != ci.CursorKind.STRUCT_DECL:
        return None  # a union, a class libclang did not lay out
    if any(c.kind == ci.CursorKind.CXX_BASE_SPECIFIER for c in declaration.get_children()):
        return None  # a base's members are not among `get_fields`: no layout to trust
    found: list[tuple[int, str]] = []
    for field in record.get_fields():
        bits = record.get_offset(field.spelling)
        if field.is_bitfield() or bits < 0 or bits % 8:
            return None
        placed = _placed(field.type.get_canonical(), base + bits // 8, depth)
        if placed is None:
            return None
        found += placed
    return found


def _placed(ctype: ci.Type, at: int, depth: int) -> list[tuple[int, str]] | None:
    """The numbers of a member of type `ctype` at byte `at`: itself, an array's elements (a
    number array as one subarray), or a nested struct's."""
    if ctype.kind in _NUMBERS:
        return [(at, _NUMBERS[ctype.kind])]
    if ctype.kind == ci.TypeKind.CONSTANTARRAY:
        element = ctype.get_array_element_type().get_canonical()
        count = ctype.get_array_size()
        if element.kind in _NUMBERS and count > 0:
            return [(at, f"({count},){_NUMBERS[element.kind]}")]
        stride = element.get_size()
        if count <= 0 or stride <= 0:
            return None
        found: list[tuple[int, str]] = []
        for index in range(min(count, _MOST + 1)):  # past _MOST the struct is refused anyway
            placed = _placed(element, at + index * stride, depth)
            if placed is None:
                return None
            found += placed
        return found
    if ctype.kind == ci.TypeKind.RECORD:
        if ctype.get_declaration().spelling == "__half":
            return [(at, "<f2")]
        return _fields(ctype, at, depth + 1)
    return None
