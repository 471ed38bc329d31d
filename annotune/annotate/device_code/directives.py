"""Preprocessor lines in the slice: the directives that still act when the declaration around
them is blanked (kept), the `#include`s NVRTC cannot follow and annotune's own pragmas
(blanked whole), and whether a user file includes a header that brings libcu++."""

from __future__ import annotations

import os

from annotune.annotate.device_code.preludes import LIBCUXX_FREE, is_device_header
from annotune.annotate.device_code.records import Span
from annotune.annotate.source import ParsedSource, SourceFile

# Directives that still act when the declaration around them is blanked.
_KEPT_DIRECTIVES = frozenset(
    {"define", "undef", "if", "ifdef", "ifndef", "elif", "elifdef", "elifndef", "else", "endif"}
    | {"error", "warning", "line"}
)


def includes_libcuxx(parsed: ParsedSource) -> bool:
    """Whether a user file includes a toolkit header that brings libcu++'s <cstdint> (any
    device header but `LIBCUXX_FREE`'s), in a branch taken or not: a variant may take it."""
    for source in parsed.files:
        for directive in source.directives:
            if directive.name not in ("include", "include_next") or not directive.words:
                continue
            name, _ = _header_name(source, directive.words)
            if name is not None and is_device_header(name) and name not in LIBCUXX_FREE:
                return True
    return False


def kept_directive_lines(source: SourceFile) -> list[tuple[int, int]]:
    """The first and last line of each directive that must survive a blanked declaration."""
    return [
        (source.location(d.hash_token.start).line, source.location(d.end).line)
        for d in source.directives
        if d.name in _KEPT_DIRECTIVES
    ]


def around(span: Span, kept: list[tuple[int, int]]) -> list[Span]:
    """`span` less the whole lines of the kept directives inside it."""
    first, start, last, end = span
    pieces: list[Span] = []
    at = (first, start)
    for top, bottom in kept:
        if first < top and bottom < last:
            pieces.append((*at, top, 1))
            at = (bottom + 1, 1)
    pieces.append((*at, last, end))
    return [p for p in pieces if p[:2] < p[2:]]


def merged_spans(spans: list[Span]) -> list[Span]:
    merged: list[Span] = []
    for span in sorted(spans):
        if merged and span[:2] <= merged[-1][2:]:
            merged[-1] = (*merged[-1][:2], *max(merged[-1][2:], span[2:]))
        else:
            merged.append(span)
    return merged


def host_directives(parsed: ParsedSource, source: SourceFile) -> list[Span]:
    """The whole lines of each `#include` NVRTC cannot follow (a header that is neither the
    user's, found by the front end, nor annotune's timing header, nor a device header) and of
    annotune's own pragmas (which NVRTC would warn about)."""
    missing = {(where.file, where.line) for where, _ in parsed.missing_local_includes}
    spans: list[Span] = []
    for directive in source.directives:
        line = source.location(directive.hash_token.start).line
        last = source.location(directive.end).line
        if (
            directive.name == "pragma"
            and directive.words[:1]
            and directive.words[0].text == "annotune"
        ):
            spans.append((line, 1, last + 1, 1))
        if directive.name not in ("include", "include_next") or not directive.words:
            continue
        name, quoted = _header_name(source, directive.words)
        if name is None or (source.path, line) in parsed.includes:
            continue
        if os.path.basename(name) == "annotune_timing.h" or is_device_header(name):
            continue
        # A quoted name the front end neither found nor missed lies in a skipped branch:
        # it may be a local header under other flags.
        if not quoted or (source.path, line) in missing:
            spans.append((line, 1, last + 1, 1))
    return spans


def _header_name(source: SourceFile, words: tuple) -> tuple[str | None, bool]:
    """The header an `#include` names and whether it is quoted; None for a macro's name."""
    opening = words[0]
    if opening.text == "<":
        closing = next((w for w in words if w.text == ">"), None)
        if closing is None:
            return None, False
        return source.slice(opening.end, closing.start).strip(), False
    if opening.kind == "literal" and opening.text.startswith('"'):
        return opening.text[1:-1], True
    return None, False
