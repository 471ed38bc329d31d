"""`annotune build FILE -o OUT`: the tuned header for this machine's device, for a Makefile.

Copies `OUT_DIR/<device-slug>/<stem>.h` to OUT, or, when that device has no tuned header,
writes the defaults read from FILE's annotations with one warning on stderr. OUT is rewritten
only when its content changes (make then rebuilds only what really changed) and always
atomically, so any number of `make -j` jobs may build the same OUT at once.

The common path (a tuned header exists) only copies a file: the source is not parsed, and
neither libclang, jinja2 nor rich is imported (a no-op `make` pays for Python, typer and this).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from annotune import __version__
from annotune.cli.app import JsonFlag, app, print_json, user_errors
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.emit import render_defaults_header, tuned_header_path, write_if_changed
from annotune.run.device import DEVICE_ENV, current_device_name


@app.command()
def build(
    file: Annotated[Path, typer.Argument(help="The annotated source the header belongs to.")],
    out: Annotated[Path, typer.Option("--output", "-o", help="The header to write.")],
    device: Annotated[
        str | None,
        typer.Option(help=f"Device name (default: ${DEVICE_ENV}, else this machine's GPU or CPU)."),
    ] = None,
    out_dir: Annotated[
        Path | None,
        typer.Option(help="Where tuned headers live (default: tuned/ beside FILE)."),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(help="Config file, read only when no tuned header exists."),
    ] = None,
    json: JsonFlag = False,
) -> None:
    """Write the tuned header of FILE for this device to OUT (the defaults if it has none)."""
    with user_errors():
        if not file.is_file():
            raise AnnotuneError("no such file", Location(str(file), 1, 1))
        name = device or current_device_name()
        header = tuned_header_path(file, name, out_dir)
        tuned = header.is_file()
        if tuned:
            text = _read(header)
        else:
            text = _defaults(file, name, config)
            print(
                f"annotune: warning: no tuned header for device '{name}' ({header}); "
                f"wrote the defaults from {file}",
                file=sys.stderr,
            )
        try:
            changed = write_if_changed(out, text)
        except OSError as error:
            raise AnnotuneError(f"cannot write {out}: {error.strerror}") from None
    if json:
        print_json(
            {
                "device": name,
                "header": str(header) if tuned else None,
                "output": str(out),
                "changed": changed,
            }
        )


def _read(header: Path) -> str:
    try:
        return header.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise AnnotuneError(f"cannot read the tuned header {header}: {error}") from None


def _defaults(file: Path, device: str, config: Path | None) -> str:
    """The defaults header: the only path that parses the source, so the only one that imports
    the front end (libclang, slower)."""
    from annotune.annotate import read_problem

    problem = read_problem(file, config_path=config)
    return render_defaults_header(problem, device=device, tool_version=__version__)
