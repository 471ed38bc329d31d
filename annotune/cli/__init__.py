"""Command line: `annotune scan | bench | ...`. Each command lives in its own module, imported
only when that command runs (see `annotune.cli.app.COMMANDS`)."""

import os
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

from annotune import __version__
from annotune.cli.app import (
    EXIT_FAILED,
    EXIT_INTERNAL_ERROR,
    app,
    finish_output,
    guard_streams,
    interrupted_exit_code,
    say_interrupted,
    stop_on_sigterm,
)
from annotune.core.diagnostics import printable

CRASH_DIR = "crash"
"""Where crash logs go, under annotune's cache directory (else the system's temp directory)."""


def main() -> None:
    """Entry point. A bug inside annotune is reported in a few lines that say it is one, with
    the versions a report needs, and the traceback goes to a crash log rather than over the
    user's terminal (ANNOTUNE_DEBUG=1 raises it instead). Ctrl-C is exit 130, never a
    traceback, wherever it lands; SIGTERM stops the same way, exit 143. A write to stdout or
    stderr that fails (a closed pipe, /dev/full, a closed descriptor) stops the command as
    Ctrl-C does and ends it with exit 1 and one line (`guard_streams`, `finish_output`)."""
    guard_streams()
    code: int | str | None = 0
    try:
        stop_on_sigterm()
        app()
    except SystemExit as exited:  # standalone mode: how app() ends
        code = exited.code
    except KeyboardInterrupt:  # OutputFailed too
        say_interrupted()
        code = interrupted_exit_code()
    except MemoryError:  # the machine's limit, not annotune's bug: said as such, exit 1
        if os.environ.get("ANNOTUNE_DEBUG"):
            raise
        print(_out_of_memory(), file=sys.stderr)
        code = EXIT_FAILED
    except Exception as error:  # typer.Exit never reaches here (standalone mode)
        if os.environ.get("ANNOTUNE_DEBUG"):
            raise
        if _mapping_failed(error):  # a library (numpy's, libclang) not loadable under the limit
            print(_out_of_memory(), file=sys.stderr)
            code = EXIT_FAILED
        else:
            _report_bug(error)
            code = EXIT_INTERNAL_ERROR
    if isinstance(code, str):  # sys.exit("message"): the message, exit 1
        print(printable(code), file=sys.stderr)
        code = EXIT_FAILED
    sys.exit(finish_output(code or 0))


def _mapping_failed(error: BaseException) -> bool:
    """Whether `error` is the loader failing to map a shared library for want of address
    space (an import under `ulimit -v`), which a limit explains, not a bug."""
    said = str(error)
    return isinstance(error, ImportError | OSError) and (
        "failed to map segment" in said or "Cannot allocate memory" in said
    )


def _out_of_memory() -> str:
    """What a MemoryError says: the address-space limit the process runs under, when one is
    set (`ulimit -v`, a batch job's memory limit), else that the machine has no more."""
    import resource

    from annotune.core.limits import inherited_soft

    soft = inherited_soft(resource.RLIMIT_AS)
    if soft is None:
        return "annotune: error: out of memory: the machine has no more to give this command"
    return (
        f"annotune: error: out of memory under this process's address-space limit of "
        f"{soft >> 20} MiB (ulimit -v {soft >> 10}); annotune needs more than that here: raise "
        "the limit (ulimit -v, or the batch job's memory request)"
    )


def _report_bug(error: Exception) -> None:
    headline = (str(error).splitlines() or [""])[0][:300]
    line = f"annotune: internal error: {type(error).__name__}: {headline}"
    print(printable(line), file=sys.stderr)
    versions = f"annotune {__version__}, Python {platform.python_version()}"
    log = write_crash_log(traceback.format_exc())
    if log is None:
        print(traceback.format_exc(), end="", file=sys.stderr)
        where = "no crash log could be written; the traceback is above"
    else:
        where = f"the traceback is in {log}"
    print(
        f"note: this is a bug in annotune ({versions}); {where}; please report it with that "
        "traceback (ANNOTUNE_DEBUG=1 raises it instead)",
        file=sys.stderr,
    )


def write_crash_log(trace: str) -> Path | None:
    """Write `trace`, with the versions and the command line, to a new file in annotune's
    cache directory, else in the system's temp directory (a read-only or full home must not
    lose it); the file's path, or None when neither could be written."""
    from platformdirs import user_cache_path

    name = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    text = (
        f"annotune {__version__}\n"
        f"Python {sys.version}\n"
        f"platform {platform.platform()}\n"
        f"command {sys.argv!r}\n\n"
        f"{trace}"
    )
    for base in (user_cache_path("annotune"), Path(tempfile.gettempdir()) / "annotune"):
        path = base / CRASH_DIR / name
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8", errors="replace")
        except OSError:
            continue
        return path
    return None
