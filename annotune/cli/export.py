"""`annotune export FILE -o OUT.json`: a study's measurements as a T4 results file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from annotune.annotate import read_problem
from annotune.cli.app import ConfigPath, DbPath, JsonFlag, app, print_json, stderr, user_errors
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.results.database import Database, default_db_path, sources_hash


@app.command()
def export(
    file: Annotated[Path, typer.Argument(help="The tuned source.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The T4 JSON file to write.")],
    device: Annotated[
        str | None, typer.Option(help="Only this device's study (default: the latest study).")
    ] = None,
    db: DbPath = None,
    config: ConfigPath = None,
    json: JsonFlag = False,
) -> None:
    """Export the measurements of FILE's current source (the latest matching study) to T4 JSON."""
    with user_errors():
        problem = read_problem(file, config_path=config)
        db_path = db or default_db_path(problem.source)
        if not db_path.is_file():
            raise AnnotuneError(
                "no results database here yet (run annotune tune first)",
                Location(str(db_path), 1, 1),
            )
        content = sources_hash(problem.files)
        with Database(db_path) as database:
            studies = [
                s
                for s in database.studies()
                if s.key.content_hash == content and (device is None or s.key.device == device)
            ]
            if not studies:
                raise AnnotuneError(
                    "no measurements of this version of the source"
                    + (f" on device '{device}'" if device else ""),
                    Location(str(problem.source), 1, 1),
                )
            study = studies[-1]
            count = len(database.measurements(study))
            database.export_t4(study, output)
    if json:
        print_json({"output": str(output), "device": study.key.device, "measurements": count})
    else:
        stderr.print(
            f"wrote {count} measurements on {study.key.device} to {output}", highlight=False
        )
