"""`annotune lift FILE [--write]`: rewrite FILE once so that a tuned header takes effect.

Without `--write` only the unified diff is printed (stdout), so it can be reviewed or saved as a
patch; `--write` applies it, atomically, to FILE and the local headers holding its tunables.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from annotune.annotate.lift import plan_lift, write_lift
from annotune.cli.app import ConfigPath, JsonFlag, app, print_json, stderr, user_errors


@app.command()
def lift(
    file: Annotated[Path, typer.Argument(help="The annotated source (.cu, .cuh, .c, .cpp, .h).")],
    write: Annotated[
        bool, typer.Option("--write", help="Apply the rewrite (default: only show the diff).")
    ] = False,
    config: ConfigPath = None,
    json: JsonFlag = False,
) -> None:
    """Guard FILE's tunable #defines and turn its tuned pragma literals into macros.

    Afterwards `-DNAME=V` and a force-included tuned header (`nvcc -include tuned.h`) set every
    tunable. Shows a diff; writes only with --write. Running it again changes nothing.
    """
    with user_errors():
        plan = plan_lift(file, config_path=config)
        written = write_lift(plan) if write else []
    if json:
        print_json(plan.to_json())
        return
    if not plan.changed:
        stderr.print(
            f"{file}: nothing to lift: -D can already set every tunable",
            highlight=False,
            markup=False,
        )
        return
    sys.stdout.write(plan.diff())
    names = ", ".join(item.name for item in plan.lifted)
    if written:
        stderr.print(f"lifted {names}; wrote {', '.join(written)}", highlight=False, markup=False)
    else:
        stderr.print(
            f"would lift {names}; rerun with --write to apply", highlight=False, markup=False
        )
