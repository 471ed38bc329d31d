"""`annotune predict --size N=2048`: the best configuration for a problem size never tuned.

One model over parameters x size (Bergstra et al.'s task features; ISAAC's input-aware idea)
is fitted on the studies `annotune tune --sizes` left in the results database, each size a task
whose feature is log2 of the size, and ranks the space for the new size (`adapt.zero_shot`
with the size feature always kept: CV-DFS over one feature and a few sizes would drop it on
noise, and a model without it is no model of size; `annotune bench --held-out-size` judges the
same model). With `write`, the prediction joins the committed size-aware header as an entry
marked predicted.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from annotune import __version__
from annotune.annotate import Problem, problem_space, read_problem
from annotune.core.diagnostics import AnnotuneError
from annotune.core.inputs import SOURCE, read_text
from annotune.core.records import Candidates, Number, TaskData
from annotune.emit import tuned_header_path, write_if_changed
from annotune.emit.sizes import SizeEntry, log2_size, read_size_table, render_size_header
from annotune.results.database import StudyKey, default_db_path, existing
from annotune.results.studies import size_studies
from annotune.transfer.adapt import zero_shot

MIN_SIZES = 2
"""Tuned sizes a model over size needs: with one, nothing tells how the best moves with size."""


@dataclass(frozen=True)
class SizePrediction:
    """The configuration the model over parameters x size ranks best for `size`, its predicted
    normalized performance (1.0: as fast as the best configuration), the tuned sizes it
    learned from and the header it was written into (None unless asked)."""

    device: str
    name: str
    size: int
    params: dict[str, Number]
    performance: float
    tuned_sizes: tuple[int, ...]
    header: Path | None

    def to_json(self) -> dict:
        return {
            "device": self.device,
            "size_name": self.name,
            "size": self.size,
            "params": self.params,
            "predicted_performance": self.performance,
            "learned_from_sizes": list(self.tuned_sizes),
            "header": str(self.header) if self.header else None,
        }


def predict_size(
    source: Path,
    name: str,
    size: int,
    device: str,
    *,
    config_path: Path | None = None,
    db_path: Path | None = None,
    seed: int = 0,
    write: bool = False,
    force: bool = False,
    out_dir: Path | None = None,
) -> SizePrediction:
    """Predict the best configuration of `source` at `size` of `name` on `device` from the
    other sizes tuned there. AnnotuneError when fewer than two sizes were tuned, or, with
    `write`, when there is no size-aware header of `name` to add to, or the size was measured
    (only `force` replaces a measured entry)."""
    problem = read_problem(source, config_path=config_path)
    if name in [p.name for p in problem.params]:
        raise AnnotuneError(f"'{name}' is a tuned parameter, not a problem size")
    named = db_path is not None
    db_path = db_path or default_db_path(source)
    key = StudyKey.for_problem(problem, device=device, build={})
    with ExitStack() as resources:
        db = resources.enter_context(existing(db_path))
        if db is None and named:
            raise AnnotuneError(f"no results database at {db_path}")
        studies = size_studies(db, key, name, device) if db is not None else {}
    others = {s: r for s, r in studies.items() if s != size}
    hint = f"tune at least {MIN_SIZES} sizes first: annotune tune {source} --sizes {name}=A,B,..."
    if len(others) < MIN_SIZES:
        tuned = ", ".join(map(str, others)) or "none"
        raise AnnotuneError(
            f"{source.name} was tuned at {len(others)} other size(s) of {name} on {device} "
            f"({tuned}); a model over size needs {MIN_SIZES}",
            hint=hint,
        )
    candidates, legal_count = _candidates(problem, seed)
    names = list(candidates.names)
    tasks = [
        TaskData(f"{name}={s}", record.values(names), record.times(), (log2_size(s),))
        for s, record in others.items()
    ]
    found = zero_shot(
        candidates,
        tasks,
        (log2_size(size),),
        (f"log2 {name}",),
        rng=np.random.default_rng(seed),
        select=False,
    )
    if found is None:
        raise AnnotuneError(f"no valid measurement of {source.name} at another size", hint=hint)
    row = int(found.ranking[0])
    params = {n: candidates.values[row, i].item() for i, n in enumerate(names)}
    params = {n: int(v) if float(v).is_integer() else v for n, v in params.items()}
    header = None
    if write:
        header = _write(problem, name, size, params, device, legal_count, out_dir, force)
    return SizePrediction(
        device,
        name,
        size,
        params,
        float(np.exp(found.scores[row])),
        tuple(others),
        header,
    )


def _candidates(problem: Problem, seed: int) -> tuple[Candidates, int | None]:
    space = problem_space(problem)
    legal, legal_count = space.search_rows(np.random.default_rng(seed))
    return Candidates(space.decode(legal), space.names), legal_count


def _write(
    problem: Problem,
    name: str,
    size: int,
    params: dict[str, Number],
    device: str,
    space_size: int | None,
    out_dir: Path | None,
    force: bool,
) -> Path:
    header = tuned_header_path(problem.source, device, out_dir)
    hint = f"annotune tune {problem.source} --sizes {name}=... writes it"
    if not header.is_file():
        raise AnnotuneError(f"{header}: no size-aware header to add {name} = {size} to", hint=hint)
    table = read_size_table(read_text(header, SOURCE), str(header))
    if table is None or table.name != name:
        raise AnnotuneError(f"{header} does not select per size {name}", hint=hint)
    measured = next((e for e in table.entries if e.size == size and not e.predicted), None)
    if measured is not None and not force:
        raise AnnotuneError(
            f"{header}: {name} = {size} was tuned and measured; not replacing it with a prediction",
            hint="--force replaces it",
        )
    table = table.with_entry(SizeEntry(size, params, predicted=True))
    write_if_changed(
        header,
        render_size_header(
            problem, table, device=device, space_size=space_size, tool_version=__version__
        ),
    )
    return header
