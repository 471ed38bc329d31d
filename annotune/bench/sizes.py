"""Leave-one-size-out: what a size-aware header reaches at a problem size it was not tuned for.

Datasets of one kernel, device and parameters at different problem sizes are given; each size
is held out in turn and the others play the tuned sizes. For the held-out size this reports the
fraction of its optimum (its best recorded time / the recorded time there of the chosen
configuration; 0 when that configuration is invalid or not recorded there) reached by:

* nearest: the best configuration of the tuned size nearest in log space (distance: the sum
  over size dimensions of |log2 a - log2 b|; on a tie, the larger size), the rule the header
  uses for a size it was not tuned for;
* model: the configuration `annotune.transfer.adapt.zero_shot` ranks first, with the tuned
  sizes as tasks whose features are the log2 of each problem-size value (the alternative the
  header may use between tuned sizes);
* single best: one configuration for every size, the one with the highest geometric mean of
  normalized performance over the tuned sizes among those recorded at all of them (what a
  header without sizes would hold);
* default: the configuration the caller names as the default, when it does.

ISAAC (Tillet and Cox) motivates the comparison: the best parameters move with the input
shape, so a single configuration leaves performance behind that a per-size choice recovers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import TaskData
from annotune.results.replay import ReplayDataset
from annotune.search.multitask import match_rows
from annotune.transfer.adapt import Selection, zero_shot

METHODS = ("nearest", "model", "single_best", "default")


@dataclass(frozen=True)
class Choice:
    """A configuration picked for the held-out size (values in the datasets' parameter order)
    and the fraction of the held-out size's optimum it reaches there."""

    config: tuple[float, ...]
    fraction: float

    def to_json(self, names: Sequence[str]) -> dict[str, Any]:
        values = dict(zip(names, _plain(self.config), strict=True))
        return {"config": values, "fraction": self.fraction}


@dataclass(frozen=True)
class SizeRow:
    """The leave-one-out result for one held-out problem size.

    `between`: the held-out size lies within the tuned sizes' range in every dimension (the
    header interpolates rather than extrapolates). `warnings` say what the figures rest on,
    e.g. configurations of the tuned sizes not recorded at this one.
    """

    dataset: str
    problem_size: tuple[float, ...]
    tuned: tuple[tuple[float, ...], ...]
    between: bool
    names: tuple[str, ...]
    best: tuple[float, ...]
    nearest_size: tuple[float, ...]
    nearest: Choice
    model: Choice
    features: Selection
    single_best: Choice
    default: Choice | None = None
    warnings: tuple[str, ...] = ()

    def choice(self, method: str) -> Choice | None:
        """The choice of one of `METHODS`."""
        return getattr(self, method)

    def to_json(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "problem_size": _plain(self.problem_size),
            "tuned_sizes": [_plain(s) for s in self.tuned],
            "between": self.between,
            "best_config": Choice(self.best, 1.0).to_json(self.names)["config"],
            "nearest_size": _plain(self.nearest_size),
            **{
                m: c.to_json(self.names) if (c := self.choice(m)) is not None else None
                for m in METHODS
            },
            "model_features": self.features.to_json(),
            "warnings": list(self.warnings),
        }


def _plain(size: tuple[float, ...]) -> list[int | float]:
    return [int(v) if float(v).is_integer() else v for v in size]


def held_out_sizes(
    datasets: Sequence[ReplayDataset],
    *,
    seed: int = 0,
    default: Mapping[str, float] | None = None,
) -> list[SizeRow]:
    """Hold each problem size out in turn (see the module docstring); rows by size.

    `seed` drives the model's forests; `default` names the default configuration (every
    parameter) to report beside the others. AnnotuneError when the datasets are not one
    kernel's space at two problem sizes or more (`check_sizes`).
    """
    check_sizes(datasets)
    names = datasets[0].names
    default_row = _default_row(default, names) if default is not None else None
    ordered = sorted(datasets, key=lambda d: d.problem_size)
    return [
        _leave_out(held, [d for d in ordered if d is not held], default_row, seed)
        for held in ordered
    ]


def check_sizes(datasets: Sequence[ReplayDataset]) -> None:
    """AnnotuneError unless the datasets are one kernel on one device over the same parameters,
    each at its own positive problem size of the same dimension, two sizes or more, with a
    valid time each and at least one configuration recorded at every size."""
    if len(datasets) < 2:
        raise AnnotuneError(
            "leaving one problem size out needs datasets at two sizes or more",
            hint="give the Kernel Tuner caches (or T4 files) of one kernel at several sizes",
        )
    first = datasets[0]
    seen: dict[tuple[float, ...], str] = {}
    for dataset in datasets:
        size = dataset.problem_size
        if not size:
            raise AnnotuneError(
                f"{dataset.name}: the file gives no problem size",
                hint="a Kernel Tuner cache names it in 'problem_size' (a number or a list)",
            )
        if not all(math.isfinite(v) and v > 0 for v in size):
            raise AnnotuneError(f"{dataset.name}: problem size {list(size)} is not all positive")
        for what, mine, theirs in (
            ("parameters", dataset.names, first.names),
            ("kernel", dataset.kernel, first.kernel),
            ("device", dataset.device, first.device),
            ("problem-size dimensions", len(size), len(first.problem_size)),
        ):
            if mine != theirs:
                raise AnnotuneError(
                    f"{dataset.name}: {what} {mine!r} differ from {first.name}'s {theirs!r}",
                    hint="leave-one-size-out compares one kernel's space on one device",
                )
        if size in seen:
            raise AnnotuneError(
                f"{dataset.name}: problem size {_plain(size)} is also {seen[size]}'s",
                hint="give one dataset per problem size",
            )
        seen[size] = dataset.name
        if np.isnan(dataset.times).all():
            raise AnnotuneError(f"{dataset.name}: no configuration has a valid time")
    if not _shared_rows(datasets).size:
        raise AnnotuneError(
            f"no configuration is recorded at every problem size (in {first.name}'s space)",
            hint="the datasets must share a space: the same configurations at every size",
        )


def mean_fractions(rows: Sequence[SizeRow]) -> dict[str, float]:
    """Each method's mean fraction of the optimum over the held-out sizes (the methods every
    row has)."""
    means = {}
    for method in METHODS:
        fractions = [c.fraction for row in rows if (c := row.choice(method)) is not None]
        if rows and len(fractions) == len(rows):
            means[method] = float(np.mean(fractions))
    return means


def _default_row(default: Mapping[str, float], names: Sequence[str]) -> tuple[float, ...]:
    missing = [n for n in names if n not in default]
    unknown = [n for n in default if n not in names]
    if missing or unknown:
        raise AnnotuneError(
            f"the default configuration must name each parameter ({', '.join(names)}): "
            + "; ".join(
                part
                for part in (
                    f"missing {', '.join(missing)}" if missing else "",
                    f"unknown {', '.join(unknown)}" if unknown else "",
                )
                if part
            )
        )
    return tuple(float(default[n]) for n in names)


def _leave_out(
    held: ReplayDataset,
    tuned: Sequence[ReplayDataset],
    default: tuple[float, ...] | None,
    seed: int,
) -> SizeRow:
    size = held.problem_size
    nearest = min(tuned, key=lambda d: _nearness(size, d.problem_size))
    favourite = nearest.candidates.values[int(np.nanargmin(nearest.times))]

    log_size = tuple(math.log2(v) for v in size)
    tasks = [
        TaskData(d.name, d.candidates.values, d.times, tuple(math.log2(v) for v in d.problem_size))
        for d in tuned
    ]
    labels = tuple(f"log2 problem_size[{i}]" for i in range(len(size)))
    found = zero_shot(  # the size feature always kept, as `predict --size` keeps it
        held.candidates, tasks, log_size, labels, rng=np.random.default_rng(seed), select=False
    )
    if found is None:
        raise AnnotuneError(f"{held.name}: no other size has a valid time for its configurations")
    picked = held.candidates.values[int(found.ranking[0])]

    shared = _shared_rows(tuned)
    scores = np.column_stack([_performance(d, shared) for d in tuned])
    with np.errstate(divide="ignore"):
        geomean = np.exp(np.log(scores).mean(axis=1))
    single = shared[int(np.argmax(geomean))]

    warnings = []
    missing = len(shared) - len(_shared_rows([*tuned, held]))
    if missing:
        warnings.append(
            f"{held.name}: {missing} configurations recorded at every tuned size are not here"
        )
    if default is not None and _performance(held, np.array([default]))[0] == 0.0:
        warnings.append(f"{held.name}: the default configuration is invalid or not recorded")
    return SizeRow(
        dataset=held.name,
        problem_size=size,
        tuned=tuple(d.problem_size for d in tuned),
        between=all(
            min(d.problem_size[i] for d in tuned) <= v <= max(d.problem_size[i] for d in tuned)
            for i, v in enumerate(size)
        ),
        names=held.names,
        best=tuple(held.candidates.values[int(np.nanargmin(held.times))]),
        nearest_size=nearest.problem_size,
        nearest=_choice(held, favourite),
        model=_choice(held, picked),
        features=found.selection,
        single_best=_choice(held, single),
        default=_choice(held, np.array(default)) if default is not None else None,
        warnings=tuple(warnings),
    )


def _nearness(size: tuple[float, ...], other: tuple[float, ...]) -> tuple[float, ...]:
    """Sort key: log-space distance first; on a tie the larger size (by its total log2, then
    dimension by dimension)."""
    distance = sum(abs(math.log2(a) - math.log2(b)) for a, b in zip(size, other, strict=True))
    return (distance, -sum(math.log2(b) for b in other), *(-b for b in other))


def _choice(held: ReplayDataset, config: np.ndarray) -> Choice:
    return Choice(tuple(float(v) for v in config), float(_performance(held, config[None, :])[0]))


def _performance(dataset: ReplayDataset, configs: np.ndarray) -> np.ndarray:
    """Normalized performance in `dataset` of each configuration row (0 where not recorded)."""
    rows = match_rows(dataset.candidates.values, configs)
    normalized = dataset.normalized()
    return np.where(rows >= 0, normalized[np.maximum(rows, 0)], 0.0)


def _shared_rows(datasets: Sequence[ReplayDataset]) -> np.ndarray:
    """The configurations (value rows) recorded in every dataset, in the first one's order."""
    values = datasets[0].candidates.values
    keep = np.ones(len(values), dtype=bool)
    for other in datasets[1:]:
        keep &= match_rows(other.candidates.values, values) >= 0
    return values[keep]
