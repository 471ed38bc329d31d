"""`annotune tune FILE`: build, measure and search; write tuned/<device>/<stem>.h.

When the results database (or `--transfer-from` files) holds results of the same source and
space on other GPUs, the search starts from what they teach (`--no-transfer`: it does not).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from annotune.annotate import read_problem
from annotune.cli.app import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    ConfigPath,
    DbPath,
    JsonFlag,
    app,
    print_json,
    stderr,
    stdout,
    user_errors,
)
from annotune.search import STRATEGY_NAMES
from annotune.session.options import TuneArguments, tune_options
from annotune.session.tuner import FailureKind, TuneProgress, TuneReport, speedup, tune

SHOWN_FAILURE_KINDS = 3


@app.command("tune")
def tune_command(
    file: Annotated[Path, typer.Argument(help="The annotated source to tune.")],
    budget: Annotated[int, typer.Option(help="Measurements to make (reused ones count).")] = 100,
    seconds: Annotated[
        float | None, typer.Option(help="Stop after this much wall time, too.")
    ] = None,
    strategy: Annotated[
        str, typer.Option(help=f"Search strategy: {', '.join(STRATEGY_NAMES)}.")
    ] = "iterml",
    seed: Annotated[int, typer.Option(help="Random seed: the same seed, the same search.")] = 0,
    device: Annotated[
        str | None, typer.Option(help="Device name (default: the GPU's name, else cpu-<model>).")
    ] = None,
    jobs: Annotated[
        int | None, typer.Option(help="Parallel compiles (default: the core count).")
    ] = None,
    out_dir: Annotated[
        Path | None, typer.Option(help="Where headers go (default: tuned/ beside FILE).")
    ] = None,
    db: DbPath = None,
    fresh: Annotated[bool, typer.Option(help="Forget earlier measurements of this study.")] = False,
    compiler: Annotated[
        str | None,
        typer.Option(
            help="Compile command: a preset (nvcc, gcc, g++, nvc, nvc++, cc, c++) or a template "
            "with {source} {output} [{defines} {includes}]."
        ),
    ] = None,
    arg: Annotated[
        list[str] | None, typer.Option("--arg", help="A program argument (repeatable).")
    ] = None,
    repeats: Annotated[
        int | None, typer.Option(help="Timed runs per configuration (default 5).")
    ] = None,
    warmup: Annotated[int | None, typer.Option(help="Untimed runs first (default 1).")] = None,
    timeout: Annotated[
        float | None, typer.Option(help="Seconds before a run counts as hung (default 60).")
    ] = None,
    time_regex: Annotated[
        str | None, typer.Option(help="Regex whose first group is the time in ms.")
    ] = None,
    compile_timeout: Annotated[
        float, typer.Option(help="Seconds before a compile counts as failed.")
    ] = 300.0,
    mode: Annotated[
        str,
        typer.Option(
            help="program (run the executable), kernel (launch the '#pragma annotune kernel' "
            "with generated inputs; needs a GPU), or auto (kernel when one is declared)."
        ),
    ] = "auto",
    kernel: Annotated[
        str | None, typer.Option(help="Kernel mode: which declared kernel to tune.")
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option(help="Kernel mode: pycuda or cuda-python (default: pycuda if installed)."),
    ] = None,
    transfer: Annotated[
        bool,
        typer.Option(
            help="Learn from results of the same source and space on other GPUs (the database's "
            "and --transfer-from files): measure what they predict best first (iterml only)."
        ),
    ] = True,
    transfer_from: Annotated[
        list[Path] | None,
        typer.Option(
            "--transfer-from",
            help="A T4 (annotune export) or Kernel Tuner cache file of this space measured on "
            "another GPU (repeatable).",
        ),
    ] = None,
    config: ConfigPath = None,
    json: JsonFlag = False,
) -> None:
    """Tune FILE on this machine: compile variants, time them, search, write the header."""
    with user_errors():
        given = TuneArguments(
            strategy=strategy,
            budget=budget,
            seconds=seconds,
            seed=seed,
            device=device,
            jobs=jobs,
            out_dir=out_dir,
            db_path=db,
            fresh=fresh,
            compiler=compiler,
            compile_timeout=compile_timeout,
            args=tuple(arg or ()),
            repeats=repeats,
            warmup=warmup,
            timeout=timeout,
            time_regex=time_regex,
            mode=mode,
            kernel=kernel,
            backend=backend,
            transfer=transfer,
            transfer_from=tuple(transfer_from or ()),
        )
        problem = read_problem(file, config_path=config)
        options = tune_options(problem, given)
        with _ProgressDisplay(enabled=not json and stderr.is_terminal) as display:
            report = tune(problem, options, display.update)
    if json:
        print_json(report.to_json())
    else:
        _print_report(report)
    if report.interrupted:
        raise typer.Exit(code=EXIT_INTERRUPTED)
    if report.best is None:
        if report.gave_up:
            (kind,) = report.failures
            stderr.print(
                f"annotune: error: stopped after {kind.count} configurations all failed the same "
                f"way ({kind.status}: {_headline(kind.error)}); fix the program or its "
                "environment, then run again with --fresh to measure them again",
                markup=False,
                highlight=False,
            )
        else:
            stderr.print("annotune: error: no configuration ran successfully", highlight=False)
        raise typer.Exit(code=EXIT_FAILED)


class _ProgressDisplay:
    """A live progress bar on a terminal; one line per new best otherwise (CI logs)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            console=stderr,
            transient=False,
            disable=not enabled,
        )
        self.task = None
        self.best: float | None = None
        self.warned = 0
        self.failures_shown = 0

    def __enter__(self) -> _ProgressDisplay:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.__exit__(*exc)

    def update(self, p: TuneProgress) -> None:
        for warning in p.warnings[self.warned :]:
            stderr.print(f"annotune: warning: {warning}", highlight=False)
        self.warned = len(p.warnings)
        for kind in p.failures[self.failures_shown :]:
            stderr.print(
                f"annotune: invalid: {kind.status}, {_example(kind)}", markup=False, highlight=False
            )
        self.failures_shown = len(p.failures)
        status = (
            f"iter {p.iteration}  best {_ms(p.best_time)}  default {_ms(p.default_time)}  "
            f"reused {p.reused}  failed {p.compile_failures} compile / {p.run_failures} run"
        )
        if self.task is None:
            learned = f", learning from {', '.join(p.transfer_from)}" if p.transfer_from else ""
            description = f"tuning on {p.device} ({p.strategy}{learned})"
            self.task = self.progress.add_task(description, total=p.budget, status=status)
            if not self.enabled and p.transfer_from:  # CI logs: say where the start came from
                stderr.print(description, highlight=False)
        self.progress.update(self.task, completed=p.evaluations, status=status)
        if not self.enabled and p.best_time is not None and p.best_time != self.best:
            self.best = p.best_time
            stderr.print(
                f"[{p.evaluations}/{p.budget}] best {_ms(p.best_time)}: {p.best_params}",
                highlight=False,
            )


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g} ms"


def _headline(error: str) -> str:
    """The line of a (compiler's) message that says what went wrong."""
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    chosen = next((line for line in lines if "error" in line.lower()), lines[0] if lines else "")
    return chosen


def _example(kind: FailureKind) -> str:
    return f"e.g. {kind.params}: {_headline(kind.error)}"


def _print_report(report: TuneReport) -> None:
    gain = speedup(report)
    stdout.print(f"device        {report.device}")
    if report.prior is not None and report.prior.tasks:
        features = report.prior.selection.describe() if report.prior.selection else "none"
        stdout.print(
            f"learned from  {', '.join(report.prior.sources)} (device features: {features})"
        )
    size = "a space too large to count" if report.space_size is None else f"{report.space_size:,}"
    stdout.print(
        f"measurements  {report.evaluations} of {size} legal "
        f"({report.reused} reused, {report.invalid} invalid)"
    )
    for kind in report.failures[:SHOWN_FAILURE_KINDS]:
        stdout.print(
            f"invalid       {kind.count} {kind.status}, {_example(kind)}",
            markup=False,
            highlight=False,
        )
    if len(report.failures) > SHOWN_FAILURE_KINDS:
        others = sum(kind.count for kind in report.failures[SHOWN_FAILURE_KINDS:])
        stdout.print(f"invalid       {others} more, failing in other ways (see --json)")
    stdout.print(f"default       {_ms(report.default.time)}  {report.default.params}")
    if report.best is not None:
        faster = f"  ({gain:.2f}x faster)" if gain else ""
        stdout.print(f"best          {_ms(report.best.time)}{faster}  {report.best.params}")
    if report.header is not None:
        stdout.print(f"header        {report.header}")
    if report.interrupted:
        stdout.print("interrupted: every measurement so far is kept; run again to resume")
