"""The libclang cursor and type kinds the walk sorts declarations by: functions and methods,
scopes, classes, names (typedefs, aliases, using), memory spaces, and the types of the
namespace-scope constants NVRTC accepts without a memory space."""

from __future__ import annotations

import clang.cindex as ci

DEVICE_ATTRS = {ci.CursorKind.CUDAGLOBAL_ATTR, ci.CursorKind.CUDADEVICE_ATTR}
MEMORY_SPACES = {
    ci.CursorKind.CUDADEVICE_ATTR,
    ci.CursorKind.CUDACONSTANT_ATTR,
    ci.CursorKind.CUDASHARED_ATTR,
}
METHODS = {
    ci.CursorKind.CXX_METHOD,
    ci.CursorKind.CONSTRUCTOR,
    ci.CursorKind.DESTRUCTOR,
    ci.CursorKind.CONVERSION_FUNCTION,
}
FUNCTIONS = METHODS | {ci.CursorKind.FUNCTION_DECL, ci.CursorKind.FUNCTION_TEMPLATE}
SCOPES = {ci.CursorKind.NAMESPACE, ci.CursorKind.LINKAGE_SPEC}
RECORDS = {
    ci.CursorKind.STRUCT_DECL,
    ci.CursorKind.CLASS_DECL,
    ci.CursorKind.UNION_DECL,
    ci.CursorKind.CLASS_TEMPLATE,
    ci.CursorKind.CLASS_TEMPLATE_PARTIAL_SPECIALIZATION,
}
NAMES = {
    ci.CursorKind.TYPEDEF_DECL,
    ci.CursorKind.TYPE_ALIAS_DECL,
    ci.CursorKind.TYPE_ALIAS_TEMPLATE_DECL,
    ci.CursorKind.USING_DECLARATION,
    ci.CursorKind.USING_DIRECTIVE,
}
# Types of the namespace-scope constants NVRTC accepts without a memory space (tested: `const
# int`, `constexpr double[]`, `const char *const`; a `const char *` is a variable).
CONSTANT_TYPES = {
    ci.TypeKind.BOOL,
    ci.TypeKind.CHAR_U,
    ci.TypeKind.UCHAR,
    ci.TypeKind.CHAR16,
    ci.TypeKind.CHAR32,
    ci.TypeKind.USHORT,
    ci.TypeKind.UINT,
    ci.TypeKind.ULONG,
    ci.TypeKind.ULONGLONG,
    ci.TypeKind.CHAR_S,
    ci.TypeKind.SCHAR,
    ci.TypeKind.WCHAR,
    ci.TypeKind.SHORT,
    ci.TypeKind.INT,
    ci.TypeKind.LONG,
    ci.TypeKind.LONGLONG,
    ci.TypeKind.FLOAT,
    ci.TypeKind.DOUBLE,
    ci.TypeKind.HALF,
    ci.TypeKind.ENUM,
    ci.TypeKind.POINTER,
    ci.TypeKind.NULLPTR,
}
ARRAYS = {ci.TypeKind.CONSTANTARRAY, ci.TypeKind.INCOMPLETEARRAY}
TYPEDEFS = {ci.CursorKind.TYPEDEF_DECL, ci.CursorKind.TYPE_ALIAS_DECL}
