"""`annotune lift`: a one-time rewrite of the user's source so that `-D` reaches every tunable.

A tuned header (`nvcc -include tuned.h`) or `-DNAME=V` only takes effect where the source lets a
macro defined before it win. Two forms do not:

- an unguarded `#define NAME 4 // @tune ...`: `-D` collides with it. Lifting wraps it, unchanged,
  in `#ifndef NAME` / `#endif`;
- a number literal inside a pragma, `#pragma unroll 4 // @tune(UNROLL) values(1, 2, 4)`. Lifting
  turns it into a guarded `#define UNROLL 4 // @tune values(1, 2, 4)` just above the pragma and
  writes the pragma so that the compiler expands the macro. gcc (and clang) macro-expand the
  clauses of `#pragma acc` and `#pragma omp`, so there the literal is simply replaced by NAME.
  nvcc does not expand `#pragma unroll NAME` (it reports an undefined identifier), but it does
  expand the argument of a two-level `_Pragma` macro, so other pragmas become
  `ANNOTUNE_PRAGMA(unroll UNROLL)`, with that helper macro defined once near the file's top.

Only byte ranges that the front end located are edited; everything else, line endings included,
is kept byte for byte. Lifting a lifted file changes nothing.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path

from annotune.annotate import read_problem_and_source
from annotune.annotate.knobs import is_annotation
from annotune.annotate.problem import TunableParam
from annotune.annotate.source import Directive, SourceFile, Token
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.files import replace_atomically
from annotune.core.inputs import SOURCE, read_input

HELPER = "ANNOTUNE_PRAGMA"

# Variadic, so that a pragma with top-level commas is still one macro argument.
_HELPER_LINES = (
    f"#ifndef {HELPER} // from annotune lift: a pragma whose numbers are macros",
    f"#define {HELPER}_(...) _Pragma(#__VA_ARGS__)",
    f"#define {HELPER}(...) {HELPER}_(__VA_ARGS__)",
    "#endif",
)

# Pragmas whose clauses gcc and clang macro-expand (DESIGN.md, "Facts checked").
_EXPANDING_PRAGMAS = ("acc", "omp")


@dataclass(frozen=True)
class Lifted:
    """One tunable made settable: "guarded" (its #define wrapped) or "literal" (a pragma's)."""

    name: str
    action: str
    location: Location


@dataclass(frozen=True)
class FileLift:
    """One of the user's files before and after lifting (bytes: offsets and encodings stay)."""

    path: str  # as shown to the user
    before: bytes
    after: bytes

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        """A unified diff with git's a/ b/ prefixes, so `patch -p1` applies it."""
        if not self.changed:
            return ""
        old = self.before.decode("utf-8", errors="replace").splitlines(keepends=True)
        new = self.after.decode("utf-8", errors="replace").splitlines(keepends=True)
        lines = difflib.unified_diff(old, new, f"a/{self.path}", f"b/{self.path}")
        return "".join(
            line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
            for line in lines
        )


@dataclass(frozen=True)
class LiftPlan:
    """What lifting a source does to it and its local headers; nothing is written yet."""

    files: tuple[FileLift, ...]
    lifted: tuple[Lifted, ...]

    @property
    def changed(self) -> bool:
        return any(f.changed for f in self.files)

    def diff(self) -> str:
        return "".join(f.diff() for f in self.files)

    def to_json(self) -> dict:
        return {
            "files": [{"file": f.path, "changed": f.changed} for f in self.files],
            "lifted": [{"name": item.name, "action": item.action} for item in self.lifted],
        }


@dataclass(frozen=True)
class _Edit:
    """Replace bytes [start, end) of a file by `text` (an insertion when start == end)."""

    start: int
    end: int
    text: bytes


def plan_lift(source: Path, *, config_path: Path | None = None) -> LiftPlan:
    """The rewrite of `source` and its local headers that lets `-D` set every tunable.

    Raises AnnotuneError, located, for every mistake in the annotations (as `scan` does).
    """
    problem, parsed = read_problem_and_source(source, config_path=config_path)
    edits: dict[str, list[_Edit]] = {f.path: [] for f in parsed.files}
    lifted: list[Lifted] = []
    pragmas: dict[tuple[str, int], list[TunableParam]] = {}
    for param in problem.params:
        if param.guarded or param.value_span is None or param.declaration:
            continue  # a C declaration is no directive: `build --shadow-dir` sets it
        file = parsed.file(param.value_span.file)
        directive = _directive_at(file, param.value_span.start)
        if param.origin == "literal":
            pragmas.setdefault((file.path, directive.hash_token.start), []).append(param)
            continue
        edits[file.path].extend(_guard_define(file, directive, param.name))
        lifted.append(Lifted(param.name, "guarded", param.location))
    needs_helper: set[str] = set()
    for (path, hash_start), params in pragmas.items():
        file = parsed.file(path)
        directive = _directive_at(file, hash_start)
        edit, expands = _lift_pragma(file, directive, params)
        edits[path].append(edit)
        lifted.extend(Lifted(p.name, "literal", p.location) for p in params)
        if not expands:
            needs_helper.add(path)
    for path in needs_helper:
        helper = _helper_edit(parsed.file(path), edits[path])
        if helper is not None:
            edits[path].insert(0, helper)
    files = tuple(FileLift(f.path, f.data, _apply(f.data, edits[f.path])) for f in parsed.files)
    return LiftPlan(files, tuple(lifted))


def write_lift(plan: LiftPlan) -> list[str]:
    """Write every changed file atomically (keeping its mode); the paths written.

    If any file changed since it was planned, nothing is written: the edits were computed for
    other bytes.
    """
    changed = [file for file in plan.files if file.changed]
    for file in changed:
        where = Location(file.path, 1, 1)
        current = read_input(Path(file.path), SOURCE)
        if current != file.before:
            raise AnnotuneError(
                "file changed while annotune lift was reading it; nothing written",
                where,
                hint="run annotune lift again",
            )
    for file in changed:
        try:  # through a symbolic link to the file it names, which stays a link
            replace_atomically(Path(os.path.realpath(file.path)), file.after)
        except OSError as error:
            raise AnnotuneError(
                f"cannot write file: {error.strerror}", Location(file.path, 1, 1)
            ) from None
    return [file.path for file in changed]


def _directive_at(file: SourceFile, offset: int) -> Directive:
    return next(d for d in file.directives if d.hash_token.start <= offset <= d.end)


# --- byte-level helpers -------------------------------------------------------------------------


def _newline(data: bytes) -> bytes:
    """The file's own line ending, for the lines we add."""
    crlf = data.count(b"\r\n")
    return b"\r\n" if crlf and 2 * crlf >= data.count(b"\n") else b"\n"


def _line_start(data: bytes, offset: int) -> int:
    return data.rfind(b"\n", 0, offset) + 1


def _content_end(data: bytes, offset: int) -> int:
    """Where the line holding `offset` ends, before its `\\n` or `\\r\\n`."""
    newline = data.find(b"\n", offset)
    if newline < 0:
        return len(data)
    return newline - 1 if newline > 0 and data[newline - 1] == 0x0D else newline


def _next_line_start(data: bytes, offset: int) -> int:
    newline = data.find(b"\n", offset)
    return len(data) if newline < 0 else newline + 1


def _blanks_before(data: bytes, offset: int) -> int:
    """Where the spaces and tabs just before `offset` start."""
    return len(data[:offset].rstrip(b" \t"))


def _indent(file: SourceFile, directive: Directive) -> bytes:
    return file.data[
        _line_start(file.data, directive.hash_token.start) : directive.hash_token.start
    ]


def _directive_lines(directive: Directive, comments: list[Token]) -> tuple[int, int]:
    """Offsets of the first and last character of a directive with the given comments."""
    first = min([directive.hash_token.start, *(c.start for c in comments)])
    last = max([directive.end, *(c.end for c in comments)])
    return first, last


def _apply(data: bytes, edits: list[_Edit]) -> bytes:
    pieces = []
    cursor = 0
    for edit in sorted(edits, key=lambda e: (e.start, e.end)):  # stable: helper first
        if edit.start < cursor:
            raise AssertionError(f"overlapping lift edits at byte {edit.start}")
        pieces += [data[cursor : edit.start], edit.text]
        cursor = edit.end
    pieces.append(data[cursor:])
    return b"".join(pieces)


def _rewrite(data: bytes, start: int, end: int, edits: list[_Edit]) -> bytes:
    """Bytes [start, end) with the edits that fall inside that range applied."""
    inside = [
        _Edit(e.start - start, e.end - start, e.text)
        for e in edits
        if start <= e.start and e.end <= end
    ]
    return _apply(data[start:end], inside)


# --- the rewrites -------------------------------------------------------------------------------


def _guard_define(file: SourceFile, directive: Directive, name: str) -> list[_Edit]:
    """`#ifndef NAME` above the define (and above an annotation on the line over it, which must
    stay next to it), `#endif` after its last line (continuations and a trailing block comment
    included)."""
    data = file.data
    hash_start = directive.hash_token.start
    kept = [c for c in directive.comments if c.start > hash_start or is_annotation(c)]
    first, last = _directive_lines(directive, kept)
    indent = _indent(file, directive)
    newline = _newline(data)
    start = _line_start(data, first)
    end = _content_end(data, last)
    return [
        _Edit(start, start, indent + b"#ifndef " + name.encode() + newline),
        _Edit(end, end, newline + indent + b"#endif"),
    ]


def _lift_pragma(
    file: SourceFile, directive: Directive, params: list[TunableParam]
) -> tuple[_Edit, bool]:
    """The guarded defines plus the rewritten pragma, and whether the pragma itself expands.

    All literals of one pragma are handled in one edit; their `@tune` comments move to the
    defines (a pragma left with `@tune(NAME)` but no literal would be an error on rescan).
    """
    data = file.data
    annotations = [c for c in directive.comments if is_annotation(c)]
    first, last = _directive_lines(directive, annotations)
    start = _line_start(data, first)
    end = _content_end(data, last)
    indent = _indent(file, directive)
    newline = _newline(data)
    block_comment = any(c.text.startswith("/*") for c in annotations)

    lines = []
    for param in sorted(params, key=lambda p: p.value_span.start):
        value = data[param.value_span.start : param.value_span.end]
        note = f"@tune {param.domain}".encode()
        note = b"/* " + note + b" */" if block_comment else b"// " + note
        name = param.name.encode()
        lines += [
            indent + b"#ifndef " + name,
            indent + b"#define " + name + b" " + value + b" " + note,
            indent + b"#endif",
        ]

    edits = [_Edit(p.value_span.start, p.value_span.end, p.name.encode()) for p in params]
    edits += [_Edit(_blanks_before(data, c.start), c.end, b"") for c in annotations]
    hash_start = directive.hash_token.start
    words = directive.words
    expands = words[0].text in _EXPANDING_PRAGMAS
    if expands:
        pragma = _rewrite(data, hash_start, end, edits).rstrip(b" \t")
    else:
        body = _rewrite(data, words[0].start, words[-1].end, edits)
        tail = _rewrite(data, words[-1].end, end, edits).rstrip(b" \t")
        pragma = HELPER.encode() + b"(" + body + b")" + tail
    lines.append(indent + pragma)
    return _Edit(start, end, newline.join(lines)), expands


def _helper_edit(file: SourceFile, edits: list[_Edit]) -> _Edit | None:
    """The ANNOTUNE_PRAGMA definitions, once, at the top level of the file.

    They go after a leading comment block and after `#pragma once` or an include guard, but
    never below the first other edit, so they sit outside any `#if` a lifted pragma is in.
    None when the file already defines the helper (a file lifted before).
    """
    if any(d.name == "define" and d.words and d.words[0].text == HELPER for d in file.directives):
        return None
    data = file.data
    first_code = next(t for t in file.tokens if t.kind != "comment")
    position = _line_start(data, first_code.start)
    index = next(
        (i for i, d in enumerate(file.directives) if d.hash_token == first_code),
        len(file.directives),
    )
    head = [(d.name, [w.text for w in d.words]) for d in file.directives[index : index + 2]]
    if head[:1] == [("pragma", ["once"])]:
        position = _next_line_start(data, file.directives[index].end)
    elif _is_include_guard(head):
        position = _next_line_start(data, file.directives[index + 1].end)
    position = min([position, *(e.start for e in edits)])
    newline = _newline(data)
    text = newline.join(line.encode() for line in _HELPER_LINES) + newline
    return _Edit(position, position, text)


def _is_include_guard(head: list[tuple[str, list[str]]]) -> bool:
    """`#ifndef G` followed by `#define G` with no value."""
    if len(head) != 2 or head[0][0] != "ifndef" or len(head[0][1]) != 1:
        return False
    return head[1] == ("define", head[0][1])
