"""`annotune bench`: judge search strategies on replay datasets by the IterML paper's standards.

`--transfer` instead leaves each GPU out of every group of datasets that share a space and
compares the `transfer` strategy (warm-started from the other GPUs) with IterML from scratch
on it (`annotune.bench.transfer`). Device features come from `--gpus FILE` and the `[[gpu]]`
entries of the annotune.toml found from the current directory, over annotune's own table; a GPU
known nowhere is a warning on stderr (which GPU stood in, which features are missing), never an
error.

`--held-out-size` leaves each problem size out of datasets of one kernel at several sizes and
prints the fraction of its optimum reached by the nearest tuned size's best configuration, the
model's choice and the single best configuration of the other sizes (`annotune.bench.sizes`).

Exit codes: 0 success, 2 bad input (missing or unreadable dataset, bad option), 130
interrupted. With --json, stdout holds exactly one JSON object; progress goes to stderr.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

from annotune.annotate.config import find_config
from annotune.bench import BenchRow, RunTrace, bench, load_recordings, plot_boxes, size_prior
from annotune.bench.sizes import SizeRow, held_out_sizes, mean_fractions
from annotune.bench.transfer import TransferRow, transfer_bench
from annotune.cli.app import app, print_json, require_matplotlib, stderr, stdout, user_errors
from annotune.cli.params import MAX_COUNT, MAX_SEED, GpusOption, one_of, output_file
from annotune.core.diagnostics import AnnotuneError
from annotune.results.replay import ReplayDataset
from annotune.search import STRATEGY_NAMES
from annotune.transfer.resolve import GpuTable, user_table

_STRATEGY_HELP = f"Repeatable; one of: {', '.join(STRATEGY_NAMES)}."
_known_strategies = one_of(STRATEGY_NAMES)


@app.command("bench")
def bench_command(
    datasets: list[Path] = typer.Argument(  # noqa: B008
        ..., help="Kernel Tuner cache (.json/.json.gz) or T4 results files."
    ),
    strategy: list[str] = typer.Option(  # noqa: B008
        ["iterml"], "--strategy", "-s", callback=_known_strategies, help=_STRATEGY_HELP
    ),
    repeats: int = typer.Option(
        100, min=1, max=MAX_COUNT, help="Runs (seeds) per dataset and strategy."
    ),
    seed: int = typer.Option(
        0, min=0, max=MAX_SEED, help="Seed from which every run's seed is derived."
    ),
    max_evals: int | None = typer.Option(
        None,
        min=1,
        max=MAX_COUNT,
        help="Cap on measurements per run (default: random search's exact Standard 2).",
    ),
    workers: int | None = typer.Option(
        None, min=1, max=MAX_COUNT, help="Processes (default: all cores)."
    ),
    json_output: bool = typer.Option(False, "--json", help="Print one JSON object only."),
    plot: Path | None = typer.Option(  # noqa: B008
        None,
        callback=output_file,
        help="Write Figure-14 style box plots to this PNG (needs matplotlib).",
    ),
    transfer: bool = typer.Option(
        False,
        "--transfer",
        help="Leave each GPU out of the datasets that share a space: transfer from the others "
        "against IterML from scratch, zero-shot and naive baselines (--strategy is ignored).",
    ),
    across_sizes: bool = typer.Option(
        False,
        "--across-sizes",
        help="predictive: learn each dataset from the given datasets of the same kernel at "
        "other problem sizes (their problem sizes are the model's task features).",
    ),
    held_out_size: bool = typer.Option(
        False,
        "--held-out-size",
        help="Leave each problem size out of datasets of one kernel at several sizes: the "
        "nearest tuned size's best, the model's choice and the single best configuration of the "
        "others, as fractions of its optimum (--seed seeds the model; --strategy is ignored).",
    ),
    gpus: GpusOption = None,
) -> None:
    """Measurements each strategy needs for Standard 1 (median of best >= 0.95) and
    Standard 2 (5th percentile >= 0.95), beside the exact values for random search."""
    with user_errors():
        loaded = load_recordings(datasets)
        if held_out_size:
            for flag, given in (
                ("--transfer", transfer),
                ("--across-sizes", across_sizes),
                ("--plot", plot is not None),
            ):
                if given:
                    raise AnnotuneError(f"{flag} does not combine with --held-out-size")
            _held_out_size(loaded, seed, json_output)
            return
        if transfer:
            if plot is not None:
                raise AnnotuneError("--plot does not combine with --transfer")
            table = user_table(gpus, find_config(Path.cwd() / "annotune.toml"))
            _transfer(loaded, repeats, seed, max_evals, workers, json_output, table)
            return
        if plot is not None:
            require_matplotlib()
        rows: list[BenchRow] = []
        total = len(loaded) * len(strategy) * repeats
        show = not json_output and stderr.is_terminal
        with Progress(console=stderr, disable=not show, transient=True) as progress:
            task = progress.add_task("bench", total=total)
            for dataset in loaded:
                progress.update(task, description=escape(dataset.name))  # a file's name

                def advance(_name: str, _trace: RunTrace) -> None:
                    progress.advance(task)

                options = {"predictive": size_prior(dataset, loaded)} if across_sizes else None
                rows.extend(
                    bench(
                        dataset,
                        strategy,
                        repeats=repeats,
                        seed=seed,
                        cap=max_evals,
                        options=options,
                        workers=workers,
                        on_run=advance,
                    )
                )
        if plot is not None:
            plot_boxes(rows, {d.name: d.normalized() for d in loaded}, plot)
        if json_output:
            print_json({"results": [row.to_json() for row in rows]})
        else:
            stdout.print(_table(rows))


def _table(rows: list[BenchRow]) -> Table:
    def cell(value: int | None, cap: int) -> str:
        return f"> {cap}" if value is None else str(value)

    def share(value: int | None, reference: int | None) -> str:
        if value is None or not reference:
            return "-"
        return f"{100 * value / reference:.0f}%"

    table = Table(title="Measurements to reach 0.95 of the best (Standard 1 / Standard 2)")
    for column in (
        "dataset",
        "strategy",
        "size",
        "std1",
        "std2",
        "random std1",
        "random std2",
        "std1 vs random",
        "std2 vs random",
    ):
        table.add_column(column, justify="left" if column in ("dataset", "strategy") else "right")
    for row in rows:
        s, r = row.standards, row.random
        table.add_row(
            row.dataset,
            row.strategy,
            str(row.size),
            cell(s.std1, row.cap),
            cell(s.std2, row.cap),
            cell(r.std1, row.size),
            cell(r.std2, row.size),
            share(s.std1, r.std1),
            share(s.std2, r.std2),
        )
    return table


def _transfer(
    loaded: list[ReplayDataset],
    repeats: int,
    seed: int,
    cap: int | None,
    workers: int | None,
    as_json: bool,
    gpus: GpuTable,
) -> None:
    show = not as_json and stderr.is_terminal
    with Progress(console=stderr, disable=not show, transient=True) as progress:
        task = progress.add_task("leave one GPU out", total=len(loaded) * 2 * repeats)
        rows = transfer_bench(
            loaded,
            repeats=repeats,
            seed=seed,
            cap=cap,
            workers=workers,
            on_run=lambda _name, _trace: progress.advance(task),
            gpus=gpus,
        )
    for warning in dict.fromkeys(w for row in rows for w in row.warnings):
        stderr.print(f"annotune: warning: {warning}", markup=False, highlight=False)
    if as_json:
        print_json({"results": [row.to_json() for row in rows]})
    else:
        stdout.print(_transfer_table(rows))


def _transfer_table(rows: list[TransferRow]) -> Table:
    def cell(value: int | None, cap: int) -> str:
        return f"> {cap}" if value is None else str(value)

    table = Table(
        title="Leave one GPU out: measurements to reach 0.95 of the held-out GPU's best "
        "(Standard 1 / Standard 2); zero-shot and naive as normalized performance"
    )
    columns = (
        "target",
        "sources",
        "features",
        "transfer",
        "iterml",
        "random",
        "1%",
        "zero-shot",
        "naive",
    )
    for column in columns:
        table.add_column(column, justify="left" if column in columns[:3] else "right")
    for row in rows:
        table.add_row(
            row.device,
            ", ".join(row.sources),
            row.features.describe(),
            f"{cell(row.transfer.std1, row.cap)} / {cell(row.transfer.std2, row.cap)}",
            f"{cell(row.iterml.std1, row.cap)} / {cell(row.iterml.std2, row.cap)}",
            f"{cell(row.random.std1, row.size)} / {cell(row.random.std2, row.size)}",
            str(row.one_percent),
            f"{row.zero_shot:.3f}",
            f"{row.naive:.3f} ({row.naive_source})",
        )
    return table


def _held_out_size(loaded: list[ReplayDataset], seed: int, as_json: bool) -> None:
    rows = held_out_sizes(loaded, seed=seed)
    for warning in dict.fromkeys(w for row in rows for w in row.warnings):
        stderr.print(f"annotune: warning: {warning}", markup=False, highlight=False)
    if as_json:
        print_json({"results": [row.to_json() for row in rows], "mean": mean_fractions(rows)})
    else:
        stdout.print(_size_table(rows))


def _size_table(rows: list[SizeRow]) -> Table:
    def number(value: float) -> str:
        return str(int(value)) if float(value).is_integer() else f"{value:g}"

    def size(values: tuple[float, ...]) -> str:
        return "x".join(number(v) for v in values)

    def config(values: tuple[float, ...]) -> str:
        return ",".join(number(v) for v in values)

    table = Table(
        title="Leave one problem size out: fraction of the held-out size's optimum reached "
        f"(configurations as {','.join(rows[0].names)})"
    )
    columns = ("held out", "tuned", "best there", "nearest", "model", "size feature", "single best")
    for column in columns:
        fraction = column in ("nearest", "model", "single best")
        table.add_column(column, justify="right" if fraction else "left")
    for row in rows:
        table.add_row(
            size(row.problem_size) + ("" if row.between else " (outside)"),
            " ".join(size(s) for s in row.tuned),
            config(row.best),
            f"{row.nearest.fraction:.3f} ({size(row.nearest_size)}: {config(row.nearest.config)})",
            f"{row.model.fraction:.3f} ({config(row.model.config)})",
            row.features.describe(),
            f"{row.single_best.fraction:.3f} ({config(row.single_best.config)})",
        )
    means = mean_fractions(rows)
    table.add_row(
        "mean",
        "",
        "",
        f"{means['nearest']:.3f}",
        f"{means['model']:.3f}",
        "",
        f"{means['single_best']:.3f}",
    )
    return table
