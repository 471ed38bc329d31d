"""Kernel mode's annotation: `#pragma annotune kernel`, checked against the kernel's signature.

    #pragma annotune kernel NAME grid(E[, E[, E]]) block(E[, E[, E]]) [shared(E)] args(A, ...)
        [tolerance(R)] [constants(NAME = FILL, ...)]

Each E is a C expression over the tunable parameters and the numeric object-like macros of the
user's files (`#define NX 4096`, `#define CELLS (NX * NY)`). Each A is, for a pointer parameter
of the kernel, `in(E)` (random input), `out(E)` (output, compared with the default
configuration's) or `inout(E)` (both), E being the element count; for a scalar parameter, an
expression giving its value. `tolerance(R)` is the relative difference from the default's
outputs a configuration may show (a number; `--check-rtol` overrides it). Clauses may come in
any order. An `in` or `inout` array may say
how it is filled, after its count (`FILLS`): `in(N, range(0, M))` (integers in [0, M): indices
that must stay in bounds), `in(N, uniform(-1, 1))`, `in(N, value(1))` or `in(N, iota)` (0, 1,
2, ...); without one, floats are uniform in [0, 1) and integers in [0, 100).

Code that must not be edited declares its kernels in its config instead, with the same clauses
and grammar, each clause's text a string (`args` also a list, one string an argument), located
in the config (`annotate.config`):

    [[file.kernel]]
    name = "conv2d"
    grid = "(NJ + BLOCK_X - 1) / BLOCK_X, NI / BLOCK_Y"
    block = "BLOCK_X, BLOCK_Y"
    args = ["in(NI * NJ)", "out(NI * NJ)"]

The kernel's parameter types and mangled name come from libclang. The front end's parse does
not keep its AST, so the main file is parsed again here with a shim that also declares what
kernel signatures use from headers that are not installed (`size_t`, `int64_t`, `__half`):
without them libclang would read such a parameter as `int`, and the mangled name and the
generated inputs would be wrong.
"""

from __future__ import annotations

import heapq
import math
import os
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import clang.cindex as ci
import numpy as np

from annotune.annotate.source import (
    CUDA_SHIM,
    SHIM_PATH,
    Directive,
    ParsedSource,
    SourceFile,
    clang_args,
    file_name,
)
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.space.expressions import (
    RESERVED_NAMES,
    Binary,
    Conditional,
    Expression,
    ExpressionError,
    Name,
    Node,
    Unary,
    evaluate_with_undefined,
    parse_expression,
)

__all__ = [
    "DeclaredClause",
    "DeclaredKernel",
    "KernelArg",
    "KernelConstant",
    "KernelSpec",
    "Launch",
    "LaunchArg",
    "LaunchConstant",
    "LaunchError",
    "TemplateArg",
    "declares_kernels",
    "kernel_definitions",
    "kernel_specs",
    "parse_cuda",
]

Number = int | float

POINTER_KINDS = ("in", "out", "inout")

# What kernel signatures commonly take from headers that -nostdinc leaves out.
_SIGNATURE_SHIM = """
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
"""

_KIND_DTYPES = {
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
_RECORD_DTYPES = {"__half": "float16"}
_SUPPORTED = "float, double, __half, bool, char, short, int, long, long long and unsigned"

_ARRAY_KINDS = (ci.TypeKind.CONSTANTARRAY, ci.TypeKind.INCOMPLETEARRAY)
_CLAUSES = ("grid", "block", "shared", "args", "tolerance", "constants")
_STUB = "__device_stub__"
_KEEP_GOING = 0x200


@dataclass(frozen=True)
class DeclaredClause:
    """A clause of a kernel declared in a config: `grid`, `block`, `shared` or `args`, and its
    text, each piece where the config writes it (a string; `args` may be a list of them)."""

    name: str
    pieces: tuple[tuple[str, Location], ...]


@dataclass(frozen=True)
class DeclaredKernel:
    """`[[file.kernel]]` of a config: what `#pragma annotune kernel` says, for a source that
    must not be edited. `location`: where its name is written."""

    name: str
    location: Location
    clauses: tuple[DeclaredClause, ...]


class LaunchError(ValueError):
    """A configuration whose launch cannot be computed (division by zero, a zero block...)."""


FILLS = {"uniform": 2, "range": 2, "value": 1, "iota": 0}
"""How an input array may be filled, and how many bounds each rule takes."""


@dataclass(frozen=True)
class Fill:
    """An input array's fill rule (`FILLS`) with its bounds, C expressions like the count."""

    rule: str
    bounds: tuple[Expression, ...] = ()

    def to_json(self) -> dict:
        return {"rule": self.rule, "bounds": [_one_line(b) for b in self.bounds]}


@dataclass(frozen=True)
class TemplateArg:
    """One template argument of a kernel's instance: a type, as written (`expr` None), or a
    number, an expression over the knobs and macros evaluated per configuration: a block size
    passed as a template parameter is a knob kernel mode can tune."""

    text: str  # as written, for messages
    expr: Expression | None = None
    boolean: bool = False  # a `bool` parameter, written true/false (C++17 refuses 1 for it)
    canonical: str = ""  # a type's canonical spelling (`double` for `real`), as symbols show it
    number: bool = False  # a non-type argument (`expr` None: C++'s own, such as an enumerator)

    def written(self, values: Mapping[str, Number]) -> str:
        """The argument as C++ source for one configuration's values."""
        if self.expr is None:
            return self.canonical or self.text
        value = _value(self.expr, values, f"the template argument '{self.text}'")
        if self.boolean:
            return "true" if value else "false"
        if isinstance(value, float) and not value.is_integer():
            raise LaunchError(f"the template argument '{self.text}' is {value}, not an integer")
        return str(int(value))


@dataclass(frozen=True)
class KernelArg:
    """One kernel parameter and what the pragma says to pass for it.

    `kind` is "in", "out", "inout" (pointers: `expr` is the element count) or "scalar" (`expr`
    is the value). `dtype` is the numpy dtype name of the element (pointers) or the value
    (scalars); `ctype` the parameter's C type as written, for messages.
    """

    name: str
    kind: str
    dtype: str
    ctype: str
    expr: Expression
    location: Location
    const: bool = False
    fill: Fill | None = None  # how an input array is filled; None: the default rule

    @property
    def is_pointer(self) -> bool:
        return self.kind != "scalar"

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "type": self.ctype,
            "expr": _one_line(self.expr),
            **({"fill": self.fill.to_json()} if self.fill is not None else {}),
        }


@dataclass(frozen=True)
class LaunchArg:
    """An argument of one launch: an array of `count` elements, or a scalar `value`."""

    name: str
    kind: str
    dtype: str
    count: int = 0
    value: Number = 0
    fill: tuple[str, tuple[Number, ...]] | None = None  # the rule and its bounds' values

    @property
    def is_pointer(self) -> bool:
        return self.kind != "scalar"

    @property
    def nbytes(self) -> int:
        return self.count * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class Launch:
    """Everything a backend needs to launch the kernel for one configuration."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    args: tuple[LaunchArg, ...]
    constants: tuple[LaunchConstant, ...] = ()  # to fill before the first launch

    def to_json(self) -> dict:
        return {"grid": list(self.grid), "block": list(self.block), "shared": self.shared}


@dataclass(frozen=True)
class KernelSpec:
    """A `#pragma annotune kernel`, checked against the kernel's definition.

    `macros` are the numeric macros the expressions use (directly or through other macros), in
    an order where each comes after the macros it uses; they may use tunable parameters.
    """

    name: str
    mangled_name: str
    grid: tuple[Expression, ...]
    block: tuple[Expression, ...]
    shared: Expression | None
    args: tuple[KernelArg, ...]
    macros: tuple[tuple[str, Expression], ...]
    location: Location
    template: tuple[TemplateArg, ...] = ()  # a template kernel's arguments; () for a function
    scope: str = ""  # the namespaces it is declared in, as C++ names them: "ns::"
    tolerance: float | None = None  # tolerance(R): the outputs' relative tolerance
    constants: tuple[KernelConstant, ...] = ()  # the __constant__ variables the host would set

    def launch(self, params: Mapping[str, Number]) -> Launch:
        """Grid, block, dynamic shared bytes and arguments for one configuration.

        Raises LaunchError where C leaves a value undefined or a dimension is out of range.
        """
        values = self._values(params)
        grid = _dims(self.grid, values, "grid")
        block = _dims(self.block, values, "block")
        shared = 0
        if self.shared is not None:
            shared = _count(_value(self.shared, values, "shared(...)"), "shared(...)")
        args = []
        for arg in self.args:
            value = _value(arg.expr, values, f"the argument for '{arg.name}'")
            if arg.is_pointer:
                count = _count(value, f"the element count of '{arg.name}'")
                fill = None
                if arg.fill is not None:
                    what = f"the fill of '{arg.name}'"
                    bounds = tuple(_value(b, values, what) for b in arg.fill.bounds)
                    fill = _checked_fill(arg, count, bounds, what)
                args.append(LaunchArg(arg.name, arg.kind, arg.dtype, count=count, fill=fill))
            else:
                args.append(LaunchArg(arg.name, arg.kind, arg.dtype, value=value))
        constants = tuple(c.launched(values) for c in self.constants if not c.why)
        return Launch(grid, block, shared, tuple(args), constants)

    def instance(self, params: Mapping[str, Number]) -> str:
        """A template kernel's instance for one configuration, as C++ names it
        (`ns::scale<float, 256>`): what NVRTC is asked to instantiate and lower, and what the
        nvcc build's cubin is searched for. "" for a kernel that is no template (its symbol is
        `mangled_name`). Raises LaunchError as `launch` does."""
        if not self.template:
            return ""
        values = self._values(params)
        written = ", ".join(arg.written(values) for arg in self.template)
        return f"{self.scope}{self.name}<{written}>"

    def names(self) -> frozenset[str]:
        """Every name the declaration's expressions use: its launch, arguments, fills,
        template arguments and constants' fills."""
        exprs = [*self.grid, *self.block, self.shared, *(a.expr for a in self.args)]
        exprs += [t.expr for t in self.template]
        fills = [a.fill for a in self.args] + [c.fill for c in self.constants]
        exprs += [bound for fill in fills if fill is not None for bound in fill.bounds]
        return frozenset(name for expr in exprs if expr is not None for name in expr.names)

    def _values(self, params: Mapping[str, Number]) -> dict[str, Number]:
        values: dict[str, Number] = dict(params)
        for name, expr in self.macros:
            values[name] = _value(expr, values, f"macro '{name}'")
        return values

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "mangled_name": self.mangled_name,
            "grid": [_one_line(e) for e in self.grid],
            "block": [_one_line(e) for e in self.block],
            "shared": _one_line(self.shared) if self.shared is not None else None,
            "args": [arg.to_json() for arg in self.args],
            **({"template": [arg.text for arg in self.template]} if self.template else {}),
            **({"tolerance": self.tolerance} if self.tolerance is not None else {}),
            **({"constants": [c.to_json() for c in self.constants]} if self.constants else {}),
            "location": self.location.to_json(),
        }


def _one_line(expr: Expression) -> str:
    return " ".join(expr.text.split())


def _value(expr: Expression, values: Mapping[str, Number], what: str) -> Number:
    columns = {name: np.array([values[name]]) for name in expr.names}
    result, undefined = evaluate_with_undefined(expr, columns, rows=1)
    if undefined[0]:
        raise LaunchError(
            f"{what} is undefined in C here ({_one_line(expr)}): e.g. a division by zero or a "
            "signed overflow"
        )
    return result[0].item()


def _checked_fill(
    arg: KernelArg | KernelConstant, count: int, bounds: tuple[Number, ...], what: str
) -> tuple[str, tuple[Number, ...]]:
    """A fill's rule and bounds, once they can fill the array: a range that is not empty, and
    integers the element type holds (never silently wrapped)."""
    rule = arg.fill.rule  # type: ignore[union-attr]
    if rule in ("range", "uniform") and not bounds[0] < bounds[1]:
        raise LaunchError(f"{what} is empty: {rule}({bounds[0]}, {bounds[1]})")
    dtype = np.dtype(arg.dtype)
    if dtype.kind in "iub":
        low, high = (0, 1) if dtype.kind == "b" else (np.iinfo(dtype).min, np.iinfo(dtype).max)
        if rule == "iota":
            least, most = 0, count - 1
        elif rule == "value":
            least = most = bounds[0]
        else:
            least, most = bounds[0], math.ceil(bounds[1]) - 1
        if not (low <= least and most <= high):
            raise LaunchError(f"{what} does not fit its type {arg.ctype}: {rule}{bounds}")
    return rule, bounds


def _count(value: Number, what: str) -> int:
    count = int(value)
    if count < 0:
        raise LaunchError(f"{what} is negative ({count})")
    return count


def _dims(exprs: tuple[Expression, ...], values: Mapping[str, Number], what: str) -> tuple:
    dims = [int(_value(e, values, f"{what}(...)")) for e in exprs]
    for dim in dims:
        if not 1 <= dim < 2**32:
            raise LaunchError(f"{what} dimension {dim} is out of range")
    return tuple(dims + [1] * (3 - len(dims)))


# --- reading the pragmas -----------------------------------------------------------------------


def declares_kernels(parsed: ParsedSource) -> bool:
    """Whether one of the user's files has a `#pragma annotune kernel` (then it is parsed again)."""
    return any(_is_kernel_pragma(d) for source in parsed.files for d in source.directives)


def kernel_specs(
    parsed: ParsedSource,
    param_names: Collection[str],
    *,
    include_dirs: Iterable[str] = (),
    defines: Iterable[str] = (),
    translation_unit: ci.TranslationUnit | None = None,
    declared: Sequence[DeclaredKernel] = (),
) -> tuple[KernelSpec, ...]:
    """Every `#pragma annotune kernel` of the user's files and every kernel `declared` in the
    config (`[[file.kernel]]`), checked and typed.

    `param_names` are the tunable parameters; `include_dirs` and `defines` must be those the
    front end parsed with, since the main file is parsed again for the kernels' signatures
    (`translation_unit`: that parse, `parse_cuda`'s, when the caller already has it).
    Raises AnnotuneError, located at the offending character, for every mistake.
    """
    pragmas = [
        (source, directive)
        for source in parsed.files
        for directive in source.directives
        if _is_kernel_pragma(directive)
    ]
    if not pragmas and not declared:
        return ()
    if parsed.language != "cuda":
        where = (
            pragmas[0][0].location(pragmas[0][1].words[1].start)
            if pragmas
            else declared[0].location
        )
        raise AnnotuneError("kernel mode needs a CUDA source (.cu)", where)
    macros = _numeric_macros(parsed, set(param_names))
    if translation_unit is None:
        translation_unit = parse_cuda(parsed, include_dirs, defines)
    kernels = kernel_definitions(translation_unit, parsed)
    variables = _variables(translation_unit, parsed)
    names = _Names(param_names, macros)
    reparse = _Reparse(parsed, tuple(include_dirs), tuple(defines))
    read = [_pragma_declaration(source, directive) for source, directive in pragmas]
    read += [_config_declaration(kernel) for kernel in declared]
    specs: dict[str, KernelSpec] = {}
    for declaration in read:
        spec = _checked(declaration, names, kernels, parsed, reparse)
        spec = _with_constants(spec, declaration, variables, names)
        spec = replace(spec, macros=_macros_needed(set(spec.names()), macros))
        first = specs.get(spec.name)
        if first is not None:
            where = first.location
            raise AnnotuneError(
                f"duplicate {declaration.what} for '{spec.name}'",
                spec.location,
                hint=f"first given at {where.file}:{where.line}:{where.column}",
            )
        specs[spec.name] = spec
    return tuple(specs.values())


def _is_kernel_pragma(directive: Directive) -> bool:
    words = directive.words
    return (
        directive.name == "pragma"
        and len(words) >= 2
        and words[0].text == "annotune"
        and words[1].text == "kernel"
    )


@dataclass(frozen=True)
class _Text:
    """Text of a declaration and where each character of it is written: in a source (from
    byte `start` of `source`) or in a config (from `base`; a TOML escape is not undone, so a
    column after one is off by its length)."""

    text: str
    source: SourceFile | None = None
    start: int = 0
    base: Location | None = None

    def location(self, offset: int) -> Location:
        if self.source is not None:
            return self.source.location(self.start + len(self.text[:offset].encode()))
        assert self.base is not None
        before = self.text[:offset]
        if "\n" not in before:
            return self.base.shifted(offset)
        line = self.base.line + before.count("\n")
        return Location(self.base.file, line, offset - before.rfind("\n"))


@dataclass(frozen=True)
class _Clause:
    name: str
    at: Location  # where the clause is named
    items: tuple[tuple[_Text, str, int], ...]  # top-level comma-separated items and offsets


@dataclass(frozen=True)
class _Declaration:
    """A kernel's declaration, a pragma's or a config's, split into clauses."""

    name: str
    where: Location
    clauses: Mapping[str, _Clause]
    what: str = "kernel pragma"  # for messages
    template: _Template | None = None  # `NAME<ARGS>`: a template kernel's instance


@dataclass(frozen=True)
class _Template:
    """The `<...>` after a kernel's name: where it opens, its top-level items."""

    at: Location
    items: tuple[tuple[_Text, str, int], ...]


_KERNEL_NAME = re.compile(r"\s*([A-Za-z_]\w*)\s*")


def _kernel_name(text: _Text, what: str) -> tuple[str, Location, _Template | None, int]:
    """`NAME` or `NAME<ARGS>` at the start of `text`: the name, where it is, the template's
    arguments and the offset after it all."""
    match = _KERNEL_NAME.match(text.text)
    if match is None:
        raise AnnotuneError(f"{what} needs the kernel's name", text.location(0))
    end = match.end()
    if text.text[end : end + 1] != "<":
        return match.group(1), text.location(match.start(1)), None, match.end(1)
    items, end = _items(text, end, "<", ">")
    template = _Template(text.location(match.end()), tuple(items))
    return match.group(1), text.location(match.start(1)), template, end


def _pragma_declaration(source: SourceFile, directive: Directive) -> _Declaration:
    keyword = directive.words[1]
    raw = source.slice(keyword.end, directive.end)
    text = _Text(raw.replace("\\\r\n", " \r\n").replace("\\\n", " \n"), source, keyword.end)
    name, where, template, end = _kernel_name(text, "'#pragma annotune kernel'")
    return _Declaration(name, where, _clauses(text, end), template=template)


def _config_declaration(kernel: DeclaredKernel) -> _Declaration:
    """A config's kernel: each piece of a clause split at its top-level commas, as the text
    between the pragma's parentheses is."""
    clauses = {}
    for clause in kernel.clauses:
        items: list[tuple[_Text, str, int]] = []
        for piece, location in clause.pieces:
            text = _Text(f"({piece})", base=location.shifted(-1))
            split, end = _items(text, 0)
            if end != len(text.text):
                raise AnnotuneError("unbalanced ')'", text.location(end - 1))
            if not split:
                raise AnnotuneError(f"empty {clause.name}", location)
            items += split
        at = clause.pieces[0][1] if clause.pieces else kernel.location
        clauses[clause.name] = _Clause(clause.name, at, tuple(items))
    name, where, template, end = _kernel_name(
        _Text(kernel.name, base=kernel.location), "[[file.kernel]]"
    )
    if kernel.name[end:].strip():
        raise AnnotuneError(
            "a kernel's name is NAME or NAME<TEMPLATE ARGUMENTS>", kernel.location.shifted(end)
        )
    return _Declaration(name, where, clauses, "[[file.kernel]]", template)


def _checked(
    declaration: _Declaration,
    names: _Names,
    kernels: Mapping[str, list[ci.Cursor]],
    parsed: ParsedSource,
    reparse: _Reparse,
) -> KernelSpec:
    """A declaration checked against the kernel's definition: its clauses' expressions, and an
    argument of the right kind for each of the kernel's parameters (the macros they use are
    the caller's to add, once the constants' fills are known too)."""
    name, where, clauses = declaration.name, declaration.where, declaration.clauses
    for required in ("grid", "block"):
        if required not in clauses:
            raise AnnotuneError(f"missing {required}(...) in the {declaration.what}", where)
    cursor = _kernel_cursor(name, where, kernels, parsed)
    _refuse_textures(cursor, parsed)
    params = [c for c in cursor.get_children() if c.kind == ci.CursorKind.PARM_DECL]
    template = _template_args(declaration, cursor, names)
    scope = _scope(cursor)
    types = [param.type for param in params]
    if template:
        types, template = _instance_types(reparse, f"{scope}{name}", template, declaration, types)
    grid = _dim_exprs(clauses["grid"], names)
    block = _dim_exprs(clauses["block"], names)
    shared = None
    if "shared" in clauses:
        items = clauses["shared"].items
        if len(items) != 1:
            raise AnnotuneError("shared(...) takes one expression (bytes)", clauses["shared"].at)
        shared = _expression(*items[0], names)
    args_clause = clauses.get("args")
    items = args_clause.items if args_clause is not None else ()
    if len(items) != len(params):
        raise AnnotuneError(
            f"kernel '{name}' takes {len(params)} argument{'s' * (len(params) != 1)}, "
            f"args(...) gives {len(items)}",
            args_clause.at if args_clause is not None else where,
        )
    diagnostics = _error_diagnostics(cursor)
    shown = {os.path.realpath(f.path): f.path for f in parsed.files}
    args = tuple(
        _argument(text, item, offset, param, ptype, names, diagnostics, _declared_at(param, shown))
        for (text, item, offset), param, ptype in zip(items, params, types, strict=True)
    )
    return KernelSpec(
        name=name,
        mangled_name="" if template else _device_mangled_name(cursor),
        grid=grid,
        block=block,
        shared=shared,
        args=args,
        macros=(),
        location=where,
        template=template,
        scope=scope,
        tolerance=_tolerance(clauses["tolerance"]) if "tolerance" in clauses else None,
    )


def _tolerance(clause: _Clause) -> float:
    """tolerance(R): one number, finite and not negative."""
    if len(clause.items) != 1:
        raise AnnotuneError("tolerance(...) takes one number (a relative tolerance)", clause.at)
    text, item, offset = clause.items[0]
    at = text.location(offset + len(item) - len(item.lstrip()))
    try:
        value = float(item.strip())
    except ValueError:
        raise AnnotuneError(
            f"tolerance(...) takes a number, not {item.strip()!r}", at, hint="e.g. 1e-3"
        ) from None
    if not math.isfinite(value) or value < 0:
        raise AnnotuneError(f"tolerance {item.strip()} is not a finite number >= 0", at)
    return value


def _clauses(text: _Text, pos: int) -> dict[str, _Clause]:
    """`NAME(items)` clauses up to the end of the pragma, each at most once."""
    body = text.text
    clauses: dict[str, _Clause] = {}
    word = re.compile(r"\s*([A-Za-z_]\w*)")
    while body[pos:].strip():
        match = word.match(body, pos)
        if match is None:
            at = pos + len(body[pos:]) - len(body[pos:].lstrip())
            raise AnnotuneError(
                f"expected a clause ({', '.join(_CLAUSES)}) but found '{body[at]}'",
                text.location(at),
            )
        name, at = match.group(1), match.start(1)
        if name not in _CLAUSES:
            raise AnnotuneError(
                f"unknown clause '{name}' (expected: {', '.join(_CLAUSES)})", text.location(at)
            )
        if name in clauses:
            raise AnnotuneError(f"duplicate clause '{name}'", text.location(at))
        pos = match.end()
        while pos < len(body) and body[pos].isspace():
            pos += 1
        if pos >= len(body) or body[pos] != "(":
            raise AnnotuneError(f"expected '(' after '{name}'", text.location(pos))
        items, pos = _items(text, pos)
        clauses[name] = _Clause(name, text.location(at), tuple(items))
    return clauses


def _items(
    text: _Text, open_at: int, opening: str = "(", closing: str = ")"
) -> tuple[list[tuple[_Text, str, int]], int]:
    """Split `( ... )` (or `< ... >`) at its top-level commas; returns the items and the
    offset after the closing bracket. Brackets of the other kind nest inside: `<` counts
    in a template's arguments (`k<Pair<int, int>, 4>`), as C++ reads them."""
    body = text.text
    depth, start, items = 0, open_at + 1, []
    inner = 0  # parentheses inside a template's arguments
    for pos in range(open_at, len(body)):
        ch = body[pos]
        if opening == "<" and ch in "()":
            inner += 1 if ch == "(" else -1
            continue
        if inner:
            continue
        if ch == opening:
            depth += 1
        elif ch == closing:
            depth -= 1
            if depth == 0:
                items.append((text, body[start:pos], start))
                if len(items) == 1 and not items[0][1].strip():
                    return [], pos + 1
                return items, pos + 1
        elif ch == "," and depth == 1:
            items.append((text, body[start:pos], start))
            start = pos + 1
    raise AnnotuneError(f"unclosed '{opening}'", text.location(open_at))


@dataclass(frozen=True)
class _Names:
    params: Collection[str]
    macros: Mapping[str, Expression]

    def __contains__(self, name: object) -> bool:
        return name in self.params or name in self.macros


class _Anything:
    """Every name: syntax is checked first, names after, each with its own message."""

    def __contains__(self, name: object) -> bool:
        return True


def _expression(text: _Text, item: str, offset: int, names: _Names) -> Expression:
    offset += len(item) - len(item.lstrip())
    item = item.strip()
    if not item:
        raise AnnotuneError("empty expression", text.location(offset))
    try:
        expr = parse_expression(item, _Anything())  # type: ignore[arg-type]
    except ExpressionError as error:
        raise AnnotuneError(error.message, text.location(offset + error.offset)) from None
    for node in _name_nodes(expr.root):
        if node.name not in names:
            raise AnnotuneError(
                f"unknown name '{node.name}' (not a tunable parameter or a numeric macro)",
                text.location(offset + node.offset),
            )
    return expr


def _name_nodes(root: Node) -> list[Name]:
    found, stack = [], [root]
    while stack:
        node = stack.pop()
        if isinstance(node, Name):
            found.append(node)
        elif isinstance(node, Unary):
            stack.append(node.operand)
        elif isinstance(node, Binary):
            stack += [node.right, node.left]
        elif isinstance(node, Conditional):
            stack += [node.if_false, node.if_true, node.condition]
    return found


def _dim_exprs(clause: _Clause, names: _Names) -> tuple[Expression, ...]:
    if not 1 <= len(clause.items) <= 3:
        raise AnnotuneError(
            f"{clause.name}(...) takes 1 to 3 expressions, found {len(clause.items)}", clause.at
        )
    return tuple(_expression(text, item, offset, names) for text, item, offset in clause.items)


_POINTER_ARG = re.compile(r"\s*(in|out|inout)\s*\(")


def _argument(
    text: _Text,
    item: str,
    offset: int,
    param: ci.Cursor,
    ptype: ci.Type,  # the parameter's type: an instance's, T substituted, for a template
    names: _Names,
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
    if canonical.kind == ci.TypeKind.POINTER or canonical.kind in _ARRAY_KINDS:
        pointee = _element(canonical)
        const = _is_const(pointee) or canonical.kind in _ARRAY_KINDS and _is_const(canonical)
        if kind_match is None:
            raise AnnotuneError(
                f"'{param.spelling}' is a pointer ({ctype}): pass in(COUNT), out(COUNT) or "
                "inout(COUNT)",
                at,
                hint=hint,
            )
        kind = kind_match.group(1)
        parts, after = _items(text, offset + kind_match.end() - 1)
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
        dtype = _dtype(pointee, param, at, hint)
        if kind != "in" and const:
            raise AnnotuneError(
                f"'{param.spelling}' points to const ({ctype}): it can only be in(...)",
                at,
                hint=hint,
            )
        _, count_text, count_at = parts[0]
        expr = _expression(text, count_text, count_at, names)
        fill = _fill(text, *parts[1][1:], kind, names) if len(parts) == 2 else None
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
        param.spelling, "scalar", dtype, ctype, _expression(text, item, offset, names), at
    )


_FILL = re.compile(r"\s*([A-Za-z_]\w*)\s*")


def _fill(text: _Text, item: str, offset: int, kind: str, names: _Names) -> Fill:
    """`range(LO, HI)`, `uniform(LO, HI)`, `value(V)` or `iota`: an input's fill rule."""
    at = text.location(offset + len(item) - len(item.lstrip()))
    match = _FILL.match(item)
    rule = match.group(1) if match else ""
    rules = ", ".join(f"{r}({', '.join('E' * n)})" if n else r for r, n in FILLS.items())
    if kind == "out":
        raise AnnotuneError("an out(...) array starts as zeros: it takes no fill", at)
    if rule not in FILLS:
        raise AnnotuneError(f"unknown fill {item.strip()!r}", at, hint=f"fills: {rules}")
    if FILLS[rule] == 0:
        if item[match.end() :].strip():
            raise AnnotuneError(f"'{rule}' takes no bounds", at, hint=f"fills: {rules}")
        return Fill(rule)
    open_at = offset + match.end()
    if text.text[open_at : open_at + 1] != "(":
        raise AnnotuneError(f"'{rule}' needs its bounds in (...)", at, hint=f"fills: {rules}")
    parts, after = _items(text, open_at)
    if text.text[after : offset + len(item)].strip() or len(parts) != FILLS[rule]:
        raise AnnotuneError(
            f"'{rule}' takes {FILLS[rule]} bound{'s' * (FILLS[rule] > 1)}",
            at,
            hint=f"fills: {rules}",
        )
    return Fill(rule, tuple(_expression(text, t, o, names) for _, t, o in parts))


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
        if pointee.get_canonical().kind not in _ARRAY_KINDS:
            return False
        pointee = pointee.get_canonical().get_array_element_type()


def _dtype(ctype: ci.Type, param: ci.Cursor, at: Location, hint: str) -> str:
    """The numpy dtype of a value of `ctype`; of an array's elements (the count an argument
    gives counts them, not the arrays)."""
    canonical = ctype.get_canonical()
    while canonical.kind in _ARRAY_KINDS:
        canonical = canonical.get_array_element_type().get_canonical()
    if canonical.kind in _KIND_DTYPES:
        return _KIND_DTYPES[canonical.kind]
    if canonical.kind == ci.TypeKind.RECORD:
        record = canonical.get_declaration().spelling
        if record in _RECORD_DTYPES:
            return _RECORD_DTYPES[record]
    raise AnnotuneError(
        f"parameter '{param.spelling}' has type '{param.type.spelling}', for which annotune cannot "
        f"make data (supported: pointers to and values of {_SUPPORTED})",
        at,
        hint=hint,
    )


def _declared_at(param: ci.Cursor, shown: Mapping[str, str]) -> str:
    """A hint pointing at the parameter's declaration, named as the user's files are."""
    location = param.location
    name = os.path.realpath(location.file.name)
    return f"'{param.spelling}' is declared at {shown.get(name, name)}:{location.line}:" + str(
        location.column
    )


# --- __constant__ memory and textures -----------------------------------------------------------

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
class KernelConstant:
    """A namespace-scope `__constant__` variable of the user's files that its declaration leaves
    uninitialised: the host sets it (`cudaMemcpyToSymbol`), and kernel mode never runs the host,
    so the runner fills it before each configuration's first launch. Every such variable of the
    translation unit is taken as one the kernel may read.

    `symbol` is its name in the cubin; `dtype` its elements' numpy dtype; `count` how many
    elements the declaration holds as parsed (the cubin's size decides at run time: an array may
    be sized by a knob). `fill` is the user's rule (`constants(NAME = RULE)`), None for the
    default one. `why` says why it cannot be filled ("" when it can): then the cubin's zeros stay.
    """

    name: str  # qualified as C++ names it from the file: "ns::coef"
    symbol: str
    dtype: str
    ctype: str
    count: int
    location: Location
    fill: Fill | None = None
    why: str = ""

    def launched(self, values: Mapping[str, Number]) -> LaunchConstant:
        """The fill's bounds evaluated for one configuration; LaunchError as `KernelSpec.launch`."""
        fill = None
        if self.fill is not None:
            what = f"the fill of __constant__ '{self.name}'"
            bounds = tuple(_value(b, values, what) for b in self.fill.bounds)
            fill = _checked_fill(self, self.count, bounds, what)
        return LaunchConstant(self.name, self.symbol, self.dtype, fill)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "symbol": self.symbol,
            "type": self.ctype,
            **({"fill": self.fill.to_json()} if self.fill is not None else {}),
            **({"unfilled": self.why} if self.why else {}),
            "location": self.location.to_json(),
        }


@dataclass(frozen=True)
class LaunchConstant:
    """A `__constant__` variable to fill for one configuration: its symbol, element type and
    fill rule with its bounds' values (None: the default rule)."""

    name: str
    symbol: str
    dtype: str
    fill: tuple[str, tuple[Number, ...]] | None = None


@dataclass(frozen=True)
class _Variables:
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


def _variables(tu: ci.TranslationUnit, parsed: ParsedSource) -> _Variables:
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
        name = _scope(cursor) + cursor.spelling
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
    return _Variables(dict(sorted(constants.items())), initialised, others)


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
    while element.get_canonical().kind in _ARRAY_KINDS:
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
    dtype = _KIND_DTYPES.get(canonical.kind, "")
    if canonical.kind == ci.TypeKind.RECORD:
        dtype = _RECORD_DTYPES.get(canonical.get_declaration().spelling, "")
    for error_at, message in _error_diagnostics(cursor):
        if cursor.extent.start.offset <= error_at < cursor.extent.end.offset:
            why = why or f"libclang cannot tell its type ({message})"
    if canonical.kind == ci.TypeKind.POINTER:
        why = why or "a pointer, to memory only the host knows"
    elif not dtype:
        why = why or f"annotune makes data only of {_SUPPORTED}"
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


def _refuse_textures(kernel: ci.Cursor, parsed: ParsedSource) -> None:
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


def _with_constants(
    spec: KernelSpec,
    declaration: _Declaration,
    variables: _Variables,
    names: _Names,
) -> KernelSpec:
    """The spec with the `__constant__` variables to fill, each with the rule its
    `constants(...)` clause gives."""
    rules = _constant_rules(declaration, variables, names)
    constants = tuple(replace(c, fill=rules.get(name)) for name, c in variables.constants.items())
    return replace(spec, constants=constants)


def _constant_rules(
    declaration: _Declaration, variables: _Variables, names: _Names
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
        rules[name] = _fill(text, item[match.end() :], offset + match.end(), "in", names)
    return rules


# --- macros -------------------------------------------------------------------------------------


def _numeric_macros(parsed: ParsedSource, params: set[str]) -> dict[str, Expression]:
    """Object-like macros whose value is a C expression over numbers, params and such macros.

    The first definition of a name wins (as in the front end); a macro whose value is anything
    else (a string, a cast, a call), or that uses itself, is left out, so naming it in the pragma
    is an unknown name. Each body is parsed once and the macros are resolved in dependency
    order (a macro may use one defined after it): linear, where retrying every unresolved body
    until nothing changes is quadratic in a header of thousands of macros.
    """
    bodies: dict[str, str] = {}
    for source in parsed.files:
        for directive in source.directives:
            words = directive.words
            if directive.name != "define" or not words or words[0].kind == "punctuation":
                continue
            name = words[0].text
            function_like = (
                len(words) > 1 and words[1].text == "(" and words[1].start == words[0].end
            )
            if function_like or name in params or name in RESERVED_NAMES or len(words) < 2:
                continue
            bodies.setdefault(name, " ".join(w.text for w in words[1:]))
    candidates: dict[str, Expression] = {}
    for name, body in bodies.items():
        try:
            candidates[name] = parse_expression(body, _Anything())  # type: ignore[arg-type]
        except ExpressionError:
            continue
    return _resolve(candidates, params)


def _resolve(candidates: Mapping[str, Expression], params: set[str]) -> dict[str, Expression]:
    """The candidates whose names all resolve to parameters or resolved candidates, each after
    the macros it uses, otherwise in definition order (Kahn's algorithm over a heap)."""
    order = {name: i for i, name in enumerate(candidates)}
    waiting: dict[str, set[str]] = {}
    users: dict[str, list[str]] = {}
    ready: list[tuple[int, str]] = []
    for name, expr in candidates.items():
        needs = {n for n in expr.names if n not in params}
        if not needs <= candidates.keys():
            continue  # uses a name that is neither: never numeric
        waiting[name] = needs
        for need in needs:
            users.setdefault(need, []).append(name)
        if not needs:
            heapq.heappush(ready, (order[name], name))
    macros: dict[str, Expression] = {}
    while ready:
        _, name = heapq.heappop(ready)
        macros[name] = candidates[name]
        for user in users.get(name, ()):
            needs = waiting[user]
            needs.discard(name)
            if not needs:
                heapq.heappush(ready, (order[user], user))
    return macros


def _macros_needed(
    used: set[str], macros: Mapping[str, Expression]
) -> tuple[tuple[str, Expression], ...]:
    """The macros reachable from `used`, in resolution order (each after those it uses)."""
    needed, stack = set(), [n for n in used if n in macros]
    while stack:
        name = stack.pop()
        if name not in needed:
            needed.add(name)
            stack += [n for n in macros[name].names if n in macros]
    return tuple((name, expr) for name, expr in macros.items() if name in needed)


# --- the kernels' definitions -------------------------------------------------------------------


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
        args=[os.fsencode(a) for a in _cuda_args(include_dirs, defines)],
        unsaved_files=[(SHIM_PATH, CUDA_SHIM + _SIGNATURE_SHIM)],
        options=ci.TranslationUnit.PARSE_INCOMPLETE | _KEEP_GOING,
    )


def _cuda_args(include_dirs: Iterable[str], defines: Iterable[str]) -> list[str]:
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


def _kernel_cursor(
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


# --- template kernels ---------------------------------------------------------------------------

_FORMALS = (
    ci.CursorKind.TEMPLATE_TYPE_PARAMETER,
    ci.CursorKind.TEMPLATE_NON_TYPE_PARAMETER,
    ci.CursorKind.TEMPLATE_TEMPLATE_PARAMETER,
)
_INSTANCE = "annotune_kernel_instance"
_TEMPLATED = "type-parameter-"  # how libclang spells a template's type parameter in a type


@dataclass(frozen=True)
class _Reparse:
    """How the main file was parsed, to parse it again with one line more: the parameter types
    of a template kernel's instance (`T *` as `float *`) are what libclang makes of
    `decltype(&k<float, 1>)` at its end."""

    parsed: ParsedSource
    include_dirs: tuple[str, ...]
    defines: tuple[str, ...]


def _template_args(
    declaration: _Declaration, cursor: ci.Cursor, names: _Names
) -> tuple[TemplateArg, ...]:
    """The instance a declaration names, checked against the kernel's template parameters: a
    type is kept as written, a number is an expression over the knobs and macros."""
    name, template = declaration.name, declaration.template
    if cursor.kind != ci.CursorKind.FUNCTION_TEMPLATE:
        if template is not None:
            raise AnnotuneError(f"'{name}' is not a template: its name takes no <...>", template.at)
        return ()
    formals = [child for child in cursor.get_children() if child.kind in _FORMALS]
    declared = "template <" + ", ".join(_tokens(formal) for formal in formals) + ">"
    if template is None:
        example = ", ".join(
            "float" if f.kind == ci.CursorKind.TEMPLATE_TYPE_PARAMETER else "BLOCK"
            for f in formals
            if not _has_default(f)
        )
        raise AnnotuneError(
            f"'{name}' is a template kernel: name the instance to tune, e.g. {name}<{example}>",
            declaration.where,
            hint=f"it is declared {declared}; a number may be a knob or an expression of knobs",
        )
    items = template.items
    if len(items) > len(formals):
        text, item, offset = items[len(formals)]
        raise AnnotuneError(
            f"too many template arguments: '{name}' takes {len(formals)} ({declared})",
            text.location(offset + len(item) - len(item.lstrip())),
        )
    for formal in formals[len(items) :]:
        if not _has_default(formal):
            raise AnnotuneError(
                f"no template argument for '{formal.spelling}' of '{name}' ({declared})",
                template.at,
            )
    args = []
    for (text, item, offset), formal in zip(items, formals, strict=False):
        if not item.strip():
            raise AnnotuneError("empty template argument", text.location(offset))
        if formal.kind == ci.CursorKind.TEMPLATE_NON_TYPE_PARAMETER and _uses_knobs(item, names):
            expr = _expression(text, item, offset, names)
            boolean = formal.type.get_canonical().kind == ci.TypeKind.BOOL
            args.append(TemplateArg(" ".join(item.split()), expr, boolean, number=True))
        else:
            number = formal.kind == ci.CursorKind.TEMPLATE_NON_TYPE_PARAMETER
            args.append(TemplateArg(" ".join(item.split()), number=number))
    return tuple(args)


def _uses_knobs(item: str, names: _Names) -> bool:
    """Whether a number among a template's arguments is ours to evaluate: an expression over
    knobs and numeric macros (`BLOCK * 2`). One that names neither (an enumerator, `sizeof(T)`,
    `Traits::size`) is C++'s, passed as written, checked by the instance's parse."""
    try:
        expr = parse_expression(item.strip(), _Anything())  # type: ignore[arg-type]
    except ExpressionError:
        return False
    return not expr.names or any(name in names for name in expr.names)


def _tokens(cursor: ci.Cursor) -> str:
    return " ".join(token.spelling for token in cursor.get_tokens())


def _has_default(formal: ci.Cursor) -> bool:
    return any(token.spelling == "=" for token in formal.get_tokens())


def _scope(cursor: ci.Cursor) -> str:
    """The named namespaces around a kernel, as a qualifier: "ns::inner::" ("" for none; an
    anonymous namespace's names are reachable from its file without one)."""
    names = []
    parent = cursor.semantic_parent
    while parent is not None and parent.kind != ci.CursorKind.TRANSLATION_UNIT:
        if parent.kind == ci.CursorKind.NAMESPACE and parent.spelling:
            names.append(parent.spelling)
        parent = parent.semantic_parent
    return "".join(f"{name}::" for name in reversed(names))


def _instance_types(
    reparse: _Reparse,
    qualified: str,
    template: tuple[TemplateArg, ...],
    declaration: _Declaration,
    declared: list[ci.Type],
) -> tuple[list[ci.Type], tuple[TemplateArg, ...]]:
    """The parameter types of the instance, and its arguments with each type's canonical
    spelling: the main file parsed again with typedefs of the instance's type and of each
    type argument at its end, numbers written as 1 where they use a knob (the parameter types
    of a kernel worth tuning do not depend on its block size).

    Where libclang refuses the instance, it may be right (a typo) or blind (a header it did not
    find, as `-nostdinc` leaves cub's): parameters whose types do not depend on the template
    keep their `declared` types, and the compiler judges the instance; a parameter that does
    depend on it makes the refusal an error at the declaration, in libclang's words."""
    written = ", ".join(
        arg.text if arg.expr is None or not arg.expr.names else ("true" if arg.boolean else "1")
        for arg in template
    )
    main = reparse.parsed.main
    lines = main.data.count(b"\n") + 1
    line = f"\ntypedef decltype(&{qualified}<{written}>) {_INSTANCE};\n"
    line += "".join(
        f"typedef {arg.text} {_INSTANCE}_{index};\n"
        for index, arg in enumerate(template)
        if not arg.number
    )
    tu = ci.Index.create().parse(
        os.fsencode(main.path),
        args=[os.fsencode(a) for a in _cuda_args(reparse.include_dirs, reparse.defines)],
        unsaved_files=[
            (os.fsencode(main.path), main.data + line.encode()),
            (SHIM_PATH, CUDA_SHIM + _SIGNATURE_SHIM),
        ],
        options=ci.TranslationUnit.PARSE_INCOMPLETE | _KEEP_GOING,
    )
    main_file = os.path.realpath(main.path)
    refused = next(
        (
            diagnostic.spelling
            for diagnostic in tu.diagnostics
            if diagnostic.severity >= ci.Diagnostic.Error
            and diagnostic.location.file is not None
            and os.path.realpath(file_name(diagnostic.location.file)) == main_file
            and diagnostic.location.line > lines
        ),
        "",
    )
    typedefs = {
        cursor.spelling: cursor.underlying_typedef_type.get_canonical()
        for cursor in tu.cursor.get_children()
        if cursor.kind == ci.CursorKind.TYPEDEF_DECL and cursor.spelling.startswith(_INSTANCE)
    }
    pointer = typedefs.get(_INSTANCE)
    if not refused and pointer is not None and pointer.kind == ci.TypeKind.POINTER:
        function = pointer.get_pointee().get_canonical()
        if function.kind == ci.TypeKind.FUNCTIONPROTO:
            typed = tuple(
                arg
                if arg.number or f"{_INSTANCE}_{index}" not in typedefs
                else replace(arg, canonical=typedefs[f"{_INSTANCE}_{index}"].spelling)
                for index, arg in enumerate(template)
            )
            return list(function.argument_types()), typed
    if not any(_TEMPLATED in ptype.get_canonical().spelling for ptype in declared):
        return declared, template
    said = f"is not an instance C++ accepts: {refused}" if refused else "cannot be typed"
    raise AnnotuneError(
        f"{qualified}<{written}> {said}",
        declaration.template.at if declaration.template else declaration.where,
        hint="a header libclang did not find may be why: add its directory to the config's "
        "include = [...]",
    )


def _device_mangled_name(cursor: ci.Cursor) -> str:
    """The kernel's symbol in the cubin.

    Parsed host-side, libclang mangles the host stub (`_Z21__device_stub__jacobiPf`); the device
    symbol is the same with the stub's prefix gone (`_Z6jacobiPf`). `extern "C"` names are
    unmangled either way.
    """
    mangled, name = cursor.mangled_name, cursor.spelling
    stub = f"{len(_STUB) + len(name)}{_STUB}{name}"
    return mangled.replace(stub, f"{len(name)}{name}", 1)


def _error_diagnostics(cursor: ci.Cursor) -> list[tuple[int, str]]:
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
