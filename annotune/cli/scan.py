"""`annotune scan FILE`: what was found, the space size, warnings, and any mistake with
FILE:LINE:COL."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from annotune.annotate import Problem
from annotune.annotate.problem import kernel_only_params, rewrite_only_params
from annotune.annotate.summary import SpaceSummary, env_only_params
from annotune.api.scan import scan as api_scan
from annotune.cli.app import ConfigPath, JsonFlag, app, print_json, stderr, stdout, user_errors
from annotune.core.diagnostics import printable
from annotune.core.literals import placeholders


@app.command()
def scan(
    file: Annotated[Path, typer.Argument(help="The annotated source (.cu, .cuh, .c, .cpp, .h).")],
    config: ConfigPath = None,
    json: JsonFlag = False,
) -> None:
    """List the tunable parameters and constraints of FILE and the size of its search space."""
    with user_errors():
        found = api_scan(file, config=config)
    for location, message in found.warnings:
        stderr.print(f"{_where(location)}: warning: {message}", highlight=False)
    if json:
        print_json(found.to_json())
        return
    _print_table(found.problem, found.space)


def _use_kinds(param) -> str:
    return ", ".join(dict.fromkeys(u.kind for u in param.uses)) or "-"


def _where(location) -> str:
    return printable(f"{location.file}:{location.line}:{location.column}")


def _print_table(problem: Problem, summary: SpaceSummary) -> None:
    table = Table(title=printable(f"{problem.source}: {len(problem.params)} tunable parameters"))
    for column in ("name", "domain", "n", "default", "origin", "-D", "declared at", "used in"):
        table.add_column(column, no_wrap=column in ("name", "declared at"))
    through_env = env_only_params(problem)
    through_kernel = kernel_only_params(problem)  # given to the declared kernel alone
    through_kernel |= rewrite_only_params(problem)  # set in a rewritten launch alone
    for param in problem.params:
        where = param.location
        in_args = any(param.name in placeholders(arg) for arg in problem.settings.args)
        elsewhere = ("args" if in_args else "env") if param.name in through_env else "kernel"
        elsewhere = "launch" if param.name in rewrite_only_params(problem) else elsewhere
        table.add_row(
            param.name,
            param.domain,
            str(len(param.values)),
            str(param.default),
            param.origin,
            elsewhere
            if param.name in through_env | through_kernel
            else "yes"
            if param.guarded
            else "no",
            printable(f"{Path(where.file).name}:{where.line}"),
            elsewhere if param.name in through_env | through_kernel else _use_kinds(param),
        )
    stdout.print(table)
    for constraint in problem.constraints:
        where = Text(_where(constraint.location), style="dim")
        stdout.print(Text.assemble(f"constraint  {constraint.text}    ", where))
    stdout.print(summary.describe())
    rules = problem.settings.output_check
    if rules is not None:
        stderr.print(
            f"note: a tune checks every run's output by the config's [file.check] "
            f"({rules.described()}), the baseline's included: a configuration printing "
            "anything else is wrong output, never a winner (program mode only)",
            highlight=False,
        )
    if problem.rewrites:
        stderr.print(
            printable(
                "note: rewritten in a copy ([[file.launch]], or a clause's add = true): "
                + "; ".join(
                    f"{r.what} as `{r.template.removeprefix(', ').strip()}`"
                    + (f" (written `{r.written}`)" if r.written else "")
                    for r in problem.rewrites
                )
                + ". To ship the tuned values, compile the copies `annotune build --shadow-dir` "
                "writes."
            ),
            highlight=False,
            markup=False,
        )
    unguarded = [p.name for p in problem.params if not p.guarded and not p.declaration]
    named = [p.name for p in problem.params if p.origin == "literal" and p.declaration]
    if unguarded:
        stderr.print(
            f"note: {', '.join(unguarded)} cannot be set with -D (no #ifndef guard or a pragma "
            "literal): tune rewrites a copy of the source; `annotune lift FILE` fixes the source "
            "once so the tuned header takes effect."
        )
    if named:
        stderr.print(
            f"note: {', '.join(named)} "
            + ("are literals" if len(named) > 1 else "is a literal")
            + " of the code (a clause, a launch, a dim3) the config names: tune rewrites them "
            "in a copy of the source; to ship the tuned values, compile the copies "
            "`annotune build --shadow-dir` writes."
        )
    constants = [p.name for p in problem.params if p.declaration and p.name not in named]
    if constants:
        stderr.print(
            f"note: {', '.join(constants)} "
            + ("are C constants or variables" if len(constants) > 1 else "is a C declaration")
            + ": tune rewrites the initializer in a copy of the source; to ship the tuned "
            "values, compile the copies `annotune build --shadow-dir` writes."
        )
