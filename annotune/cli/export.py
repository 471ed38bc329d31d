"""`annotune export FILE -o OUT.json`: a study's measurements as a T4 results file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from annotune.annotate import read_problem
from annotune.cli.app import ConfigPath, DbPath, JsonFlag, app, print_json, stderr, user_errors
from annotune.cli.params import device_name, output_file
from annotune.core.diagnostics import AnnotuneError
from annotune.results.studies import export_study


@app.command()
def export(
    file: Annotated[Path, typer.Argument(help="The tuned source.")],
    output: Annotated[
        Path,
        typer.Option("--output", "-o", callback=output_file, help="The T4 JSON file to write."),
    ],
    device: Annotated[
        str | None,
        typer.Option(
            callback=device_name, help="Only this device's study (default: the latest study)."
        ),
    ] = None,
    db: DbPath = None,
    config: ConfigPath = None,
    json: JsonFlag = False,
) -> None:
    """Export the measurements of FILE's current source (the latest matching study) to T4 JSON."""
    with user_errors():
        problem = read_problem(file, config_path=config)
        try:
            found = export_study(problem, output, db_path=db, device=device)
        except OSError as error:  # writing OUTPUT: full, read-only, a device that refuses
            raise AnnotuneError(f"cannot write {output}: {error.strerror or error}") from None
    measured_on, count = found.study.key.device, len(found.measurements)
    if json:
        print_json({"output": str(output), "device": measured_on, "measurements": count})
    else:
        stderr.print(f"wrote {count} measurements on {measured_on} to {output}", highlight=False)
