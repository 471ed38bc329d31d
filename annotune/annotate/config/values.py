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
