"""`annotune report FILE`: a picture of FILE's tune from the results database.

Writes an image (or, `--html`, one self-contained page) beside the tuned header by default
(`tuned/<device>/<stem>.tune.png`): the best time so far against the measurements with the
default's time and the final check's interval, the measured configurations by time, which
knobs mattered (the partition tree over the measurements), and per problem size when the
header has sizes. Nothing is measured. Exit codes: 0 written, 2 bad input (no database, no
measurement of this version of FILE, an output over an input).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from annotune.cli.app import (
    ConfigPath,
    DbPath,
    JsonFlag,
    app,
    print_json,
    require_matplotlib,
    stderr,
    user_errors,
)
from annotune.cli.params import device_name, output_dir, output_file
from annotune.core.diagnostics import AnnotuneError
from annotune.core.files import refuse_overwrite
from annotune.emit import tuned_header_path
from annotune.emit.picture import TunePicture, picture_path, write_picture
from annotune.results.workspace import default_db_path


@app.command("report")
def report_command(
    file: Annotated[Path, typer.Argument(help="The tuned source.")],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            callback=output_file,
            help="The file to write (default: tuned/<device>/<stem>.tune.png or .html).",
        ),
    ] = None,
    html: Annotated[
        bool, typer.Option("--html", help="One self-contained HTML page instead of a PNG.")
    ] = False,
    device: Annotated[
        str | None,
        typer.Option(callback=device_name, help="This device's study (default: the newest)."),
    ] = None,
    size: Annotated[
        int | None,
        typer.Option(min=0, help="A size-aware header: the size whose tune is drawn."),
    ] = None,
    out_dir: Annotated[
        Path | None,
        typer.Option(callback=output_dir, help="Where the headers are (default: tuned/)."),
    ] = None,
    db: DbPath = None,
    config: ConfigPath = None,
    json: JsonFlag = False,
) -> None:
    """Draw FILE's tune from the results database: progress, configurations by time, which
    knobs mattered, and per problem size."""
    with user_errors():
        require_matplotlib()
        from annotune.session.picture import tune_picture  # libclang, numpy: only here

        picture = tune_picture(
            file, db_path=db, device=device, config_path=config, out_dir=out_dir, size=size
        )
        path = write_report(file, picture, output, html=html, db=db, out_dir=out_dir)
    if json:
        print_json({"output": str(path), **picture.to_json()})
    else:
        stderr.print(f"wrote the picture of {picture.title} to {path}", highlight=False)


def write_report(
    file: Path,
    picture: TunePicture,
    output: Path | None,
    *,
    html: bool,
    db: Path | None,
    out_dir: Path | None,
) -> Path:
    """Write `picture` to `output` (default beside the tuned header) and return the path;
    never over the source, its database or its header."""
    header = tuned_header_path(file, picture.device, out_dir)
    path = output if output is not None else picture_path(header, html=html)
    refuse_overwrite(
        path,
        "-o" if output is not None else "the picture",
        {
            "the source": file,
            "the results database": db or default_db_path(file),
            "the header": header,
        },
    )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_picture(picture, path, html=html or path.suffix.lower() in (".html", ".htm"))
    except OSError as error:
        raise AnnotuneError(f"cannot write {path}: {error.strerror or error}") from None
    return path
