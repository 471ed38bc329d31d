"""The `[[file]]` entries of a config: every key checked, in every entry (a misspelt one would
otherwise be ignored without a word), and the one naming the source read into a `FileConfig`."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from annotune.annotate.config.command import (
    check_forced,
    command_view,
    compile_command,
    with_defines,
)
from annotune.annotate.config.kernel_tables import kernel_tables
from annotune.annotate.config.launch_tables import launch_tables
from annotune.annotate.config.output_rules import CHECK_KEYS
from annotune.annotate.config.records import ClausePlace, ConfigParam, FileConfig
from annotune.annotate.config.settings import run_settings
from annotune.annotate.config.values import (
    C_NAME,
    narrowing,
    quoted_key,
    resolved,
    string_list,
    table_value,
)
from annotune.annotate.grammar import ADDABLE, CLAUSES, PRAGMA_CLAUSES, GrammarError, parse_domain
from annotune.core.diagnostics import AnnotuneError
from annotune.core.inputs import CONFIG, read_text
from annotune.core.toml import Positions, parse_toml

_TOP_KEYS = {"file", "gpu"}
_FILE_KEYS = {
    "path",
    "include",
    "constraints",
    "params",
    "defines",
    "compile",
    "run_dir",
    "args",
    "time_regex",
    "time_unit",
    "env",
    "timeout",
    "repeats",
    "warmup",
    "kernel",
    "launch",
    "check",
}
_PARAM_KEYS = {
    *("domain", "default", "clause", "launch", "arg", "dim3", "line", "function", "independent"),
    "add",
}
_LAUNCH_ARGS = ("grid", "block", "shared")
_KERNEL_KEYS = {"name", *CLAUSES}


def load_file_config(config_path: Path, source: Path) -> FileConfig | None:
    """The `[[file]]` entry of `config_path` naming `source`, or None if there is none."""
    text = read_text(config_path, CONFIG)
    data = parse_toml(text, config_path)
    where = Positions(config_path, text)
    _reject_nul(data, where, ())
    top: tuple = ()
    if config_path.name == "pyproject.toml":
        top = ("tool", "annotune")
        tool = data.get("tool")
        data = tool.get("annotune", {}) if isinstance(tool, dict) else {}
        if not isinstance(data, dict):
            raise AnnotuneError("[tool.annotune] must be a table", where.key(top))
    entries = _checked_entries(data, where, top)
    target = os.path.realpath(source)  # realpath: a loop of links is no error here
    for index, entry in enumerate(entries):
        at = (*top, "file", index)
        path = entry.get("path")
        if not isinstance(path, str):
            raise AnnotuneError('each [[file]] needs a path = "..."', where.value((*at, "path")))
        if os.path.realpath(config_path.parent / path) == target:
            return _file_config(entry, config_path.parent, where, at, str(config_path), source)
    return None


def _reject_nul(value: object, where: Positions, at: tuple) -> None:
    """A NUL character (TOML's "\\u0000") in any key or string: no path, argument or
    environment variable can hold one, and the operating system would refuse it later."""
    if isinstance(value, dict):
        for key, item in value.items():
            if "\0" in key:
                raise AnnotuneError("a key cannot hold a NUL character", where.key((*at, key)))
            _reject_nul(item, where, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _reject_nul(item, where, (*at, index))
    elif isinstance(value, str) and "\0" in value:
        raise AnnotuneError("a string cannot hold a NUL character", where.value(at))


def _checked_entries(data: dict, where: Positions, top: tuple) -> list[dict]:
    """The `[[file]]` tables, once every key in the document is known to annotune."""
    _known_keys(data, _TOP_KEYS, where, top, "[tool.annotune]" if top else "annotune.toml")
    entries = data.get("file", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise AnnotuneError(
            "'file' must be an array of tables ([[file]])", where.key((*top, "file"))
        )
    for index, entry in enumerate(entries):
        at = (*top, "file", index)
        _known_keys(entry, _FILE_KEYS, where, at, "[[file]]")
        params = entry.get("params")
        for name, spec in params.items() if isinstance(params, dict) else ():
            if isinstance(spec, dict):
                _known_keys(spec, _PARAM_KEYS, where, (*at, "params", name), f"parameter {name}")
        if isinstance(entry.get("check"), dict):
            _known_keys(entry["check"], CHECK_KEYS, where, (*at, "check"), "[file.check]")
        kernels = entry.get("kernel", [])
        for number, kernel in enumerate(kernels if isinstance(kernels, list) else ()):
            if isinstance(kernel, dict):
                _known_keys(kernel, _KERNEL_KEYS, where, (*at, "kernel", number), "[[file.kernel]]")
    return entries


def _known_keys(table: dict, known: set[str], where: Positions, at: tuple, what: str) -> None:
    for key in table:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = (
                f"did you mean '{close[0]}'?" if close else f"expected: {', '.join(sorted(known))}"
            )
            raise AnnotuneError(
                f"unknown key {quoted_key(key)} in {what} ({hint})", where.key((*at, key))
            )


def _file_config(
    entry: dict, base: Path, where: Positions, at: tuple, config_file: str, source: Path
) -> FileConfig:
    params = tuple(
        _config_param(name, spec, where, (*at, "params", name), base)
        for name, spec in table_value(entry, "params", where, at).items()
    )
    constraints = tuple(
        (expr, where.value((*at, "constraints", index)))
        for index, expr in enumerate(string_list(entry, "constraints", where, at))
    )
    include_dirs = tuple(resolved(base, d) for d in string_list(entry, "include", where, at))
    compile_argv = with_defines(compile_command(entry, base, where, at), entry, where, at)
    settings = run_settings(entry, compile_argv, base, where, at)
    kernels = kernel_tables(entry, where, at)
    launches = launch_tables(entry, where, at, base)
    if compile_argv is None:
        return FileConfig(
            config_file,
            params,
            constraints,
            include_dirs,
            settings=settings,
            kernels=kernels,
            launches=launches,
        )
    view = command_view(compile_argv, source)
    for option, path in view.flags:
        if option in ("-include", "-imacros"):
            check_forced(option, path, where.value((*at, "compile")))
    return FileConfig(
        config_file,
        params,
        constraints,
        include_dirs,
        view.defines,
        settings,
        undefined=view.undefined,
        language=view.language,
        compiler=view.compiler,
        command_include_dirs=view.include_dirs,
        command_flags=view.flags,
        command_responses=view.responses,
        kernels=kernels,
        launches=launches,
    )


def _config_param(name: str, spec: object, where: Positions, at: tuple, base: Path) -> ConfigParam:
    location = where.key(at)
    if not C_NAME.fullmatch(name):  # it becomes a -D flag and a macro in the header
        raise AnnotuneError(
            f"{quoted_key(name)} is not a macro name (letters, digits, '_')", location
        )
    if isinstance(spec, str):
        domain_text, default, domain_at = spec, None, where.value(at)
    elif isinstance(spec, dict):
        domain_text, default = spec.get("domain"), spec.get("default")
        domain_at = where.value((*at, "domain"))
        if not isinstance(domain_text, str):
            raise AnnotuneError(f'parameter {name} needs domain = "..."', location)
        if default is not None and (
            isinstance(default, bool) or not isinstance(default, int | float)
        ):
            raise AnnotuneError(
                f"default of {name} must be a number", where.value((*at, "default"))
            )
    else:
        raise AnnotuneError(f"parameter {name} must be a domain string or a table", location)
    try:
        domain = parse_domain(domain_text)
    except GrammarError as error:
        raise AnnotuneError(error.message, domain_at.shifted(error.offset)) from None
    default_at = where.value((*at, "default")) if default is not None else None
    clause = _clause_place(spec, where, at, base) if isinstance(spec, dict) else None
    independent = spec.get("independent", False) if isinstance(spec, dict) else False
    if not isinstance(independent, bool):
        raise AnnotuneError(
            f"independent must be true or false, not {independent!r}",
            where.value((*at, "independent")),
        )
    if independent and (clause is None or clause.kind == "clause"):
        raise AnnotuneError(
            "'independent' says a launch's or dim3's number stands alone: it goes with "
            "'launch' or 'dim3'",
            where.key((*at, "independent")),
        )
    add = spec.get("add", False) if isinstance(spec, dict) else False
    if not isinstance(add, bool):
        raise AnnotuneError(f"add must be true or false, not {add!r}", where.value((*at, "add")))
    if add and (clause is None or clause.kind != "clause" or clause.clause not in ADDABLE):
        raise AnnotuneError(
            "'add' adds a clause a pragma lacks: it goes with clause = one of "
            + ", ".join(sorted(ADDABLE)),
            where.key((*at, "add")),
        )
    return ConfigParam(name, domain, default, location, default_at, clause, independent, add)


def _clause_place(spec: dict, where: Positions, at: tuple, base: Path) -> ClausePlace | None:
    """`clause`, `launch` (with `arg`) or `dim3`, narrowed by `line` and `function`: which
    literal of the code a parameter is."""
    forms = [key for key in ("clause", "launch", "dim3") if key in spec]
    if len(forms) > 1:
        raise AnnotuneError(
            f"a parameter is one place: '{forms[0]}' or '{forms[1]}', not both",
            where.key((*at, forms[1])),
        )
    if not forms:
        for key in ("line", "function", "arg"):
            if key in spec:
                raise AnnotuneError(
                    f"'{key}' narrows a place: give it too, e.g. clause = \"thread_limit\", "
                    'launch = "kernel" or dim3 = "block.x"',
                    where.key((*at, key)),
                )
        return None
    kind = forms[0]
    value, location = spec[kind], where.value((*at, kind))
    part = ""
    if kind == "clause":
        if not isinstance(value, str) or value not in PRAGMA_CLAUSES:
            close = difflib.get_close_matches(str(value), sorted(PRAGMA_CLAUSES), n=1)
            raise AnnotuneError(
                f"{value!r} is no clause annotune can tune",
                location,
                hint=f"did you mean '{close[0]}'?"
                if close
                else f"one of {', '.join(sorted(PRAGMA_CLAUSES))}",
            )
    elif kind == "launch":
        if not isinstance(value, str) or not C_NAME.fullmatch(value.rsplit("::", 1)[-1]):
            raise AnnotuneError(f"launch must name a kernel, not {value!r}", location)
        part = spec.get("arg", "block")
        name, _, component = str(part).partition(".")
        if (
            name not in _LAUNCH_ARGS
            or component not in ("", "x", "y", "z")
            or (name == "shared" and component)
        ):
            raise AnnotuneError(
                f"arg must be grid, block or shared (grid.x, block.y, ...), not {part!r}",
                where.value((*at, "arg")) if "arg" in spec else location,
            )
    else:
        name, dot, part = str(value).partition(".")
        named = isinstance(value, str) and C_NAME.fullmatch(name) is not None
        if not (named and dot and part in ("x", "y", "z")):
            raise AnnotuneError(
                f'dim3 must be a dim3 variable and its component, e.g. "block.x", not {value!r}',
                location,
            )
        value = name
    if kind != "launch" and "arg" in spec:
        raise AnnotuneError("'arg' goes with 'launch'", where.key((*at, "arg")))
    line, file, function = narrowing(spec, where, at, base)
    return ClausePlace(value, location, line, file, function, kind, part)
