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
        from annotune.api.report import report  # libclang, numpy: only here

        drawn = report(
            file,
            output=output,
            html=html,
            device=device,
            size=size,
            out_dir=out_dir,
            db=db,
            config=config,
        )
    if json:
        print_json(drawn.to_json())
    else:
        stderr.print(f"wrote the picture of {drawn.picture.title} to {drawn.path}", highlight=False)
