"""`annotune explain FILE`: which parameters matter, as a Starchart partition tree.

FILE is a replay dataset (Kernel Tuner cache or T4 file: every row is explained) or a tuned
source file (its measurements in the results database). The tree partitions normalized
performance, best time / time with invalid configurations at 0: node means read as "this
fraction of the best", invalid configurations count as the worst without inventing a time
for them, and the splits go where the fast configurations are, which is what a tuner needs
(log time would spend them as much on telling slow from slower). Splits removing under 1% of
the total error are not shown.

Exit codes: 0 success, 2 bad input (unreadable file, no measurements, bad option).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.table import Table
from rich.tree import Tree as RichTree

from annotune.cli.app import (
    DbPath,
    JsonFlag,
    app,
    print_json,
    require_matplotlib,
    stderr,
    stdout,
    user_errors,
)
from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import normalized_performance
from annotune.results.database import Database, default_db_path
from annotune.results.replay import load_replay
from annotune.search.partition import Node, StopRule, Tree, build_tree, plot_tree

MIN_GAIN = 0.01
"""A split shown must remove at least this share of the root's error."""


@dataclass(frozen=True)
class Samples:
    """Measured configurations to explain: `values` (m, d) over `names`, `performance` (m,)."""

    title: str
    names: tuple[str, ...]
    values: np.ndarray
    performance: np.ndarray


@app.command()
def explain(
    file: Annotated[
        Path,
        typer.Argument(help="A replay dataset (.json/.json.gz) or a tuned source file."),
    ],
    plot: Annotated[
        Path | None, typer.Option(help="Also draw the tree into this PNG (needs matplotlib).")
    ] = None,
    depth: Annotated[int, typer.Option(help="Levels of splits in the tree.")] = 4,
    device: Annotated[
        str | None,
        typer.Option(help="Source file: this device's measurements (default: the most)."),
    ] = None,
    db: DbPath = None,
    json: JsonFlag = False,
) -> None:
    """Partition the measured configurations of FILE by the parameter values that matter
    most (Starchart's regression tree) and rank the parameters by importance."""
    with user_errors():
        if depth < 1:
            raise AnnotuneError("--depth must be at least 1")
        if plot is not None:
            require_matplotlib()
        samples = _replay(file) if _is_replay(file) else _measured(file, db, device)
        rule = StopRule(min_gain=MIN_GAIN, max_depth=depth)
        tree = build_tree(samples.values, samples.performance, samples.names, rule)
        if plot is not None:
            plot_tree(tree, plot, target="performance")
    if json:
        print_json(
            {
                "tree": tree.root.to_json(),
                "importance": [
                    {"parameter": name, "importance": share} for name, share in tree.importance()
                ],
                "samples": tree.root.count,
            }
        )
        return
    stdout.print(
        f"{samples.title}: {tree.root.count} configurations;"
        " performance = best time / time (invalid = 0)",
        highlight=False,
    )
    stdout.print(_rich_tree(tree))
    stdout.print(_importance_table(tree))
    if plot is not None:
        stderr.print(f"wrote the tree to {plot}", highlight=False)


def _is_replay(file: Path) -> bool:
    return file.name.endswith((".json", ".json.gz"))


def _replay(file: Path) -> Samples:
    dataset = load_replay(file)
    values = dataset.candidates.values
    return Samples(dataset.name, dataset.names, values, dataset.normalized())


def _measured(source: Path, db: Path | None, device: str | None) -> Samples:
    """The source's measurements on one device: `device`, else the one with the most."""
    if not source.is_file():
        raise AnnotuneError(f"{source}: no such file")
    db_path = db or default_db_path(source)
    hint = f"run 'annotune tune {source}' first"
    if not db_path.is_file():
        raise AnnotuneError(f"no results database at {db_path}", hint=hint)
    with Database(db_path) as database:
        studies = [
            (study, database.measurements(study))
            for study in database.studies()
            if _same_file(study.key.source, source)
            and (device is None or study.key.device == device)
        ]
    studies = [(study, found) for study, found in studies if found]
    if not studies:
        on = f" on device '{device}'" if device else ""
        raise AnnotuneError(f"no measurements of {source}{on} in {db_path}", hint=hint)
    study, found = max(studies, key=lambda pair: len(pair[1]))
    names = tuple(str(param["name"]) for param in study.key.space["params"])
    values = np.array([[float(m.params[n]) for n in names] for m in found], dtype=np.float64)
    times = np.array([np.nan if m.time is None else m.time for m in found], dtype=np.float64)
    title = f"{source} on {study.key.device}"
    return Samples(title, names, values, normalized_performance(times))


def _same_file(recorded: str, source: Path) -> bool:
    """Whether a study's source (as the user typed it at tune time) is this file: the same
    path, or, when it was recorded relative to another directory, the same name."""
    path = Path(recorded)
    if path.is_absolute() or path.exists():
        return path.resolve() == source.resolve()
    return path.name == source.name


def _label(node: Node, condition: str) -> str:
    return f"{condition}  [dim]n={node.count}[/]  mean {node.mean:.3f}"


def _rich_tree(tree: Tree) -> RichTree:
    """Figure 3 of the paper as text: every node's split, sample count and mean."""
    top = RichTree(_label(tree.root, "[bold]all[/]"))
    stack = [(tree.root, top)]
    while stack:
        node, branch = stack.pop()
        if node.low is None or node.high is None:
            continue
        for child, condition in (
            (node.low, node.condition()),
            (node.high, node.condition(high=True)),
        ):
            stack.append((child, branch.add(_label(child, f"[bold]{condition}[/]"))))
    return top


def _importance_table(tree: Tree) -> Table:
    table = Table(title="Parameter importance (share of the error removed by its splits)")
    table.add_column("parameter")
    table.add_column("importance", justify="right")
    for name, share in tree.importance():
        table.add_row(name, f"{100 * share:.1f}%")
    return table
