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
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

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

# gcc, g++, cc, c++, clang, clang++, nvcc, nvc, nvc++, with a target prefix or version suffix
# (x86_64-linux-gnu-gcc-12); a wrapper such as ccache or a script is not assumed to take them.
_TRACKING = re.compile(
    r"(?:[\w.+-]+-)?(?:g?cc|g\+\+|c\+\+|clang(?:\+\+)?|nvcc|nvc(?:\+\+)?)(?:-[\d.]+)?"
)

_HEADERS = (".h", ".hh", ".hpp", ".hxx", ".h++", ".cuh", ".inc", ".inl", ".ipp", ".tcc", ".def")
_SOURCE_SUFFIXES = frozenset((*_HEADERS, ".c", ".cc", ".cpp", ".cxx", ".c++", ".cu"))
_DIRECTORY_FLAGS = ("-I", "-isystem", "-iquote", "-idirafter", "--include-path")
_FILE_FLAGS = ("-include", "-imacros", "--pre-include")


def tracks_dependencies(executable: str) -> bool:
    """Whether the compiler is one that writes its dependency list with `-MD -MF FILE`."""
    return _TRACKING.fullmatch(os.path.basename(executable)) is not None


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


def command_inputs(argv: tuple[str, ...]) -> list[str]:
    """The include directories and forced includes a compile command names itself, absolute.

    Arguments with placeholders are left out: those are annotune's own and are known anyway.
    """
    found: list[str] = []
    flags = _DIRECTORY_FLAGS + _FILE_FLAGS
    for index, arg in enumerate(argv):
        value = None
        if arg in flags and index + 1 < len(argv):
            value = argv[index + 1]
        elif arg.startswith("--") and arg.split("=", 1)[0] in flags:
            value = arg.split("=", 1)[1] if "=" in arg else None
        elif arg.startswith("-I") and len(arg) > 2:
            value = arg[2:]
        if value and "{" not in value:
            found.append(os.path.join(os.getcwd(), value))
    return found


class Digests:
    """Content digests of dependencies, each path read at most once while one batch builds.

    A file's digest is its SHA-256; a directory's covers the names and contents of the C, C++
    and CUDA files directly in it; a path that is not there has the digest "absent".
    """

    def __init__(self) -> None:
        self._known: dict[str, str] = {}

    def __call__(self, path: str) -> str:
        digest = self._known.get(path)
        if digest is None:
            digest = self._known[path] = _digest(path)
        return digest

    def of(self, paths: list[str]) -> dict[str, str]:
        return {path: self(path) for path in dict.fromkeys(paths)}

    def unchanged(self, recorded: dict[str, str]) -> bool:
        return all(self(path) == digest for path, digest in recorded.items())


def _digest(path: str) -> str:
    try:
        if os.path.isdir(path):
            h = hashlib.sha256(b"directory\0")
            for name in sorted(os.listdir(path)):
                entry = os.path.join(path, name)
                if os.path.splitext(name)[1].lower() in _SOURCE_SUFFIXES and os.path.isfile(entry):
                    h.update(name.encode(errors="surrogateescape") + b"\0" + _file_digest(entry))
            return h.hexdigest()
        return _file_digest(path).hex()
    except OSError:
        return "absent"


def _file_digest(path: str) -> bytes:
    with open(path, "rb") as file:
        return hashlib.sha256(file.read()).digest()


def compiler_fingerprint(executable: str, version_output: str) -> str:
    """A hash of what makes the compiler this compiler: its whole `--version` output, and the
    path, size and time of the program run (after symbolic links); for nvcc also of the host
    gcc and g++ it finds on PATH, which compile its host code."""
    h = hashlib.sha256(version_output.encode(errors="surrogateescape"))
    programs = [executable]
    if os.path.basename(executable) == "nvcc":
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


def version_output(executable: str) -> str:
    """All that `<compiler> --version` prints (empty if it cannot be run)."""
    try:
        done = subprocess.run(
            [executable, "--version"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout + done.stderr


def compile_environment() -> str:
    """The values of `COMPILE_ENVIRONMENT` now (an unset variable differs from an empty one)."""
    return "\0".join(
        f"{name}={os.environ[name]}" for name in COMPILE_ENVIRONMENT if name in os.environ
    )
