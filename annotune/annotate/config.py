"""Declarations for files that must not be edited: `annotune.toml` or `[tool.annotune]`.

    # annotune.toml, beside the sources or in a parent directory
    [[file]]
    path = "polybench/2mm.cu"          # relative to this config file
    include = ["common"]               # extra include directories for the front end
    constraints = ["DIM_THREAD_BLOCK_X * DIM_THREAD_BLOCK_Y <= 1024"]
    [file.params]
    DIM_THREAD_BLOCK_X = "pow2(1, 1024)"                       # default: the #define's value
    DIM_THREAD_BLOCK_Y = { domain = "range(1, 32)", default = 8 }

The same tables go under `[tool.annotune]` in a pyproject.toml. The nearest config file
above the source that mentions it wins.
"""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from annotune.annotate.grammar import Domain, GrammarError, Number, parse_domain
from annotune.annotate.problem import RunSettings
from annotune.core.diagnostics import AnnotuneError, Location

PRESETS = ("nvcc", "gcc", "g++", "nvc", "nvc++", "cc", "c++")  # names build.compiler knows

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CONFIG_NAMES = ("annotune.toml", "pyproject.toml")
_FILE_KEYS = {
    "path",
    "include",
    "constraints",
    "params",
    "defines",
    "compile",
    "args",
    "time_regex",
    "timeout",
    "repeats",
    "warmup",
}
_PARAM_KEYS = {"domain", "default"}


@dataclass(frozen=True)
class ConfigParam:
    name: str
    domain: Domain
    default: Number | None
    location: Location


@dataclass(frozen=True)
class FileConfig:
    """What a config file says about one source file."""

    config_file: str
    params: tuple[ConfigParam, ...] = ()
    constraints: tuple[tuple[str, Location], ...] = ()
    include_dirs: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()
    settings: RunSettings = RunSettings()


class _Locator:
    """Best-effort positions inside a TOML file (tomllib reports none)."""

    def __init__(self, path: Path, text: str):
        self.path = str(path)
        self.lines = text.splitlines()

    def find(self, needle: str, after: int = 0) -> Location:
        for number, line in enumerate(self.lines[after:], start=after + 1):
            column = line.find(needle)
            if column >= 0:
                return Location(self.path, number, column + 1)
        return Location(self.path, after + 1 if after < len(self.lines) else 1, 1)


def find_config(source: Path) -> Path | None:
    """The nearest annotune.toml, or pyproject.toml with [tool.annotune], above `source`."""
    for directory in [source.resolve().parent, *source.resolve().parent.parents]:
        for name in CONFIG_NAMES:
            candidate = directory / name
            if candidate.is_file() and (name == "annotune.toml" or _has_tool_table(candidate)):
                return candidate
    return None


def _has_tool_table(pyproject: Path) -> bool:
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return isinstance(data.get("tool"), dict) and "annotune" in data["tool"]


def load_file_config(config_path: Path, source: Path) -> FileConfig | None:
    """The `[[file]]` entry of `config_path` naming `source`, or None if there is none."""
    try:
        text = config_path.read_text(encoding="utf-8")
    except OSError as error:
        raise AnnotuneError(
            f"cannot read config: {error.strerror}", Location(str(config_path), 1, 1)
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        # Python < 3.14 keeps the position only in the message: "... (at line 2, column 12)".
        where = re.search(r"\(at line (\d+), column (\d+)\)", str(error))
        line, column = (int(where.group(1)), int(where.group(2))) if where else (1, 1)
        message = str(error).split(" (at ")[0]
        raise AnnotuneError(
            f"invalid TOML: {message}", Location(str(config_path), line, column)
        ) from None
    locate = _Locator(config_path, text)
    if config_path.name == "pyproject.toml":
        data = data.get("tool", {}).get("annotune", {})
    entries = data.get("file", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise AnnotuneError("'file' must be an array of tables ([[file]])", locate.find("file"))
    target = source.resolve()
    for entry in entries:
        path = entry.get("path")
        if not isinstance(path, str):
            raise AnnotuneError('each [[file]] needs a path = "..."', locate.find("[[file]]"))
        if (config_path.parent / path).resolve() == target:
            return _file_config(entry, config_path, locate, locate.find(path).line)
    return None


def _file_config(entry: dict, config_path: Path, locate: _Locator, line: int) -> FileConfig:
    for key in entry:
        if key not in _FILE_KEYS:
            raise AnnotuneError(
                f"unknown key '{key}' in [[file]] (expected: {', '.join(sorted(_FILE_KEYS))})",
                locate.find(key, line - 1),
            )
    params = tuple(
        _config_param(name, spec, locate, line)
        for name, spec in _table(entry, "params", locate, line).items()
    )
    constraints = []
    for expr in _string_list(entry, "constraints", locate, line):
        constraints.append((expr, locate.find(expr, line - 1)))
    base = config_path.parent
    include_dirs = tuple(
        str((base / d).resolve()) for d in _string_list(entry, "include", locate, line)
    )
    defines = tuple(_string_list(entry, "defines", locate, line))
    settings = _settings(entry, locate, line)
    return FileConfig(str(config_path), params, tuple(constraints), include_dirs, defines, settings)


def _settings(entry: dict, locate: _Locator, line: int) -> RunSettings:
    """`compile` (a string or a list of arguments), `args`, `time_regex`, and run limits."""
    compile_value = entry.get("compile")
    if isinstance(compile_value, str):
        compile_value = [compile_value] if compile_value in PRESETS else shlex.split(compile_value)
    elif compile_value is not None:
        compile_value = _string_list(entry, "compile", locate, line)
    numbers = {}
    for key, kind in (("timeout", float), ("repeats", int), ("warmup", int)):
        value = entry.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise AnnotuneError(f"'{key}' must be a number", locate.find(key, line - 1))
        if value is not None and (value < 0 or (kind is int and int(value) != value)):
            raise AnnotuneError(
                f"'{key}' must be a non-negative {kind.__name__}", locate.find(key, line - 1)
            )
        numbers[key] = kind(value) if value is not None else None
    regex = entry.get("time_regex")
    if regex is not None:
        if not isinstance(regex, str):
            raise AnnotuneError(
                "'time_regex' must be a string", locate.find("time_regex", line - 1)
            )
        try:
            groups = re.compile(regex).groups
        except re.error as error:
            raise AnnotuneError(
                f"invalid time_regex: {error}", locate.find("time_regex", line - 1)
            ) from None
        if groups < 1:
            raise AnnotuneError(
                "time_regex needs a group capturing the milliseconds, e.g. 'took ([0-9.]+) ms'",
                locate.find("time_regex", line - 1),
            )
    return RunSettings(
        compile=tuple(compile_value) if compile_value else None,
        args=tuple(_string_list(entry, "args", locate, line)),
        time_regex=regex,
        **numbers,
    )


def _table(entry: dict, key: str, locate: _Locator, line: int) -> dict:
    value = entry.get(key, {})
    if not isinstance(value, dict):
        raise AnnotuneError(f"'{key}' must be a table", locate.find(key, line - 1))
    return value


def _string_list(entry: dict, key: str, locate: _Locator, line: int) -> list[str]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise AnnotuneError(f"'{key}' must be a list of strings", locate.find(key, line - 1))
    return value


def _config_param(name: str, spec: object, locate: _Locator, line: int) -> ConfigParam:
    at = locate.find(name, line - 1)
    if isinstance(spec, str):
        domain_text, default = spec, None
    elif isinstance(spec, dict):
        for key in spec:
            if key not in _PARAM_KEYS:
                raise AnnotuneError(
                    f"unknown key '{key}' for parameter {name} (expected: domain, default)", at
                )
        domain_text, default = spec.get("domain"), spec.get("default")
        if not isinstance(domain_text, str):
            raise AnnotuneError(f'parameter {name} needs domain = "..."', at)
        if default is not None and (
            isinstance(default, bool) or not isinstance(default, int | float)
        ):
            raise AnnotuneError(f"default of {name} must be a number", at)
    else:
        raise AnnotuneError(f"parameter {name} must be a domain string or a table", at)
    domain_at = locate.find(domain_text, at.line - 1)
    try:
        domain = parse_domain(domain_text)
    except GrammarError as error:
        raise AnnotuneError(error.message, domain_at.shifted(error.offset)) from None
    return ConfigParam(name, domain, default, at)
