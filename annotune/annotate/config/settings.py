"""How the program runs, from its `[[file]]` entry: its arguments, where it runs (`run_dir`), in
what environment (`[file.env]`, a `{NAME}` in a value a parameter's), how its time is read
(`time_regex`, `time_unit`), run limits (`timeout`, `repeats`, `warmup`), and what a correct
run prints (`[file.check]`, `output_rules`)."""

from __future__ import annotations

import math
import re
from pathlib import Path

from annotune.annotate.config.output_rules import output_check
from annotune.annotate.config.values import C_NAME, resolved, string_list, table_value
from annotune.annotate.problem import EnvSetting, RunSettings
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.literals import placeholder_mistake
from annotune.core.toml import Positions

_TIME_UNITS = ("s", "ms", "us", "ns")  # those run.program knows


def run_settings(
    entry: dict, compile_argv: tuple[str, ...] | None, base: Path, where: Positions, at: tuple
) -> RunSettings:
    """The program's arguments, where it runs and in what environment, how its time is read,
    and run limits."""
    numbers = {}
    for key, kind in (("timeout", float), ("repeats", int), ("warmup", int)):
        value = entry.get(key)
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise AnnotuneError(f"'{key}' must be a finite number", where.value((*at, key)))
        if value is not None and (value < 0 or (kind is int and int(value) != value)):
            raise AnnotuneError(
                f"'{key}' must be a non-negative {kind.__name__}", where.value((*at, key))
            )
        if key == "repeats" and value is not None and value < 1:
            raise AnnotuneError(
                "'repeats' must be at least 1: it is the least number of timed runs",
                where.value((*at, key)),
            )
        numbers[key] = kind(value) if value is not None else None
    regex = entry.get("time_regex")
    if regex is not None:
        if not isinstance(regex, str):
            raise AnnotuneError("'time_regex' must be a string", where.value((*at, "time_regex")))
        try:
            groups = re.compile(regex).groups
        except re.error as error:
            raise AnnotuneError(
                f"invalid time_regex: {error}", where.value((*at, "time_regex"))
            ) from None
        if groups < 1:
            raise AnnotuneError(
                "time_regex needs a group capturing the time, e.g. 'took ([0-9.]+) ms'",
                where.value((*at, "time_regex")),
            )
    unit = entry.get("time_unit")
    if unit is not None and unit not in _TIME_UNITS:
        raise AnnotuneError(
            f"time_unit must be one of {', '.join(_TIME_UNITS)}, not {unit!r}",
            where.value((*at, "time_unit")),
        )
    return RunSettings(
        compile=compile_argv,
        args=_args(entry, where, at),
        time_regex=regex,
        time_unit=unit,
        run_dir=_run_dir(entry, base, where, at),
        env=_env(entry, where, at),
        output_check=output_check(entry, where, at),
        **numbers,
    )


def _env(entry: dict, where: Positions, at: tuple) -> tuple[EnvSetting, ...]:
    """`[file.env]`: variable names as a shell takes them, string values (nothing is run
    through a shell), each `{...}` in a value a parameter's name."""
    settings = []
    for name, value in table_value(entry, "env", where, at).items():
        if not C_NAME.fullmatch(name):
            raise AnnotuneError(
                f"{name!r} is not an environment variable's name (letters, digits, '_')",
                where.key((*at, "env", name)),
            )
        location = where.value((*at, "env", name))
        if not isinstance(value, str):
            raise AnnotuneError(f'env {name} must be a string, e.g. {name} = "{value}"', location)
        _check_placeholders(value, f"env {name}", location)
        settings.append(EnvSetting(name, value, location))
    return tuple(settings)


def _args(entry: dict, where: Positions, at: tuple) -> tuple[str, ...]:
    """`args`: strings, each brace of one part of a `{NAME}` or an escape (`{{`, `}}`)."""
    args = string_list(entry, "args", where, at)
    for index, arg in enumerate(args):
        _check_placeholders(arg, f"argument {arg!r}", where.value((*at, "args", index)))
    return tuple(args)


def _check_placeholders(text: str, what: str, location: Location) -> None:
    """An error at the first brace of `text` that is no part of a `{NAME}` or an escape: an
    unclosed `{T` would otherwise reach the program as written, without a word."""
    mistake = placeholder_mistake(text, what)
    if mistake is not None:
        raise AnnotuneError(mistake[1], location.shifted(mistake[0]))


def _run_dir(entry: dict, base: Path, where: Positions, at: tuple) -> str | None:
    value = entry.get("run_dir")
    if value is None:
        return None
    if not isinstance(value, str):
        raise AnnotuneError("'run_dir' must be a string", where.value((*at, "run_dir")))
    run_dir = resolved(base, value)
    if not Path(run_dir).is_dir():
        raise AnnotuneError(f"run_dir: no such directory {run_dir}", where.value((*at, "run_dir")))
    return run_dir
