"""Template kernels: the instance a declaration names (`scale<float, BLOCK>`), checked against the
kernel's template parameters, and its parameter types, read from one more parse with the
instance's typedefs at the end of the file. A number among its arguments may be a knob."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

import clang.cindex as ci

from annotune.annotate.grammar.kernel_clauses import Declaration, TemplateText
from annotune.annotate.grammar.kernel_items import Names, item_expression
from annotune.annotate.kernels.cuda_parse import SIGNATURE_SHIM, cuda_args
from annotune.annotate.kernels.records import TemplateArg
from annotune.annotate.source import CUDA_SHIM, KEEP_GOING, SHIM_PATH, ParsedSource, file_name
from annotune.core.diagnostics import AnnotuneError
from annotune.space.expressions import ANY_NAME, ExpressionError, parse_expression

_FORMALS = (
    ci.CursorKind.TEMPLATE_TYPE_PARAMETER,
    ci.CursorKind.TEMPLATE_NON_TYPE_PARAMETER,
    ci.CursorKind.TEMPLATE_TEMPLATE_PARAMETER,
)
_INSTANCE = "annotune_kernel_instance"
_TEMPLATED = "type-parameter-"  # how libclang spells a template's type parameter in a type


@dataclass(frozen=True)
class Reparse:
    """How the main file was parsed, to parse it again with one line more: the parameter types
    of a template kernel's instance (`T *` as `float *`) are what libclang makes of
    `decltype(&k<float, 1>)` at its end."""

    parsed: ParsedSource
    include_dirs: tuple[str, ...]
    defines: tuple[str, ...]


def template_args(
    declaration: Declaration, cursor: ci.Cursor, names: Names
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
            expr = item_expression(text, item, offset, names)
            boolean = formal.type.get_canonical().kind == ci.TypeKind.BOOL
            args.append(TemplateArg(" ".join(item.split()), expr, boolean, number=True))
        else:
            number = formal.kind == ci.CursorKind.TEMPLATE_NON_TYPE_PARAMETER
            args.append(TemplateArg(" ".join(item.split()), number=number))
    return tuple(args)


def _uses_knobs(item: str, names: Names) -> bool:
    """Whether a number among a template's arguments is ours to evaluate: an expression over
    knobs and numeric macros (`BLOCK * 2`). One that names neither (an enumerator, `sizeof(T)`,
    `Traits::size`) is C++'s, passed as written, checked by the instance's parse."""
    try:
        expr = parse_expression(item.strip(), ANY_NAME)
    except ExpressionError:
        return False
    return not expr.names or any(name in names for name in expr.names)


def _tokens(cursor: ci.Cursor) -> str:
    return " ".join(token.spelling for token in cursor.get_tokens())


def _has_default(formal: ci.Cursor) -> bool:
    return any(token.spelling == "=" for token in formal.get_tokens())


def instance_types(
    reparse: Reparse,
    qualified: str,
    template: tuple[TemplateArg, ...],
    declaration: Declaration,
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
        args=[os.fsencode(a) for a in cuda_args(reparse.include_dirs, reparse.defines)],
        unsaved_files=[
            (os.fsencode(main.path), main.data + line.encode()),
            (SHIM_PATH, CUDA_SHIM + SIGNATURE_SHIM),
        ],
        options=ci.TranslationUnit.PARSE_INCOMPLETE | KEEP_GOING,
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


def instance_text(template: TemplateText | None) -> str:
    """A declaration's `<...>` as one spelling ("<float, BT>"; "" for no template): each
    argument with its spaces collapsed, as C++ reads it, so `dot< double >` is `dot<double>`."""
    if template is None:
        return ""
    return "<" + ", ".join(" ".join(item.split()) for _, item, _ in template.items) + ">"
