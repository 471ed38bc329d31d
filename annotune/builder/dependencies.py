"""What a cached build depends on beyond its own text: the files the compiler read, the
compiler itself and the environment it ran in.

A variant's bytes and flags name its cache entry, but a compile also reads headers that hold no
tunable (a problem size in `params.h`, a header found through `-I`). So each entry records
every file it depended on with a digest of its content, and is reused only while every digest
still matches. The list comes from the compiler itself (`-MD -MF`, which gcc, g++, clang, nvcc
and nvc write in make's format) when the compiler is one known to take those flags; otherwise,
and for a compile that failed, it is what annotune knows: the variant's files and the include
directories on the command line, each directory taken as the names and contents of the
C, C++ and CUDA files directly in it (so a header added there counts too).
Every file the compiler lists is hashed, system headers included: that costs milliseconds per
batch and needs no rule for which directories are "system".

A command may compile several translation units (`{source} other.c`), and a compiler writes one
list per unit: with one `-MF` for all, each unit's list overwrites the one before. So the
builder asks for each unit's list on its own (`-M`), and the files the command names itself
(`command_files`: the other sources, objects, libraries, each `-lNAME` as every file the linker
may take for it, response files) are part of the key: they are known before any compile.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from annotune.core.command import (
    arguments,
    expand_responses,
    inputs,
    is_nvcc,
    is_source_text,
    knows_options,
    values,
)
from annotune.core.diagnostics import AnnotuneError
from annotune.core.digests import regular_file_digest
from annotune.core.inputs import SOURCE, read_input

COMPILE_ENVIRONMENT = (
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    "OBJC_INCLUDE_PATH",
    "LIBRARY_PATH",
    "COMPILER_PATH",
    "GCC_EXEC_PREFIX",
    "NVCC_PREPEND_FLAGS",
    "NVCC_APPEND_FLAGS",
    "NVCC_CCBIN",
    "CUDA_HOME",
    "CUDA_PATH",
)
"""Environment variables that change what gcc, clang or nvcc compile: part of every key."""

def tracks_dependencies(executable: str) -> bool:
    """Whether the compiler is one that writes its dependency list with `-MD -MF FILE`."""
    return knows_options(executable)


def dependency_flags(path: Path) -> list[str]:
    """Appended to a compile: the dependency list, written as a side effect of compiling."""
    return ["-MD", "-MF", str(path)]


def read_dependency_file(path: Path) -> list[str] | None:
    """The prerequisites of a make rule as the compiler wrote it (None if there is none).

    Relative paths are made absolute against the working directory the compiler ran in (ours),
    without normalising `..`, which could lead through a symbolic link somewhere else.
    """
    try:
        text = path.read_text(errors="surrogateescape")
    except OSError:
        return None
    words = _make_words(text)
    colon = next((i for i, word in enumerate(words) if word.endswith(":")), None)
    if colon is None:
        return None
    return [os.path.join(os.getcwd(), word) for word in words[colon + 1 :]]


def _make_words(text: str) -> list[str]:
    """Split a make rule at blanks, undoing the compiler's escapes (`\\ `, `\\#`, `$$`) and
    joining continued lines."""
    words: list[str] = []
    word: list[str] = []
    i = 0
    while i < len(text):
        char, following = text[i], text[i + 1 : i + 2]
        if char == "\\" and following in (" ", "#"):
            word.append(following)
            i += 2
            continue
        if char == "$" and following == "$":
            word.append("$")
            i += 2
            continue
        if char.isspace() or (char == "\\" and following == "\n"):
            if word:
                words.append("".join(word))
                word = []
            i += 2 if char == "\\" else 1
            continue
        word.append(char)
        i += 1
    if word:
        words.append("".join(word))
    return words


_DIRECTORY_KINDS = frozenset(("include_dir", "quote_dir", "system_dir", "after_dir"))
_FILE_KINDS = frozenset(("forced_include", "forced_macros"))


def command_inputs(argv: tuple[str, ...]) -> list[str]:
    """The include directories and forced includes a compile command names itself, absolute.

    Arguments with placeholders are left out: those are annotune's own and are known anyway.
    """
    return [
        os.path.join(os.getcwd(), argument.value)
        for argument in arguments(argv)
        if argument.kind in _DIRECTORY_KINDS | _FILE_KINDS and "{" not in argument.value
    ]


@dataclass(frozen=True)
class CommandInputs:
    """The files a compile command names for the compiler to read, as they are when a batch
    starts. `files`, absolute: the sources, objects and libraries, the files the linker may take
    for each `-lNAME` (`libNAME.so`, `libNAME.a` in each `-L` directory, then LIBRARY_PATH's),
    the response files; a file not there is a dependency too (its appearing is a change).
    `responses`: each response file's arguments (None when it cannot be read: the compiler
    then says why), by path."""

    files: tuple[str, ...]
    responses: dict[str, tuple[str, ...] | None]

    def expand(self, argv: Sequence[str]) -> list[str]:
        """`argv` with each response file (`@FILE`, nvcc's `--options-file`) replaced by the
        arguments it holds: what the compiler reads, every translation unit in sight."""
        return expand_responses(argv, self.responses.get)


def command_files(argv: Sequence[str]) -> CommandInputs:
    """`argv`'s `CommandInputs` (placeholders, annotune's own, are left out)."""
    responses: dict[str, tuple[str, ...] | None] = {}

    def read(path: str) -> tuple[str, ...] | None:
        if path not in responses:
            responses[path] = _response_words(path)
        return responses[path]

    expanded = expand_responses(argv, read)
    files = list(responses)
    files += [os.path.join(os.getcwd(), found.value) for found in inputs(expanded)]
    directories = [d for d in values(expanded, "library_dir") if "{" not in d]
    directories += [d for d in os.environ.get("LIBRARY_PATH", "").split(os.pathsep) if d]
    for library in values(expanded, "library"):
        if "{" in library:
            continue
        names = (
            [library[1:]] if library.startswith(":") else [f"lib{library}.so", f"lib{library}.a"]
        )
        files += [os.path.join(os.getcwd(), d, name) for d in directories for name in names]
    return CommandInputs(tuple(dict.fromkeys(files)), responses)


def _response_words(path: str) -> tuple[str, ...] | None:
    """A response file's arguments, split at blanks with quotes and backslashes as gcc reads
    them; None when it cannot be read."""
    try:
        text = read_input(Path(path), SOURCE).decode(errors="surrogateescape")
        return tuple(shlex.split(text))
    except (AnnotuneError, ValueError):
        return None


class Digests:
    """Content digests of dependencies, each path read at most once while one batch builds.

    A file's digest is its SHA-256 (`core.digests`); a directory's covers the names and
    contents of the C, C++ and CUDA files directly in it; a path with neither has the digest
    None (no file there, or one that is no regular file: a FIFO is never waited on). `memo`,
    kept by the builder from batch to batch, holds the digests of files that had settled when
    read (`_SETTLED`), by their status: a library of hundreds of MiB the command links is then
    read again only once it changed, not once per batch.
    """

    def __init__(self, memo: dict[tuple[object, ...], bytes] | None = None) -> None:
        self._known: dict[str, str | None] = {}
        self._memo = memo if memo is not None else {}

    def __call__(self, path: str) -> str | None:
        if path not in self._known:
            self._known[path] = self._digest(path)
        return self._known[path]

    def of(self, paths: list[str]) -> dict[str, str | None]:
        return {path: self(path) for path in dict.fromkeys(paths)}

    def unchanged(self, recorded: dict[str, str | None]) -> bool:
        return all(self(path) == digest for path, digest in recorded.items())

    def _digest(self, path: str) -> str | None:
        try:
            if os.path.isdir(path):
                h = hashlib.sha256(b"directory\0")
                for name in sorted(os.listdir(path)):
                    entry = os.path.join(path, name)
                    digest = self._file_digest(entry) if is_source_text(name) else None
                    if digest is not None:
                        h.update(name.encode(errors="surrogateescape") + b"\0")
                        h.update(digest)
                return h.hexdigest()
        except OSError:
            return None
        digest = self._file_digest(path)
        return None if digest is None else digest.hex()

    def _file_digest(self, path: str) -> bytes | None:
        try:
            known = self._memo.get(_stamp(path, os.stat(path)))
        except (OSError, ValueError):
            return None
        if known is not None:
            return known
        found = regular_file_digest(path)
        if found is None:
            return None
        digest, status = found
        if time.time_ns() - max(status.st_mtime_ns, status.st_ctime_ns) > _SETTLED:
            self._memo[_stamp(path, status)] = digest
        return digest


def _stamp(path: str, status: os.stat_result) -> tuple[object, ...]:
    """What names a file's content while it is unchanged: its path, device, inode, size, and
    modification and change times (a write sets both, and no one can set the second back)."""
    return (path, status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns,
            status.st_ctime_ns)  # fmt: skip


_SETTLED = 2_000_000_000
"""Nanoseconds since a file last changed after which its status names its content: a file
changed again within the clock tick of a change just before would keep its times and size."""


def compiler_fingerprint(executable: str, version_output: str) -> str:
    """A hash of what makes the compiler this compiler: its whole `--version` output, and the
    path, size and time of the program run (after symbolic links); for nvcc also of the host
    gcc and g++ it finds on PATH, which compile its host code."""
    h = hashlib.sha256(version_output.encode(errors="surrogateescape"))
    programs = [executable]
    if is_nvcc(executable):
        programs += ["gcc", "g++"]
    for program in programs:
        found = shutil.which(program) or ""
        real = os.path.realpath(found) if found else ""
        try:
            status = os.stat(real) if real else None
        except OSError:
            status = None
        stamp = f"{status.st_size}:{status.st_mtime_ns}" if status else ""
        h.update(f"{program}\0{found}\0{real}\0{stamp}\0".encode(errors="surrogateescape"))
    return h.hexdigest()


def compile_environment() -> str:
    """The values of `COMPILE_ENVIRONMENT` now (an unset variable differs from an empty one)."""
    return "\0".join(
        f"{name}={os.environ[name]}" for name in COMPILE_ENVIRONMENT if name in os.environ
    )
