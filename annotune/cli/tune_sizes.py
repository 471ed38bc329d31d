"""`annotune tune --sizes`: each size's tune with its own progress and report, then the
size-aware header; the exit code of them all (`exit_for_sizes`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from annotune.api.tune import tune_sizes
from annotune.cli.app import EXIT_FAILED, interrupted_exit_code, print_json, stderr, stdout
from annotune.cli.tune_output import ProgressDisplay, print_report, say_baseline_failed
from annotune.core.render import render
from annotune.session.report import NoCudaDevice, TuneProgress, TuneStatus

if TYPE_CHECKING:
    from annotune.session.sizes import SizesReport


def tune_sizes_command(
    file: Path, options: dict[str, Any], sizes: str, config: Path | None, json: bool
) -> SizesReport:
    """Tune each size `sizes` names (`N=512,1024`), showing each one's progress, and print
    the reports."""
    name = sizes.partition("=")[0].strip()

    displays: list[ProgressDisplay] = []

    def update(progress: TuneProgress) -> None:
        displays[-1].update(progress)

    def on_size(index: int, size: int, count: int) -> None:
        if displays:
            displays[-1].__exit__(None, None, None)
        if not json:
            stderr.print(
                f"annotune: tuning {name} = {size} ({index + 1} of {count})", highlight=False
            )
        displays.append(ProgressDisplay(enabled=not json and stderr.is_terminal).__enter__())

    try:
        report = tune_sizes(
            file, sizes=sizes, config=config, on_size=on_size, on_progress=update, **options
        )
    except NoCudaDevice as error:
        stderr.print(render(error), markup=False, highlight=False)
        raise typer.Exit(code=EXIT_FAILED) from None
    finally:
        if displays:
            displays[-1].__exit__(None, None, None)
    if json:
        print_json(report.to_json())
    else:
        for outcome in report.outcomes:
            stdout.print(f"\n{name} = {outcome.size}", markup=False, highlight=False, style="bold")
            print_report(outcome.report)
        if report.skipped:
            skipped = ", ".join(map(str, report.skipped))
            stdout.print(f"not tuned     {name} = {skipped}", markup=False, highlight=False)
        if report.header is not None:
            stdout.print(
                f"\nheader        {report.header} (selects per {name})",
                markup=False,
                highlight=False,
            )
    return report


def exit_for_sizes(report: SizesReport) -> None:
    """The exit code of a tune of several sizes, its failure said on stderr."""
    if report.status is TuneStatus.INTERRUPTED:
        raise typer.Exit(code=interrupted_exit_code())
    if report.baseline_failed is not None:
        say_baseline_failed(report.baseline_failed.report)
    elif report.status is TuneStatus.NO_BEST:
        stderr.print("annotune: error: no configuration ran successfully", highlight=False)
    if report.status.failed:
        raise typer.Exit(code=EXIT_FAILED)
