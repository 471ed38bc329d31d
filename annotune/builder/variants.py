"""The source of one configuration: `-D` flags for guarded macros, rewritten copies for the rest.

A guarded macro (`#ifndef NAME`) or a parameter with no #define is set with `-DNAME=V`, but
one that reaches the program only through its environment (`env_only_params`) gets nothing: its
values are one binary, run with different environments; nor does one only a kernel's declaration
names (`kernel_only_params`), which kernel mode passes to the kernel itself. An unguarded
`#define` or a pragma literal cannot be overridden with `-D`, so those files are copied into
the variant's directory with the default value's bytes replaced (libclang gave us their exact
spans), and so is a launch the config rewrites over knobs (`Problem.rewrites`), whose knobs get
no `-D` either; the user's files are never touched.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from annotune.annotate import Problem, TunableParam
from annotune.annotate.problem import kernel_only_params, rewrite_only_params
from annotune.annotate.summary import env_only_params
from annotune.core.command import arguments
from annotune.core.inputs import SOURCE, read_input
from annotune.core.records import Number


@dataclass(frozen=True)
class VariantSource:
    """What a compile of one configuration needs: `-D` flags and the user's files.

    `files` maps each of the user's files (the source and its local headers), relative to
    `root`, to its bytes with this configuration's values written in; `rewritten` says whether
    any file differs from the original (then all are copied together, so that every quoted
    include finds the copy). `main` is the source to compile, relative to `root`.
    """

    params: dict[str, Number]
    defines: tuple[str, ...]
    files: dict[str, bytes]
    rewritten: bool
    root: Path
    main: str

    def digest(self) -> str:
        """A hash of everything that defines this variant's text."""
        h = hashlib.sha256()
        for define in self.defines:
            h.update(define.encode() + b"\0")
        for name in sorted(self.files):
            h.update(os.fsencode(name) + b"\0" + hashlib.sha256(self.files[name]).digest())
        return h.hexdigest()


def source_root(problem: Problem) -> Path:
    """The directory holding the source and every local header it includes."""
    paths = [os.path.abspath(f) for f in problem.files]
    return Path(os.path.commonpath([os.path.dirname(p) for p in paths]))


def variant_source(
    problem: Problem, params: dict[str, Number], originals: dict[str, bytes] | None = None
) -> VariantSource:
    """The flags and files that build `params` (`originals` caches the files' bytes)."""
    root = source_root(problem)
    originals = originals if originals is not None else read_files(problem)
    defines: list[str] = []
    edits: dict[str, list[tuple[int, int, bytes]]] = {}
    elsewhere = env_only_params(problem) | kernel_only_params(problem)  # no -D reaches them
    elsewhere |= rewrite_only_params(problem)  # a rewritten launch (below) alone sets them
    for param in problem.params:
        if param.name in elsewhere:
            continue
        value = param.literal(params[param.name])
        if not needs_copy(param):
            defines.append(f"-D{param.name}={value}")
        else:
            for span in (param.value_span, *param.more_spans):
                edits.setdefault(span.file, []).append((span.start, span.end, value.encode()))
    if problem.rewrites:
        literals = {p.name: p.literal(params[p.name]) for p in problem.params if p.name in params}
        defaults = {p.name: p.default for p in problem.params}
        for rewrite in problem.rewrites:
            if all(params.get(n) == defaults.get(n) for n in rewrite.names):
                continue  # the code as written: the baseline is the user's program, byte for byte
            text = rewrite.text(literals).encode()
            edits.setdefault(rewrite.span.file, []).append(
                (rewrite.span.start, rewrite.span.end, text)
            )
    files: dict[str, bytes] = {}
    for file, data in originals.items():
        for start, end, text in sorted(edits.get(file, []), reverse=True):
            data = data[:start] + text + data[end:]
        files[os.path.relpath(os.path.abspath(file), root)] = data
    main = os.path.relpath(os.path.abspath(problem.source), root)
    return VariantSource(dict(params), tuple(defines), files, bool(edits), root, main)


def needs_copy(param: TunableParam) -> bool:
    """Whether only a rewritten copy sets this parameter: an unguarded `#define` or a pragma
    literal, which neither `-D` nor a forced-include header (`-include`) overrides."""
    return not param.guarded and param.value_span is not None


def header_ignored(problem: Problem, values: Mapping[str, Number | None]) -> list[TunableParam]:
    """The parameters whose value in a forced-include header (`values`, by name; None: not a
    number) the compiler would not see: those only a copy sets, at another value than the
    source's own."""
    only_rewritten = rewrite_only_params(problem)
    return [
        p
        for p in problem.params
        if (needs_copy(p) or p.name in only_rewritten)
        and p.name in values
        and values[p.name] != p.default
    ]


def read_files(problem: Problem) -> dict[str, bytes]:
    return {file: read_input(Path(file), SOURCE) for file in problem.files}


def rewritten_originals(variant: VariantSource, originals: Mapping[str, bytes]) -> set[str]:
    """The user's files whose copy in `variant` differs from them (`originals` as `read_files`
    gives them), by real path: a translation unit that reads one of these reads another value
    than the variant's."""
    return {
        os.path.realpath(file)
        for file, data in originals.items()
        if variant.files.get(os.path.relpath(os.path.abspath(file), variant.root), data) != data
    }


def under_root(variant: VariantSource, path: str) -> str | None:
    """`path` relative to the variant's root, where its copy goes; None when it lies outside."""
    relative = os.path.relpath(os.path.abspath(path), variant.root)
    return None if relative == os.pardir or relative.startswith(os.pardir + os.sep) else relative


def materialize(variant: VariantSource, directory: Path) -> Path:
    """The source file to compile: the original, or a rewritten copy under `directory`."""
    if not variant.rewritten:
        return variant.root / variant.main
    for relative, data in variant.files.items():
        target = directory / "src" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return directory / "src" / variant.main


def original_include_dir(variant: VariantSource) -> str:
    """The source's own directory, so includes that are not local copies still resolve."""
    return str(variant.root / os.path.dirname(variant.main))


_INCLUDE_KINDS = frozenset(("include_dir", "system_dir", "quote_dir", "after_dir"))


def copy_dirs(variant: VariantSource) -> list[str]:
    """The directories, relative to `root`, that hold the user's files, in the files' order."""
    return list(dict.fromkeys(os.path.dirname(name) for name in variant.files))


def copies_first(
    argv: list[str], variant: VariantSource, copies: Path, more: Iterable[str] = ()
) -> list[str]:
    """`argv` with each include directory that holds some of the user's files preceded by the
    directory of their copies under `copies`: a rewritten header is then found before its
    original however it is included (from a file in another directory, with `<...>`, through
    a `-I` of the user's command that comes before annotune's own). `more`: the directories,
    relative to `root`, of other files copied beside them (another translation unit's)."""
    dirs = dict.fromkeys([*copy_dirs(variant), *more])
    mirrors = {os.path.normpath(variant.root / d): str(copies / d) for d in dirs}
    result: list[str] = list(argv[:1])
    for argument in arguments(argv):
        mirror = None
        if argument.kind in _INCLUDE_KINDS:
            mirror = mirrors.get(os.path.normpath(os.path.join(os.getcwd(), argument.value)))
        if mirror is not None:  # the same spelling, the mirror's directory first
            flag, joined = argument.args[0], len(argument.args) == 1
            result += [flag[: -len(argument.value)] + mirror] if joined else [flag, mirror]
        result += argument.args
    return result
