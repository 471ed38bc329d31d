"""A `[[file]]` entry's values read with their types checked, each mistake located: tables,
lists of strings, paths relative to the config, names that must be C's."""

from __future__ import annotations

import os
import re
from pathlib import Path

from annotune.core.diagnostics import AnnotuneError
from annotune.core.toml import Positions

C_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a macro's, or an environment variable's


def quoted_key(key: str) -> str:
    """A key as a message shows it: quoted, escapes for control characters, cut if long."""
    return repr(key if len(key) <= 40 else key[:40] + "...")


def resolved(base: Path, path: str) -> str:
    """A path written in the config: relative to the config file's directory."""
    return path if Path(path).is_absolute() else os.path.realpath(base / path)


def table_value(entry: dict, key: str, where: Positions, at: tuple) -> dict:
    value = entry.get(key, {})
    if not isinstance(value, dict):
        raise AnnotuneError(f"'{key}' must be a table", where.key((*at, key)))
    return value


def string_list(entry: dict, key: str, where: Positions, at: tuple) -> list[str]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise AnnotuneError(f"'{key}' must be a list of strings", where.key((*at, key)))
    return value


def narrowing(
    spec: dict, where: Positions, at: tuple, base: Path
) -> tuple[int | None, str | None, str | None]:
    """`line` (a number, or "FILE:NUMBER" of a local header, FILE relative to the config) and
    `function`, which narrow a place of the code to one line or one function: (line, file
    absolute or None for the source, function)."""
    line, file = spec.get("line"), None
    if isinstance(line, str):  # "kern.cuh:120": a line of one of the source's local headers
        name, colon, number = line.rpartition(":")
        if not (colon and name and number.isdigit()):
            raise AnnotuneError(
                f"line must be a number, or FILE:NUMBER, not {line!r}", where.value((*at, "line"))
            )
        file, line = resolved(base, name), int(number)
    if line is not None and (isinstance(line, bool) or not isinstance(line, int) or line < 1):
        raise AnnotuneError(
            f"line must be a line number from 1, not {line!r}", where.value((*at, "line"))
        )
    function = spec.get("function")
    if function is not None and (not isinstance(function, str) or not C_NAME.fullmatch(function)):
        raise AnnotuneError(
            f"function must be a C function's name, not {function!r}",
            where.value((*at, "function")),
        )
    return line, file, function
