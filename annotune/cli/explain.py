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
from rich.text import Text
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
from annotune.cli.params import MAX_COUNT, device_name, output_file
from annotune.core.records import normalized_performance
from annotune.results.replay import load_replay
from annotune.results.studies import read_study
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
        Path | None,
        typer.Option(
            callback=output_file, help="Also draw the tree into this PNG (needs matplotlib)."
        ),
    ] = None,
    depth: Annotated[
        int, typer.Option(min=1, max=MAX_COUNT, help="Levels of splits in the tree.")
    ] = 4,
    device: Annotated[
        str | None,
        typer.Option(
            callback=device_name,
            help="Source file: this device's measurements (default: the newest study).",
        ),
    ] = None,
    db: DbPath = None,
    json: JsonFlag = False,
) -> None:
    """Partition the measured configurations of FILE by the parameter values that matter
    most (Starchart's regression tree) and rank the parameters by importance."""
    with user_errors():
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
    """The source's measurements (`read_study`: its newest study, on `device` when given)."""
    found = read_study(source, db_path=db, device=device)
    title = f"{source} on {found.study.key.device}"
    return Samples(title, found.names, found.values(), normalized_performance(found.times()))


def _label(node: Node, condition: str) -> Text:
    """A node's line, styled without markup: a condition holds a dataset's parameter names and
    values, which may contain `[`."""
    return Text.assemble(
        (condition, "bold"), "  ", (f"n={node.count}", "dim"), f"  mean {node.mean:.3f}"
    )


def _rich_tree(tree: Tree) -> RichTree:
    """Figure 3 of the paper as text: every node's split, sample count and mean."""
    top = RichTree(_label(tree.root, "all"))
    stack = [(tree.root, top)]
    while stack:
        node, branch = stack.pop()
        if node.low is None or node.high is None:
            continue
        for child, condition in (
            (node.low, node.condition()),
            (node.high, node.condition(high=True)),
        ):
            stack.append((child, branch.add(_label(child, condition))))
    return top


def _importance_table(tree: Tree) -> Table:
    table = Table(title="Parameter importance (share of the error removed by its splits)")
    table.add_column("parameter")
    table.add_column("importance", justify="right")
    for name, share in tree.importance():
        table.add_row(name, f"{100 * share:.1f}%")
    return table
