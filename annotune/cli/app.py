"""The typer application and the conventions every command shares.

Exit codes: 0 success; 1 the work itself failed (e.g. no valid configuration was found), or
an internal error (a bug in annotune: one message, the traceback in a crash log, see
`annotune.cli.main`); 2 bad input (a located `FILE:LINE:COL: error:` message, or click's
"Invalid value for '--option'", on stderr); 130 interrupted (Ctrl-C), anywhere; 143 stopped
by SIGTERM, which stops a command as Ctrl-C does (`stop_on_sigterm`).
Data goes to stdout; progress, warnings and errors go to stderr. Nothing user-controlled is
read as rich markup: the consoles print text literally unless given styled `Text`.

A command's module is imported only when that command runs (`COMMANDS`), and rich only when a
command prints with it (`stdout`, `stderr`): `annotune build` runs on every `make` and must not
pay for scikit-learn or libclang, which other commands import, nor for rich, which it never uses.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple

import typer
from typer.core import TyperCommand, TyperGroup
from typer.main import get_command_from_info, get_command_name

from annotune.core.diagnostics import AnnotuneError

if TYPE_CHECKING:
    from rich.console import Console

EXIT_FAILED = 1
EXIT_INTERNAL_ERROR = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # 128 + SIGTERM, as a shell reports a process SIGTERM ended


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C's KeyboardInterrupt is, so every path that
    stops cleanly on Ctrl-C (measurements kept, the best so far written to the header, the
    report printed) stops the same way when a batch scheduler's time limit, `timeout` or
    `kill` ends the command, instead of dying mid-tune with no header and no report."""


_terminated: list[int] = []
"""The SIGTERMs received: set by the handler, read for the exit code (a signal is process-wide
state; the session below the CLI only sees a KeyboardInterrupt)."""


def stop_on_sigterm() -> None:
    """Make SIGTERM raise `Terminated` in the main thread from now on."""
    signal.signal(signal.SIGTERM, _raise_terminated)


def _raise_terminated(signum: int, _frame: object) -> None:
    _terminated.append(signum)
    raise Terminated


def interrupted_exit_code() -> int:
    """The exit code of a command that stopped early on a signal: 143 after SIGTERM, else 130."""
    return EXIT_TERMINATED if _terminated else EXIT_INTERRUPTED


def say_interrupted() -> None:
    """The one line a command stopped by a signal prints on stderr."""
    print(f"annotune: {'terminated (SIGTERM)' if _terminated else 'interrupted'}", file=sys.stderr)


class LazyCommand(NamedTuple):
    """A command as `annotune --help` knows it before its module is imported."""

    module: str
    """The module whose import registers the command on `app`."""
    help: str
    """What `annotune --help` lists: the first paragraph of the command's docstring."""


COMMANDS: dict[str, LazyCommand] = {
    "bench": LazyCommand(
        "annotune.cli.bench",
        "Measurements each strategy needs for Standard 1 (median of best >= 0.95) and Standard 2 "
        "(5th percentile >= 0.95), beside the exact values for random search.",
    ),
    "build": LazyCommand(
        "annotune.cli.build",
        "Write the tuned header of FILE for this device to OUT (the defaults if it has none).",
    ),
    "explain": LazyCommand(
        "annotune.cli.explain",
        "Partition the measured configurations of FILE by the parameter values that matter most "
        "(Starchart's regression tree) and rank the parameters by importance.",
    ),
    "export": LazyCommand(
        "annotune.cli.export",
        "Export the measurements of FILE's current source (the latest matching study) to T4 JSON.",
    ),
    "lift": LazyCommand(
        "annotune.cli.lift",
        "Guard FILE's tunable #defines and turn its tuned pragma literals into macros.",
    ),
    "predict": LazyCommand(
        "annotune.cli.predict",
        "Predict the best configuration of FILE for a GPU from other GPUs' results alone, or "
        "for a problem size from the other sizes tuned (--size).",
    ),
    "scan": LazyCommand(
        "annotune.cli.scan",
        "List the tunable parameters and constraints of FILE and the size of its search space.",
    ),
    "tune": LazyCommand(
        "annotune.cli.tune",
        "Tune FILE on this machine: compile variants, time them, search, write the header.",
    ),
}
"""Every command by name, in the order `annotune --help` lists them."""


class _HelpOnly(TyperCommand):
    """Stands for a command whose module is not imported yet: enough for the group's help and
    its "Did you mean" suggestions, replaced by the real command before it runs."""


class _LazyGroup(TyperGroup):
    """The `annotune` group: lists every command in `COMMANDS`, imports one only to run it."""

    def __init__(self, *, commands: dict[str, TyperCommand], **attrs: Any) -> None:
        stand_ins = {
            name: _HelpOnly(name, short_help=entry.help) for name, entry in COMMANDS.items()
        }
        super().__init__(commands={**stand_ins, **commands}, **attrs)

    def resolve_command(
        self, ctx: typer.Context, args: list[str]
    ) -> tuple[str | None, TyperCommand | None, list[str]]:
        if isinstance(self.commands.get(args[0]), _HelpOnly):
            self.commands[args[0]] = _load(args[0])
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: typer.Context) -> Any:
        """Run the command. A bad or missing option value is one line, like every other bad
        input ("annotune: error: Invalid value for '--seed': ..."), not a framed panel; Ctrl-C
        anywhere in it (its import included) is exit 130 with one line, never a traceback."""
        try:
            return super().invoke(ctx)
        except typer.BadParameter as error:
            print(f"annotune: error: {error.format_message()}", file=sys.stderr)
            raise typer.Exit(code=EXIT_BAD_INPUT) from None
        except KeyboardInterrupt:
            say_interrupted()
            raise typer.Exit(code=interrupted_exit_code()) from None


def _load(name: str) -> TyperCommand:
    """Import the module of command `name`, which registers it on `app`, and build it."""
    module = COMMANDS[name].module
    import_module(module)
    for info in app.registered_commands:
        if (info.name or get_command_name(info.callback.__name__)) == name:
            return get_command_from_info(
                info,
                pretty_exceptions_short=app.pretty_exceptions_short,
                rich_markup_mode=app.rich_markup_mode,
            )
    raise RuntimeError(f"{module} registers no command {name!r}")


app = typer.Typer(
    name="annotune",
    help="Autotune the knobs marked in CUDA and OpenACC source.",
    cls=_LazyGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


CMAKE_DIR = Path(__file__).resolve().parents[1] / "cmake"
"""annotune's CMake package (annotuneConfig.cmake), shipped inside the Python package, so that
the module and the annotune it runs come from one installation."""


def _print_cmake_dir(value: bool) -> None:
    """`annotune --cmake-dir`: print where the CMake package is and exit, for
    `cmake -Dannotune_DIR="$(annotune --cmake-dir)"`; no command module is imported."""
    if value:
        print(CMAKE_DIR)
        raise typer.Exit()


@app.callback()
def _group(
    cmake_dir: Annotated[
        bool,
        typer.Option(
            "--cmake-dir",
            is_eager=True,
            expose_value=False,
            callback=_print_cmake_dir,
            help="Print the directory of annotune's CMake package (for -Dannotune_DIR) and exit.",
        ),
    ] = False,
) -> None:
    """Autotune the knobs marked in CUDA and OpenACC source."""


def __getattr__(name: str) -> Console:
    """`stdout` and `stderr`, the rich consoles of tables and progress, made on first import
    (`from annotune.cli.app import stdout`). Tables keep a readable width when piped into a file
    or a CI log. Markup is off: device names, paths, parameter values and compiler messages are
    printed as they are, and `[/]` in one is text, not a MarkupError; styles come as `Text`.
    Any other name (the import system asks for `__path__`) imports nothing."""
    if name not in ("stdout", "stderr"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from rich.console import Console

    if name == "stdout":
        console = Console(soft_wrap=True, markup=False, width=None if sys.stdout.isatty() else 160)
    else:
        console = Console(stderr=True, soft_wrap=True, markup=False)
    globals()[name] = console
    return console


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn AnnotuneError into its located message and exit code 2, never a traceback."""
    try:
        yield
    except AnnotuneError as error:
        print(error.render(), file=sys.stderr)
        raise typer.Exit(code=EXIT_BAD_INPUT) from None


# Options several commands share, declared once.
JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON object and nothing else.")]
ConfigPath = Annotated[
    Path | None,
    typer.Option(help="Config file (default: nearest annotune.toml or pyproject.toml above FILE)."),
]
DbPath = Annotated[
    Path | None,
    typer.Option(
        help="Results database (default: .annotune/results.db beside FILE, or in the user "
        "cache when that directory is read-only)."
    ),
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
