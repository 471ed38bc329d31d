"""`annotune export FILE -o OUT.json`: a study's measurements as a T4 results file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from annotune.annotate import read_problem
from annotune.cli.app import ConfigPath, DbPath, JsonFlag, app, print_json, stderr, user_errors
from annotune.cli.params import device_name, output_file
from annotune.core.diagnostics import AnnotuneError
from annotune.core.files import refuse_overwrite
from annotune.results.studies import export_study
from annotune.results.workspace import default_db_path


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
        read = {f"{name}, which the source reads": Path(name) for name in problem.files}
        config_file = Path(problem.config_file) if problem.config_file else None
        refuse_overwrite(
            output,
            "-o",
            {
                "the source": file,
                "the config": config_file,
                "the results database": db or default_db_path(file),
                **read,
            },
        )
        try:
            found = export_study(problem, output, db_path=db, device=device)
        except OSError as error:  # writing OUTPUT: full, read-only, a device that refuses
            raise AnnotuneError(f"cannot write {output}: {error.strerror or error}") from None
    measured_on, count = found.study.key.device, len(found.measurements)
    if json:
        print_json({"output": str(output), "device": measured_on, "measurements": count})
    else:
        stderr.print(f"wrote {count} measurements on {measured_on} to {output}", highlight=False)
