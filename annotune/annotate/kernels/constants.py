"""`__constant__` memory and textures: the namespace-scope `__constant__` variables the host
would set (`cudaMemcpyToSymbol`), which kernel mode fills itself with the rules of
`constants(NAME = FILL, ...)`, and the texture and surface handles it cannot make, refused at
their declaration before anything is compiled."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

import clang.cindex as ci
import numpy as np

from annotune.annotate.grammar.kernel_clauses import Declaration
from annotune.annotate.grammar.kernel_items import Fill, Names, parse_fill
from annotune.annotate.kernels.cuda_parse import namespace_scope
from annotune.annotate.kernels.parameters import (
    ARRAY_KINDS,
    RECORD_DTYPES,
    SUPPORTED,
    error_diagnostics,
)
from annotune.annotate.kernels.records import KernelConstant, KernelSpec
from annotune.annotate.kernels.struct_types import KIND_DTYPES
from annotune.annotate.source import ParsedSource, SourceFile, file_name
from annotune.core.diagnostics import AnnotuneError, Location

TEXTURE_TYPES = ("cudaTextureObject_t", "cudaSurfaceObject_t")
"""Handles the host makes (`cudaCreateTextureObject`): kernel mode, which never runs the host,
has none to pass."""

_TEXTURE_HINT = (
    "kernel mode cannot create textures or surfaces: drop this kernel's declaration and tune "
    "the program (--mode program), whose host code makes them"
)
_LEGACY = re.compile(rb"\s*(texture|surface)\s*<")  # a texture reference's declaration
_BOUNDS = re.compile(r"\s*(\[[^\]]*\]\s*)*")  # array bounds after a variable's name
_CONSTANT_RULE = re.compile(r"\s*([A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*)\s*=")


@dataclass(frozen=True)
class Variables:
    """The namespace-scope variables of the user's files, by qualified name: the `__constant__`
    ones the host must set, those initialised where declared, and the rest (their memory
    space, for messages)."""

    constants: Mapping[str, KernelConstant]
    initialised: Mapping[str, Location]
    others: Mapping[str, str]

    def find(self, name: str) -> str | None:
        """The qualified name `name` stands for: itself, or the one variable so named."""
        known = (*self.constants, *self.initialised, *self.others)
        if name in known:
            return name
        matching = [q for q in known if q.rsplit("::", 1)[-1] == name]
        return matching[0] if len(matching) == 1 else None


def namespace_variables(tu: ci.TranslationUnit, parsed: ParsedSource) -> Variables:
    """Every namespace-scope variable defined in the user's files. Raises AnnotuneError, at its
    declaration, for a legacy texture reference or a `__constant__` texture object: nothing
    kernel mode can make."""
    files = {os.path.realpath(f.path): f for f in parsed.files}
    constants: dict[str, KernelConstant] = {}
    initialised: dict[str, Location] = {}
    others: dict[str, str] = {}
    stack = list(tu.cursor.get_children())
    while stack:
        cursor = stack.pop()
        if cursor.location.file is None:
            continue
        source = files.get(os.path.realpath(file_name(cursor.location.file)))
        if source is None:
            continue
        if cursor.kind in (ci.CursorKind.NAMESPACE, ci.CursorKind.LINKAGE_SPEC):
            stack.extend(cursor.get_children())
            continue
        if cursor.kind != ci.CursorKind.VAR_DECL or not cursor.is_definition():
            continue
        where = source.location(cursor.location.offset)
        name = namespace_scope(cursor) + cursor.spelling
        legacy = _LEGACY.match(source.data[cursor.extent.start.offset : cursor.location.offset])
        if legacy:
            raise AnnotuneError(
                f"'{name}' is a {legacy.group(1).decode()} reference, which kernel mode cannot "
                "bind",
                where,
                hint=_TEXTURE_HINT + " (CUDA 12 removed texture references)",
            )
        spaces = {
            ci.CursorKind.CUDACONSTANT_ATTR: "__constant__",
            ci.CursorKind.CUDADEVICE_ATTR: "__device__",
            ci.CursorKind.CUDASHARED_ATTR: "__shared__",
        }
        space = next((spaces[c.kind] for c in cursor.get_children() if c.kind in spaces), "")
        if space != "__constant__":
            others[name] = space or "host"
        elif _initialised(cursor, source):
            initialised[name] = where
        else:
            constants[name] = _constant(cursor, name, where)
    return Variables(dict(sorted(constants.items())), initialised, others)


def _initialised(cursor: ci.Cursor, source: SourceFile) -> bool:
    """Whether a variable's declaration gives its value: `= ...`, `{...}` or `(...)` after its
    name and array bounds. Read from the file's text: libclang gives no tokens for a
    declaration that starts with a macro (`__constant__`)."""
    rest = source.data[cursor.location.offset + len(cursor.spelling) : cursor.extent.end.offset]
    after = rest.decode("utf-8", errors="replace")
    return after[_BOUNDS.match(after).end() :][:1] in ("=", "{", "(")  # type: ignore[union-attr]


def _constant(cursor: ci.Cursor, name: str, where: Location) -> KernelConstant:
    """An uninitialised `__constant__` variable: its symbol, elements, and why it cannot be
    filled, if it cannot."""
    ctype = cursor.type.spelling
    element = cursor.type
    while element.get_canonical().kind in ARRAY_KINDS:
        element = element.get_array_element_type()
    texture = _texture_type(element)
    if texture:
        raise AnnotuneError(
            f"__constant__ '{name}' holds a {texture}, which kernel mode cannot create",
            where,
            hint=_TEXTURE_HINT,
        )
    symbol, why = cursor.spelling, ""
    if cursor.semantic_parent.kind not in (
        ci.CursorKind.TRANSLATION_UNIT,
        ci.CursorKind.LINKAGE_SPEC,
    ):
        symbol = cursor.mangled_name
        if cursor.linkage == ci.LinkageKind.INTERNAL:
            why = "internal to a namespace: nvcc names it in the cubin after a hash of the file"
    canonical = element.get_canonical()
    dtype = KIND_DTYPES.get(canonical.kind, "")
    if canonical.kind == ci.TypeKind.RECORD:
        dtype = RECORD_DTYPES.get(canonical.get_declaration().spelling, "")
    for error_at, message in error_diagnostics(cursor):
        if cursor.extent.start.offset <= error_at < cursor.extent.end.offset:
            why = why or f"libclang cannot tell its type ({message})"
    if canonical.kind == ci.TypeKind.POINTER:
        why = why or "a pointer, to memory only the host knows"
    elif not dtype:
        why = why or f"annotune makes data only of {SUPPORTED}"
    size = cursor.type.get_size()
    if size <= 0:
        why = why or "its size is unknown"
    count = size // np.dtype(dtype).itemsize if dtype and size > 0 else 0
    return KernelConstant(name, symbol, dtype, ctype, count, where, why=why)


def _texture_type(type_: ci.Type) -> str:
    """The texture or surface object type `type_` is, through typedefs ("" for none)."""
    for _ in range(64):  # typedef chains are short; a cycle cannot be, but never loop on one
        declaration = type_.get_declaration()
        if type_.kind == ci.TypeKind.ELABORATED:
            type_ = type_.get_named_type()
        elif declaration.kind == ci.CursorKind.TYPEDEF_DECL:
            if declaration.spelling in TEXTURE_TYPES:
                return declaration.spelling
            type_ = declaration.underlying_typedef_type
        else:
            break
    return ""


def refuse_textures(kernel: ci.Cursor, parsed: ParsedSource) -> None:
    """A kernel taking a texture or surface object cannot be launched by kernel mode: an error
    at that parameter's declaration, before anything is compiled."""
    files = {os.path.realpath(f.path): f for f in parsed.files}
    for param in kernel.get_children():
        if param.kind != ci.CursorKind.PARM_DECL:
            continue
        texture = _texture_type(param.type)
        if texture:
            source = files.get(os.path.realpath(file_name(param.location.file)))
            where = source.location(param.location.offset) if source else None
            raise AnnotuneError(
                f"kernel '{kernel.spelling}' takes '{param.spelling}', a {texture}, which kernel "
                "mode cannot create",
                where,
                hint=_TEXTURE_HINT,
            )


def with_constants(
    spec: KernelSpec,
    declaration: Declaration,
    variables: Variables,
    names: Names,
) -> KernelSpec:
    """The spec with the `__constant__` variables to fill, each with the rule its
    `constants(...)` clause gives."""
    rules = _constant_rules(declaration, variables, names)
    constants = tuple(replace(c, fill=rules.get(name)) for name, c in variables.constants.items())
    return replace(spec, constants=constants)


def _constant_rules(
    declaration: Declaration, variables: Variables, names: Names
) -> dict[str, Fill]:
    """`constants(NAME = RULE, ...)`: a fill rule (`FILLS`) by qualified name, each for an
    uninitialised `__constant__` variable that can be filled, at most once."""
    clause = declaration.clauses.get("constants")
    rules: dict[str, Fill] = {}
    for text, item, offset in clause.items if clause is not None else ():
        at = text.location(offset + len(item) - len(item.lstrip()))
        match = _CONSTANT_RULE.match(item)
        if match is None:
            raise AnnotuneError(
                f"expected NAME = RULE in constants(...), found {item.strip()!r}",
                at,
                hint="e.g. constants(coef = uniform(-1, 1), lut = range(0, 16))",
            )
        written = re.sub(r"\s+", "", match.group(1))
        name = variables.find(written)
        if name is None:
            known = ", ".join(variables.constants) or "none"
            raise AnnotuneError(
                f"unknown __constant__ variable '{written}'",
                at,
                hint=f"uninitialised __constant__ variables of these files: {known}",
            )
        if name in variables.others:
            raise AnnotuneError(
                f"'{name}' is a {variables.others[name]} variable: kernel mode fills only "
                "__constant__ ones",
                at,
            )
        if name in variables.initialised:
            first = variables.initialised[name]
            raise AnnotuneError(
                f"__constant__ '{name}' is initialised where it is declared "
                f"({first.file}:{first.line}:{first.column}): the cubin holds its values",
                at,
            )
        constant = variables.constants[name]
        if constant.why:
            raise AnnotuneError(f"__constant__ '{name}' cannot be filled: {constant.why}", at)
        if name in rules:
            raise AnnotuneError(f"a second rule for __constant__ '{name}'", at)
        rules[name] = parse_fill(text, item[match.end() :], offset + match.end(), "in", names)
    return rules
