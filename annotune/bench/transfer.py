"""Leave-one-GPU-out evaluation of architecture-adaptive transfer on replay datasets.

Datasets that share a space (the same parameter names and the same set of configurations,
matched by value, not by row order) form a group. Each GPU of a group is held out in turn as
the target; the others are its sources. For the target this reports:

* Standards 1 and 2 (`annotune.bench`) of the `transfer` strategy warm-started from the
  sources, and of plain `iterml` from scratch, over the same seeds, beside random search's
  exact values and the 1% mark (1% of the space);
* the zero-shot prediction: the configuration the transferred model ranks best, with no
  measurement on the target, as a normalized performance on the target;
* the naive baseline: each source GPU's best configuration measured on the target, the best
  of those normalized performances (and whose it was);
* the device features CV-DFS chose (`annotune.transfer.adapt.select_features`).

The selection and the zero-shot prediction are one `annotune.transfer.adapt.zero_shot` per
target, what one `annotune predict` does. Device features come from `resolve.resolve_dataset`
(a T4 file's metadata, else the user's table, else the shipped one); a GPU known nowhere never
stops the run: the nearest known GPU of its vendor and architecture stands in, or the model
uses only the features every GPU of the group has, and the row's `warnings` say so. What it
measured on the shared replay data is in docs/experiments/transfer.md.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from annotune.bench import RunTrace, Standards, bench, random_standards
from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import TaskData
from annotune.results.replay import ReplayDataset
from annotune.search.multitask import match_rows
from annotune.transfer.adapt import Selection, ZeroShot, zero_shot
from annotune.transfer.features import dataset_device
from annotune.transfer.resolve import GpuTable, Resolved, resolve_dataset, shared_names

ONE_PERCENT = 0.01


@dataclass(frozen=True)
class TransferRow:
    """The leave-one-out result for one target GPU."""

    dataset: str
    device: str
    size: int
    sources: tuple[str, ...]
    features: Selection
    transfer: Standards
    iterml: Standards
    random: Standards
    one_percent: int
    cap: int
    zero_shot: float
    naive: float
    naive_source: str
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "device": self.device,
            "size": self.size,
            "sources": list(self.sources),
            **self.features.to_json(),
            "transfer_std1_evals": self.transfer.std1,
            "transfer_std2_evals": self.transfer.std2,
            "iterml_std1_evals": self.iterml.std1,
            "iterml_std2_evals": self.iterml.std2,
            "random_std1_evals": self.random.std1,
            "random_std2_evals": self.random.std2,
            "one_percent_evals": self.one_percent,
            "cap": self.cap,
            "zero_shot": self.zero_shot,
            "naive": self.naive,
            "naive_source": self.naive_source,
            "warnings": list(self.warnings),
        }


def device_features(dataset: ReplayDataset, gpus: GpuTable | None = None) -> Resolved:
    """The dataset's device features (`resolve.resolve_dataset`): never unknown, but perhaps
    partial or a stand-in's (its warnings say); AnnotuneError when the file's own are
    malformed."""
    try:
        return resolve_dataset(dataset, gpus)
    except ValueError as error:
        raise AnnotuneError(f"{dataset.name}: {error}") from None


def group_by_space(datasets: Sequence[ReplayDataset]) -> list[list[ReplayDataset]]:
    """Datasets of one kernel and problem size over the same parameters and configurations.

    The kernel and problem size count too (when the files name them): two kernels that
    happen to share parameter names are not one space, and a GPU's best tile for one
    problem size is not a prediction for another.
    """
    groups: dict[str, list[ReplayDataset]] = {}
    for dataset in datasets:
        groups.setdefault(_space_key(dataset), []).append(dataset)
    return list(groups.values())


def _space_key(dataset: ReplayDataset) -> str:
    rows = np.ascontiguousarray(dataset.candidates.values)
    digest = hashlib.sha256(repr((dataset.names, dataset.kernel, dataset.problem_size)).encode())
    for row in sorted(r.tobytes() for r in rows):
        digest.update(row)
    return digest.hexdigest()


def as_task(dataset: ReplayDataset, features: Resolved, names: Sequence[str]) -> TaskData:
    """A source GPU for the transfer strategy: its device features `names`, in that order."""
    vector = features.vector(names)
    name = dataset_device(dataset)
    return TaskData(name, dataset.candidates.values, dataset.times, tuple(vector))


def naive_baseline(target: ReplayDataset, sources: Sequence[ReplayDataset]) -> tuple[float, str]:
    """The best normalized performance on `target` among the sources' best configurations."""
    normalized = target.normalized()
    best, whose = 0.0, ""
    for source in sources:
        if np.isnan(source.times).all():
            continue
        favourite = source.candidates.values[[np.nanargmin(source.times)]]
        (row,) = match_rows(target.candidates.values, favourite)
        value = float(normalized[row]) if row >= 0 else 0.0
        if value > best or not whose:
            best, whose = value, dataset_device(source)
    return best, whose


def transfer_bench(
    datasets: Sequence[ReplayDataset],
    *,
    repeats: int = 100,
    seed: int = 0,
    cap: int | None = None,
    workers: int | None = None,
    options: dict[str, Any] | None = None,
    on_run: Callable[[str, RunTrace], None] | None = None,
    gpus: GpuTable | None = None,
) -> list[TransferRow]:
    """Leave each GPU of each group out in turn (see the module docstring).

    `options` go to the `transfer` strategy (lead, IterML's options, ...); IterML runs with
    its defaults. `gpus`: the user's GPU entries, over the shipped table. AnnotuneError when
    a dataset shares its space with no other one, or its own device features are malformed;
    an unknown GPU is a warning on its rows, never an error.
    """
    groups = group_by_space(datasets)
    for group in groups:
        if len(group) < 2:
            raise AnnotuneError(
                f"{group[0].name}: no other dataset given shares its space",
                hint="leave-one-GPU-out needs at least two GPUs' results of the same space",
            )
    # Read every file's features before any run: a malformed one fails at once.
    features = {id(d): device_features(d, gpus) for group in groups for d in group}
    rows = []
    for group in groups:
        known = [features[id(d)] for d in group]
        for target in group:
            rows.append(
                _leave_out(target, group, known, repeats, seed, cap, workers, options, on_run)
            )
    return rows


def warm_start(
    target: ReplayDataset,
    group: Sequence[ReplayDataset],
    features: Sequence[Resolved],
    seed: int,
) -> tuple[ZeroShot, dict[str, Any]] | None:
    """The zero-shot for `target` from the other datasets of `group` (device features chosen by
    CV-DFS; `features` in the group's order) and the transfer strategy's options it warm-starts:
    the prior over the chosen features and the target's values of them. None when no other
    GPU has a valid measurement."""
    sources = [d for d in group if d is not target]
    by_dataset = {id(d): f for d, f in zip(group, features, strict=True)}
    # The features every GPU of the group has: all, unless one is known by its name alone.
    names = shared_names(features)
    full = [as_task(s, by_dataset[id(s)], names) for s in sources]
    target_full = by_dataset[id(target)].vector(names)
    found = zero_shot(target.candidates, full, target_full, names, rng=np.random.default_rng(seed))
    if found is None:
        return None
    columns = list(found.selection.columns)
    chosen = [names[c] for c in columns]
    return found, {
        "prior": [as_task(s, by_dataset[id(s)], chosen) for s in sources],
        "task_features": tuple(target_full[columns]),
    }


def _leave_out(
    target: ReplayDataset,
    group: Sequence[ReplayDataset],
    features: Sequence[Resolved],
    repeats: int,
    seed: int,
    cap: int | None,
    workers: int | None,
    options: dict[str, Any] | None,
    on_run: Callable[[str, RunTrace], None] | None,
) -> TransferRow:
    sources = [d for d in group if d is not target]
    warm = warm_start(target, group, features, seed)
    if warm is None:
        raise AnnotuneError(f"{target.name}: no source GPU has a valid measurement")
    found, warm_options = warm
    selection = found.selection
    first_pick = float(target.normalized()[found.ranking[0]])
    naive, naive_source = naive_baseline(target, sources)
    transfer_options = {**(options or {}), **warm_options}
    results = bench(
        target,
        ["transfer", "iterml"],
        repeats=repeats,
        seed=seed,
        cap=cap,
        options={"transfer": transfer_options},
        workers=workers,
        on_run=on_run,
    )
    by_name = {row.strategy: row for row in results}
    return TransferRow(
        dataset=target.name,
        device=dataset_device(target),
        size=len(target),
        sources=tuple(dataset_device(s) for s in sources),
        features=selection,
        transfer=by_name["transfer"].standards,
        iterml=by_name["iterml"].standards,
        random=random_standards(target.normalized()),
        one_percent=math.floor(ONE_PERCENT * len(target)),
        cap=by_name["transfer"].cap,
        zero_shot=first_pick,
        naive=naive,
        naive_source=naive_source,
        warnings=tuple(w for f in features for w in f.warnings),
    )
