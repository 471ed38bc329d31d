"""The typer application and the conventions every command shares.

Exit codes: 0 success, 1 the work itself failed (e.g. no valid configuration was found),
2 bad input (a located `FILE:LINE:COL: error:` message on stderr), 130 interrupted.
Data goes to stdout; progress, warnings and errors go to stderr.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from annotune.core.diagnostics import AnnotuneError

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

app = typer.Typer(
    name="annotune",
    help="Autotune the knobs marked in CUDA and OpenACC source.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _group() -> None:
    """Autotune the knobs marked in CUDA and OpenACC source."""


# Tables keep a readable width when piped into a file or a CI log.
stdout = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 160)
stderr = Console(stderr=True, soft_wrap=True)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn AnnotuneError into its located message and exit code 2, never a traceback."""
    try:
        yield
    except AnnotuneError as error:
        print(error.render(), file=sys.stderr)
        raise typer.Exit(code=EXIT_BAD_INPUT) from None
    except KeyboardInterrupt:
        print("annotune: interrupted", file=sys.stderr)
        raise typer.Exit(code=EXIT_INTERRUPTED) from None


# Options several commands share, declared once.
JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON object and nothing else.")]
ConfigPath = Annotated[
    Path | None,
    typer.Option(help="Config file (default: nearest annotune.toml or pyproject.toml above FILE)."),
]
DbPath = Annotated[
    Path | None,
    typer.Option(help="Results database (default: .annotune/results.db beside FILE)."),
]


def require_matplotlib() -> None:
    """Fail early, before any work, when `--plot` is asked for without matplotlib."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise AnnotuneError(
            "--plot needs matplotlib", hint="pip install 'annotune[plot]'"
        ) from None


def print_json(data: Any) -> None:
    """Exactly one JSON object on stdout, nothing else."""
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def command(fn: Callable) -> Callable:
    """Register `fn` as a subcommand (named after the function)."""
    return app.command()(fn)
