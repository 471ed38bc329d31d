"""The typer application and the conventions every command shares.

Exit codes: 0 success; 1 the work itself failed (e.g. no valid configuration was found), a
write to stdout or stderr failed (`OutputFailed`: a closed pipe, /dev/full), or
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

import errno
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple

import typer
from typer.core import TyperCommand, TyperGroup
from typer.main import get_command_from_info, get_command_name

from annotune.core.diagnostics import AnnotuneError, encodable, printable
from annotune.core.render import render

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
    """The exit code of a command that stopped early on a signal: 143 after SIGTERM, else 130;
    1 when it stopped because a write to stdout or stderr failed (`OutputFailed`)."""
    if _output_failures:
        return EXIT_FAILED
    return EXIT_TERMINATED if _terminated else EXIT_INTERRUPTED


def say_interrupted() -> None:
    """The one line a command stopped by a signal prints on stderr (none when it stopped
    because its output failed: `finish_output` says that)."""
    if _output_failures:
        return
    print(f"annotune: {'terminated (SIGTERM)' if _terminated else 'interrupted'}", file=sys.stderr)


class OutputFailed(KeyboardInterrupt):
    """A write to stdout or stderr failed: its reader is gone (EPIPE), the disk or /dev/full is
    full (ENOSPC), the stream was closed (EBADF), ... Raised in the main thread as Ctrl-C's
    KeyboardInterrupt is (like `Terminated`), so that a command stops as on Ctrl-C: a tune
    keeps every measurement (each is in its database as it completes) and writes the best so
    far to its header. The command then ends with exit 1 and one line on stderr, when stderr
    still works (`finish_output`), never with a traceback or a crash log."""

    def __init__(self, stream: str, error: OSError) -> None:
        super().__init__(stream, error)
        self.stream = stream
        self.error = error

    def message(self) -> str:
        reason = self.error.strerror or str(self.error)
        return f"annotune: error: cannot write to {self.stream}: {reason}"


_output_failures: list[OutputFailed] = []
"""The failed writes to stdout or stderr, the first of each stream (process-wide, as the
streams are)."""


class GuardedStream:
    """`sys.stdout` or `sys.stderr` as `main` installs it: the first failed write (or flush)
    raises `OutputFailed`; from then on the stream takes and drops what is written to it, so
    the reports of a command that is stopping cannot fail again, and neither can Python's
    flush at exit (the descriptor is pointed at /dev/null). A write from another thread (a
    live display's refresh) only records the failure."""

    def __init__(self, stream: Any, name: str) -> None:
        self._stream = stream
        self._name = name
        self.broken = False

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                return self._stream.write(text)
            except OSError as error:
                self._fail(error)
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self._stream.flush()
            except OSError as error:
                self._fail(error)

    def _fail(self, error: OSError) -> None:
        self.broken = True
        try:  # what is still buffered goes nowhere, rather than failing again at exit
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass
        failure = OutputFailed(self._name, error)
        _output_failures.append(failure)
        if threading.current_thread() is threading.main_thread():
            raise failure

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._stream, attribute)


class _Closed:
    """A standard stream whose descriptor was closed when annotune started (`cmd >&-`): every
    write fails as writing to a closed descriptor does."""

    encoding = "utf-8"
    errors = "strict"

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "the stream is closed")

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise OSError(errno.EBADF, "the stream is closed")


def guard_streams() -> None:
    """Install `GuardedStream`s as `sys.stdout` and `sys.stderr` (`main`, before anything is
    printed). A standard descriptor (0, 1, 2) found closed is first opened on /dev/null, so
    that no file annotune opens (a results database) takes its number and receives what a
    compiler or a program prints; Python's stream for a closed one is `_Closed`."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            devnull = os.open(os.devnull, os.O_RDWR)  # the lowest free number: this one
            if devnull != fd:
                os.dup2(devnull, fd)
                os.close(devnull)
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if not isinstance(stream, GuardedStream):
            setattr(sys, name, GuardedStream(_Closed() if stream is None else stream, name))


def finish_output(code: int) -> int:
    """The exit code of a command that ended with `code`, once stdout and stderr are flushed:
    1 instead of success or an interruption when a write to either failed, said in one line
    on stderr when stderr still works."""
    for stream in (sys.stdout, sys.stderr):
        with suppress(OutputFailed, OSError, ValueError):
            stream.flush()
    if not _output_failures:
        return code
    if not any(failure.stream == "stderr" for failure in _output_failures):
        with suppress(OutputFailed, OSError, ValueError):
            print(_output_failures[0].message(), file=sys.stderr, flush=True)
    return code if code not in (0, EXIT_INTERRUPTED, EXIT_TERMINATED) else EXIT_FAILED


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
    "check": LazyCommand(
        "annotune.cli.check",
        "Say whether the tuned header of FILE for this device still holds: exit 0 when it does, "
        "1 when it is stale (or, with --measure, no longer faster), 2 for bad input.",
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
    "report": LazyCommand(
        "annotune.cli.report",
        "Draw FILE's tune from the results database: progress, configurations by time, which "
        "knobs mattered, and per problem size.",
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
            with suppress(OutputFailed):
                print(printable(f"annotune: error: {error.format_message()}"), file=sys.stderr)
            raise typer.Exit(code=EXIT_BAD_INPUT) from None
        except KeyboardInterrupt:
            say_interrupted()
            raise typer.Exit(code=interrupted_exit_code()) from None


_NUMERIC = frozenset(("tune", "bench", "predict", "explain", "report"))
"""Commands that load numpy, SciPy and scikit-learn, whose native libraries need room."""
_LEAST_ADDRESS_SPACE = {"numeric": 512 << 20, "other": 256 << 20}
"""Below these address-space limits (`ulimit -v`) loading numpy's and libclang's libraries
fails, or OpenBLAS's start spins without end (seen at 250 MiB), or stops the process with a
line of its own (120 MiB): such a limit is said before anything is loaded."""


def _enough_address_space(name: str) -> None:
    """Exit 1, saying so, when the address-space limit is too small for command `name`."""
    import resource

    least = _LEAST_ADDRESS_SPACE["numeric" if name in _NUMERIC else "other"]
    from annotune.core.limits import inherited_soft

    soft = inherited_soft(resource.RLIMIT_AS)
    if soft is not None and soft < least:
        print(
            f"annotune: error: `annotune {name}` needs an address space of at least "
            f"{least >> 20} MiB, and this process is limited to {soft >> 20} MiB "
            f"(ulimit -v {soft >> 10}): raise the limit (ulimit -v, or the batch job's memory "
            "request)",
            file=sys.stderr,
        )
        raise typer.Exit(code=EXIT_FAILED)


def _load(name: str) -> TyperCommand:
    """Import the module of command `name`, which registers it on `app`, and build it."""
    module = COMMANDS[name].module
    _enough_address_space(name)
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
    printed as they are, and `[/]` or `[bold]` in one is text, not a MarkupError or a style;
    styles come as `Text`. Every piece of text they print is `printable` (`_shown_console`).
    Any other name (the import system asks for `__path__`) imports nothing."""
    if name not in ("stdout", "stderr"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    shown_console = _shown_console()
    if name == "stdout":
        console = shown_console(
            file=_Printable("stdout"),
            soft_wrap=True,
            markup=False,
            width=None if sys.stdout.isatty() else 160,
        )
    else:
        console = shown_console(
            file=_Printable("stderr"), stderr=True, soft_wrap=True, markup=False
        )
    globals()[name] = console
    return console


def _shown_console() -> type[Console]:
    """A rich Console whose every text is `printable`, whichever way it came: a string (made
    printable before it is laid out, so a table's columns fit it) or a `Text` or a table cell
    (each segment as it is rendered). A file named `k\\x1b[2J.c` in scan's table, or an
    OSC sequence in `ANNOTUNE_DEVICE` in a report, is shown escaped, never acted on by the
    terminal, however the command formatted it; the console's own control segments (a
    progress bar moving the cursor) and styles, added after, are kept."""
    from rich.console import Console
    from rich.segment import Segment

    class ShownConsole(Console):
        def render_str(self, text: str, **options: Any) -> Any:
            return super().render_str(printable(text), **options)

        def render(self, renderable: Any, options: Any = None) -> Iterator[Segment]:
            for segment in super().render(renderable, options):
                if segment.control or segment.text.isascii() and segment.text.isprintable():
                    yield segment
                else:
                    yield Segment(printable(segment.text), segment.style)

    return ShownConsole


class _Printable:
    """A console's stream: whatever `sys.stdout` or `sys.stderr` is when it writes (a test
    swaps them), with a file name's bytes that are not UTF-8 written as escapes (`k\\xff.c`,
    `encodable`) instead of failing to encode. Only those: what a console writes holds its
    own styles' escape sequences, each name in it already `printable`."""

    def __init__(self, name: str) -> None:
        self._name = name

    def write(self, text: str) -> int:
        return getattr(sys, self._name).write(encodable(text))

    def __getattr__(self, attribute: str) -> Any:
        return getattr(getattr(sys, self._name), attribute)


def _printable_json(data: Any) -> Any:
    """`data` with every string (and key) `printable`."""
    if isinstance(data, str):
        return printable(data)
    if isinstance(data, dict):
        return {_printable_json(key): _printable_json(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [_printable_json(item) for item in data]
    return data


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn AnnotuneError into its located message and exit code 2, never a traceback."""
    try:
        yield
    except AnnotuneError as error:
        with suppress(OutputFailed):  # a full stderr: still exit 2 (`finish_output`)
            print(render(error), file=sys.stderr)
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
    sys.stdout.write(json.dumps(_printable_json(data), indent=2) + "\n")
