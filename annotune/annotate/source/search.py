"""Where an `#include` is looked for, in the order the preprocessor looks: the one answer for
the headers refused before libclang opens them (`headers.check_headers`) and for the places a
parse depends on (`ParsedSource.searched`).

A result worked out from a parse (the build record of `annotune build`) holds while the files
read hold the same bytes, but a header can also change by appearing: a `conf.h` created beside
the source shadows the `include/conf.h` the parse found, and the compiler then reads the new
one. So each lookup says every place it tried before the file it found (every place, for one it
did not find: a missing system header appearing is a change too), and a record holds each of
them, none there being one of its facts.

The order is gcc's and clang's: for `"name"`, the includer's own directory and the `-iquote`
directories; then, for both spellings, the `-I` directories (those of the compile command and
of the config's `include`, as libclang is given them, then annotune's own), `CPATH`'s, the
`-isystem` ones, `C_INCLUDE_PATH`'s or `CPLUS_INCLUDE_PATH`'s, and the `-idirafter` ones
(libclang parses with `-nostdinc`: no standard directory follows). A name whose spelling is
unknown (`#include HEADER`, a macro) is looked for as a quoted one, whose places include the
others': more places than the compiler tries is only a record missed without need, never a
record kept that should not be.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_ENV_ANGLED = "CPATH"  # clang's driver passes it as -I after the command's own
_ENV_SYSTEM = {"c": "C_INCLUDE_PATH", "c++": "CPLUS_INCLUDE_PATH", "cuda": "CPLUS_INCLUDE_PATH"}
_HAS_INCLUDE = re.compile(rb'__has_include(?:_next)?\s*\(\s*(["<])([^">\r\n]+)[">]\s*\)')


@dataclass(frozen=True)
class SearchPath:
    """The directories an include is looked for in, absolute, in order: `quoted` (`-iquote`)
    after the includer's own for a `"name"`, then `angled` for either spelling."""

    quoted: tuple[str, ...]
    angled: tuple[str, ...]

    def candidates(self, includer: str, name: str, quoted: bool) -> list[str]:
        """Every path `name`, included from the file `includer` (as the preprocessor named
        it), may be found at, in the order they are tried; an absolute name is its own."""
        if os.path.isabs(name):
            return [os.path.normpath(name)]
        own = [os.path.dirname(os.path.abspath(includer))] if quoted else []
        directories = [*own, *self.quoted, *self.angled] if quoted else self.angled
        places = (os.path.normpath(os.path.join(d, name)) for d in directories)
        return list(dict.fromkeys(places))

    def looked_at(self, includer: str, name: str, quoted: bool, found: str | None) -> list[str]:
        """The places tried for `name` up to and including `found` (the file the preprocessor
        took, by any path to it); all of them when it found none, or none of them is it."""
        places = self.candidates(includer, name, quoted)
        if found is None:
            return places
        target = os.path.realpath(found)
        for index, place in enumerate(places):
            if os.path.realpath(place) == target:
                return places[: index + 1]
        return [*places, os.path.abspath(found)]


def search_path(
    include_dirs: Sequence[str], flags: Sequence[tuple[str, str]], language: str, own: str
) -> SearchPath:
    """The search path of libclang's parse: `include_dirs` its `-I` ones in order, `own`
    annotune's directory after them, `flags` the compile command's other directories as
    (clang's option, path) (`-include` and `-imacros`, files, are not searched)."""

    def given(option: str) -> list[str]:
        return [path for spelled, path in flags if spelled == option]

    def environment(variable: str | None) -> list[str]:
        value = os.environ.get(variable, "") if variable else ""
        return [d or "." for d in value.split(os.pathsep)] if value else []  # "": the cwd

    angled = [
        *include_dirs,
        own,
        *environment(_ENV_ANGLED),
        *given("-isystem"),
        *environment(_ENV_SYSTEM.get(language)),
        *given("-idirafter"),
    ]
    return SearchPath(_absolute(given("-iquote")), _absolute(angled))


def has_includes(data: bytes) -> Iterable[tuple[bool, str]]:
    """The names a file tests with `__has_include` (and `_next`), each with whether it is
    quoted: a lookup too, whose answer changes when the header appears."""
    for match in _HAS_INCLUDE.finditer(data):
        yield match.group(1) == b'"', os.fsdecode(match.group(2))


def _absolute(directories: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(os.path.abspath(d) for d in directories))
