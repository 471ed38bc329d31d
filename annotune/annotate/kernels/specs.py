"""Kernel mode's declarations checked into specs: every `#pragma annotune kernel` of the user's
files and every `[[file.kernel]]` of the config, read with one grammar (`annotate.grammar`),
checked against the kernel's definition (`cuda_parse`) and typed."""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace

import clang.cindex as ci

from annotune.annotate.grammar.kernel_clauses import (
    Declaration,
    DeclaredKernel,
    config_declaration,
    is_kernel_pragma,
    pragma_declaration,
)
from annotune.annotate.grammar.kernel_items import (
    Names,
    dim_expressions,
    item_expression,
    parse_tolerance,
)
from annotune.annotate.kernels.constants import namespace_variables, refuse_textures, with_constants
from annotune.annotate.kernels.cuda_parse import (
    kernel_cursor,
    kernel_definitions,
    namespace_scope,
    parse_cuda,
)
from annotune.annotate.kernels.parameters import (
    declared_at,
    device_mangled_name,
    error_diagnostics,
    kernel_argument,
)
from annotune.annotate.kernels.records import KernelSpec
from annotune.annotate.kernels.templates import (
    Reparse,
    instance_text,
    instance_types,
    template_args,
)
from annotune.annotate.macros import macros_needed, numeric_macros
from annotune.annotate.source import ParsedSource
from annotune.core.diagnostics import AnnotuneError


def declares_kernels(parsed: ParsedSource) -> bool:
    """Whether one of the user's files has a `#pragma annotune kernel` (then it is parsed again)."""
    return any(is_kernel_pragma(d) for source in parsed.files for d in source.directives)


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
        if is_kernel_pragma(directive)
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
    macros = numeric_macros(parsed, set(param_names))
    if translation_unit is None:
        translation_unit = parse_cuda(parsed, include_dirs, defines)
    kernels = kernel_definitions(translation_unit, parsed)
    variables = namespace_variables(translation_unit, parsed)
    names = Names(param_names, macros)
    reparse = Reparse(parsed, tuple(include_dirs), tuple(defines))
    read = [pragma_declaration(source, directive) for source, directive in pragmas]
    read += [config_declaration(kernel) for kernel in declared]
    specs: dict[str, KernelSpec] = {}
    for declaration in read:
        spec = _checked(declaration, names, kernels, parsed, reparse)
        spec = with_constants(spec, declaration, variables, names)
        spec = replace(spec, macros=macros_needed(set(spec.names()), macros))
        first = specs.get(spec.declared)
        if first is not None:
            where = first.location
            raise AnnotuneError(
                f"duplicate {declaration.what} for '{spec.declared}'",
                spec.location,
                hint=f"first given at {where.file}:{where.line}:{where.column}",
            )
        specs[spec.declared] = spec
    return tuple(specs.values())


def _checked(
    declaration: Declaration,
    names: Names,
    kernels: Mapping[str, list[ci.Cursor]],
    parsed: ParsedSource,
    reparse: Reparse,
) -> KernelSpec:
    """A declaration checked against the kernel's definition: its clauses' expressions, and an
    argument of the right kind for each of the kernel's parameters (the macros they use are
    the caller's to add, once the constants' fills are known too)."""
    name, where, clauses = declaration.name, declaration.where, declaration.clauses
    for required in ("grid", "block"):
        if required not in clauses:
            raise AnnotuneError(f"missing {required}(...) in the {declaration.what}", where)
    cursor = kernel_cursor(name, where, kernels, parsed)
    refuse_textures(cursor, parsed)
    params = [c for c in cursor.get_children() if c.kind == ci.CursorKind.PARM_DECL]
    template = template_args(declaration, cursor, names)
    scope = namespace_scope(cursor)
    types = [param.type for param in params]
    if template:
        types, template = instance_types(reparse, f"{scope}{name}", template, declaration, types)
    grid = dim_expressions(clauses["grid"], names)
    block = dim_expressions(clauses["block"], names)
    shared = None
    if "shared" in clauses:
        items = clauses["shared"].items
        if len(items) != 1:
            raise AnnotuneError("shared(...) takes one expression (bytes)", clauses["shared"].at)
        shared = item_expression(*items[0], names)
    args_clause = clauses.get("args")
    items = args_clause.items if args_clause is not None else ()
    if len(items) != len(params):
        raise AnnotuneError(
            f"kernel '{name}' takes {len(params)} argument{'s' * (len(params) != 1)}, "
            f"args(...) gives {len(items)}",
            args_clause.at if args_clause is not None else where,
        )
    diagnostics = error_diagnostics(cursor)
    shown = {os.path.realpath(f.path): f.path for f in parsed.files}
    args = tuple(
        kernel_argument(
            text, item, offset, param, ptype, names, diagnostics, declared_at(param, shown)
        )
        for (text, item, offset), param, ptype in zip(items, params, types, strict=True)
    )
    return KernelSpec(
        name=name,
        mangled_name="" if template else device_mangled_name(cursor),
        grid=grid,
        block=block,
        shared=shared,
        args=args,
        macros=(),
        location=where,
        template=template,
        scope=scope,
        tolerance=parse_tolerance(clauses["tolerance"]) if "tolerance" in clauses else None,
        places=tuple((clause.name, clause.at) for clause in clauses.values()),
        instance_text=instance_text(declaration.template),
    )
