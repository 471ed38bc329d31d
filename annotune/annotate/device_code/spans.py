"""`device_code`: the walk over the AST, then the directives, into each user file's spans."""

from __future__ import annotations

import os
from collections.abc import Iterable

import clang.cindex as ci

from annotune.annotate.device_code.declarations import declarations
from annotune.annotate.device_code.directives import (
    around,
    host_directives,
    includes_libcuxx,
    kept_directive_lines,
    merged_spans,
)
from annotune.annotate.device_code.host_library import vanished
from annotune.annotate.device_code.host_templates import instantiations
from annotune.annotate.device_code.lacking import unused_lacking
from annotune.annotate.device_code.records import DeviceCode
from annotune.annotate.device_code.walk import Walk
from annotune.annotate.kernels import parse_cuda
from annotune.annotate.source import ParsedSource


def device_code(
    parsed: ParsedSource,
    include_dirs: Iterable[str] = (),
    defines: Iterable[str] = (),
    *,
    translation_unit: ci.TranslationUnit | None = None,
) -> DeviceCode:
    """The spans of the user's files that NVRTC must not see.

    `include_dirs` and `defines` must be those the front end parsed with; `translation_unit`
    is `kernels.parse_cuda`'s parse when the caller has it (else the main file is parsed here).
    """
    if translation_unit is None:
        translation_unit = parse_cuda(parsed, include_dirs, defines)
    walk = Walk(parsed, translation_unit)
    declarations(walk, translation_unit.cursor.get_children())
    vanished(walk)
    instantiations(walk)
    unused_lacking(walk)
    spans = {}
    for source in parsed.files:
        key = os.path.abspath(source.path)
        kept = kept_directive_lines(source)
        pieces = [p for span in merged_spans(walk.found[key]) for p in around(span, kept)]
        spans[key] = tuple(merged_spans(pieces + host_directives(parsed, source)))
    return DeviceCode(spans, libcuxx=includes_libcuxx(parsed))
