"""Launches declared in a config (`[[file.launch]]`): a kernel's launches, every one the
compiler sees or one narrowed by `line` or `function`, given new grid, block, dynamic shared
memory and template arguments as C expressions over knobs. Here only the tables' shape is
checked; `annotate.knobs.launch_templates` finds the launches and checks each against the code.

    [[file.launch]]
    kernel = "rotate"                 # rotate<<<(n / 2 + 255) / 256, 256>>>(...)
    grid = "(n / 2 + BS - 1) / BS"    # names of the code (n) and knobs (BS)
    block = "BS"
"""

from __future__ import annotations

from pathlib import Path

from annotune.annotate.config.records import ClausePlace, LaunchTemplate
from annotune.annotate.config.values import C_NAME, narrowing
from annotune.core.diagnostics import AnnotuneError
from annotune.core.toml import Positions

ARGUMENTS = ("grid", "block", "shared")
LAUNCH_KEYS = {"kernel", *ARGUMENTS, "template", "line", "function"}


def launch_tables(
    entry: dict, where: Positions, at: tuple, base: Path
) -> tuple[LaunchTemplate, ...]:
    """Each `[[file.launch]]` of the entry, its pieces' text located where it is written."""
    tables = entry.get("launch", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise AnnotuneError(
            "'launch' must be an array of tables ([[file.launch]])", where.key((*at, "launch"))
        )
    launches = []
    for number, table in enumerate(tables):
        here = (*at, "launch", number)
        for key in table:
            if key not in LAUNCH_KEYS:
                raise AnnotuneError(
                    f"unknown key {key!r} in [[file.launch]] (expected: "
                    f"{', '.join(sorted(LAUNCH_KEYS))})",
                    where.key((*here, key)),
                )
        kernel = table.get("kernel")
        if not isinstance(kernel, str) or not C_NAME.fullmatch(kernel.rsplit("::", 1)[-1]):
            raise AnnotuneError(
                'each [[file.launch]] needs kernel = "KERNEL", the launched __global__ '
                "function's name as the launch writes it",
                where.value((*here, "kernel")) if "kernel" in table else where.key(here),
            )
        pieces: list[tuple[str, int, str, object]] = []
        for argument in ARGUMENTS:
            if argument in table:
                pieces.append((argument, 0, _text(table, argument, where, here), None))
        template = table.get("template")
        if template is not None:
            if not isinstance(template, list) or not all(isinstance(t, str) for t in template):
                raise AnnotuneError(
                    "template must be a list of strings, one per template argument "
                    '(["float", "BS"])',
                    where.value((*here, "template")),
                )
            for index, text in enumerate(template):
                if not text.strip():
                    raise AnnotuneError(
                        "a template argument cannot be empty",
                        where.value((*here, "template", index)),
                    )
                pieces.append(("template", index, text, None))
        if not pieces:
            raise AnnotuneError(
                "a [[file.launch]] rewrites something: give grid, block, shared or template",
                where.key(here),
            )
        located = tuple(
            (
                argument,
                index,
                text,
                where.value(
                    (*here, argument, index) if argument == "template" else (*here, argument)
                ),
            )
            for argument, index, text, _ in pieces
        )
        line, file, function = narrowing(table, where, here, base)
        place = ClausePlace(
            kernel, where.value((*here, "kernel")), line, file, function, kind="launch"
        )
        launches.append(LaunchTemplate(place, located))
    return tuple(launches)


def _text(table: dict, key: str, where: Positions, at: tuple) -> str:
    value = table[key]
    if not isinstance(value, str) or not value.strip():
        raise AnnotuneError(
            f'{key} must be a C expression as a string ("(n + BS - 1) / BS")',
            where.value((*at, key)),
        )
    return value
