"""Learning from other GPUs: their measurements of a source gathered for transfer, and the
zero-shot prediction for a GPU with none.

Sources are the results database's studies of the same source content and space on other
devices, and result files the user names (T4 or Kernel Tuner caches). Each source needs device
features (from its study or file, else the table); CV-DFS (`annotune.transfer.adapt`) then
chooses which of them the model uses. `tune` hands the result to the `transfer` strategy;
`predict` ranks the space with it (`adapt.zero_shot`) and measures nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from annotune import __version__
from annotune.annotate import Problem, problem_space
from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import Candidates, Number, TaskData
from annotune.emit import PREDICTED, render_header, tuned_header_path, write_if_changed
from annotune.results.database import Database, StudyKey, default_db_path, existing
from annotune.results.replay import load_replay
from annotune.results.studies import studies_elsewhere
from annotune.search.multitask import encode_space, sources_for
from annotune.transfer.adapt import Selection, select_features, zero_shot
from annotune.transfer.features import (
    FEATURE_NAMES,
    DeviceFeatures,
    dataset_device,
    dataset_features,
    features_for,
    lookup,
)

TRANSFER_STRATEGIES = ("iterml", "transfer")
"""The strategies that `tune` warm-starts from other GPUs' results (others run as asked)."""


@dataclass(frozen=True)
class Prior:
    """Other GPUs' measurements of this space, ready for the `transfer` strategy.

    `tasks` carry the device features CV-DFS chose (`selection`), `target_features` the same
    features of the GPU being tuned; `warnings` say what could not be used and why. Empty
    when there is nothing to learn from.
    """

    tasks: tuple[TaskData, ...] = ()
    target_features: tuple[float, ...] = ()
    selection: Selection | None = None
    warnings: tuple[str, ...] = ()

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(task.name for task in self.tasks)

    def options(self) -> dict:
        """The `transfer` strategy's options."""
        return {"prior": self.tasks, "task_features": self.target_features}

    def to_json(self) -> dict:
        selection = self.selection.to_json() if self.selection else {}
        return {"sources": list(self.sources), **selection}


@dataclass(frozen=True)
class _Found:
    device: str
    values: np.ndarray
    times: np.ndarray
    features: DeviceFeatures | None


def gather_prior(
    candidates: Candidates,
    key: StudyKey,
    target: DeviceFeatures | None,
    *,
    db: Database | None,
    files: Sequence[Path] = (),
    rng: np.random.Generator,
) -> Prior:
    """What other GPUs measured of `key`'s source and space: the database's studies of the
    same content and space on other devices (per device, the one with the most measurements)
    and the results `files` (T4 or Kernel Tuner caches), with device features from the study
    or file, else the table. A file whose parameters are not the space's is an AnnotuneError;
    unknown device features are a warning (the source, or all transfer when the target's, is
    skipped)."""
    tasks, warnings = _gather(candidates, key, target, db=db, files=files)
    sources = sources_for(tasks, candidates)
    if not sources:  # also when the target's features are unknown: no tasks then
        return Prior(warnings=warnings)
    selection = select_features(encode_space(candidates), sources, FEATURE_NAMES, rng=rng)
    usable = {source.name for source in sources}
    return _chosen(tasks, usable, target, selection, warnings)


def _gather(
    candidates: Candidates,
    key: StudyKey,
    target: DeviceFeatures | None,
    *,
    db: Database | None,
    files: Sequence[Path],
) -> tuple[list[TaskData], tuple[str, ...]]:
    """The other GPUs' results (see `gather_prior`) with every device feature, and what could
    not be used; no results when the target's features are unknown."""
    found = _from_database(db, key, candidates.names) if db is not None else []
    warnings: list[str] = []
    for path in files:
        source = _from_file(path, candidates.names)
        if source.device == key.device:
            warnings.append(f"{path}: measured on {key.device} itself; not learning from it")
        else:
            found.append(source)
    by_device: dict[str, _Found] = {}
    for source in found:  # the first of a device (the database's) unless a later has more
        known = by_device.get(source.device)
        if known is None or source.times.size > known.times.size:
            by_device[source.device] = source
    if not by_device:
        return [], tuple(warnings)
    if target is None:
        names = ", ".join(by_device)
        warnings.append(
            f"no device features known for '{key.device}': not learning from {names} "
            "(searching with iterml alone)"
        )
        return [], tuple(warnings)
    tasks = []
    for source in by_device.values():
        if source.features is None:
            warnings.append(f"no device features known for '{source.device}': not learning from it")
            continue
        vector = tuple(source.features.vector(FEATURE_NAMES))
        tasks.append(TaskData(source.device, source.values, source.times, vector))
    return tasks, tuple(warnings)


def _chosen(
    tasks: Sequence[TaskData],
    usable: Collection[str],
    target: DeviceFeatures,
    selection: Selection,
    warnings: tuple[str, ...],
) -> Prior:
    """The prior of the tasks named in `usable`, every feature vector cut to the `selection`."""
    columns = list(selection.columns)
    chosen = tuple(
        TaskData(t.name, t.values, t.times, tuple(np.asarray(t.features)[columns]))
        for t in tasks
        if t.name in usable
    )
    return Prior(chosen, tuple(target.vector(FEATURE_NAMES)[columns]), selection, warnings)


def _from_database(db: Database, key: StudyKey, names: Sequence[str]) -> list[_Found]:
    """Per other device, its study of the same content and space with the most valid
    measurements (`annotune.results.studies.studies_elsewhere`), columns in `names` order."""
    found = []
    for record in studies_elsewhere(db, key):
        device, stored = record.study.key.device, record.study.device_features
        features = None
        if stored is not None:
            try:
                features = DeviceFeatures.from_json(stored)
            except ValueError:
                features = None
        found.append(
            _Found(device, record.values(names), record.times(), features or lookup(device))
        )
    return found


def _from_file(path: Path, names: Sequence[str]) -> _Found:
    """A T4 or Kernel Tuner results file of the same parameters, columns in `names` order."""
    dataset = load_replay(path)
    if set(dataset.names) != set(names):
        raise AnnotuneError(
            f"{path}: its parameters ({', '.join(dataset.names)}) are not the tuned source's "
            f"({', '.join(names)})",
            hint="--transfer-from takes results of the same kernel and space on another GPU",
        )
    columns = [dataset.names.index(name) for name in names]
    try:
        features = dataset_features(dataset)
    except ValueError as error:
        raise AnnotuneError(f"{path}: {error}") from None
    return _Found(
        dataset_device(dataset), dataset.candidates.values[:, columns], dataset.times, features
    )


@dataclass(frozen=True)
class PredictReport:
    """A zero-shot prediction: the configuration the transferred model ranks best for
    `device`, its predicted normalized performance (1.0: as fast as the best configuration),
    what it learned from, and the header written (None unless asked)."""

    device: str
    params: dict[str, Number]
    performance: float
    prior: Prior
    space_size: int | None
    header: Path | None

    def to_json(self) -> dict:
        return {
            "device": self.device,
            "params": self.params,
            "predicted_performance": self.performance,
            **self.prior.to_json(),
            "space_size": self.space_size,
            "header": str(self.header) if self.header else None,
            "warnings": list(self.prior.warnings),
        }


def predict(
    problem: Problem,
    device: str,
    *,
    db_path: Path | None = None,
    files: Sequence[Path] = (),
    seed: int = 0,
    write: bool = False,
    force: bool = False,
    out_dir: Path | None = None,
) -> PredictReport:
    """The best configuration for `device` predicted from other GPUs' results alone
    (Muralidharan et al.'s zero-shot case): no measurement on `device` at all.

    Sources are those `tune` would learn from (`gather_prior`), ranked by `adapt.zero_shot`
    (the log target: exp(score) is a speed ratio). With `write`, the header goes
    where `tune` puts it, marked `emit.PREDICTED`; a measured header there is only replaced with
    `force`. AnnotuneError when `device`'s features are unknown or no source can be used.
    """
    space = problem_space(problem)
    rng = np.random.default_rng(seed)
    legal, legal_count = space.search_rows(rng)
    candidates = Candidates(space.decode(legal), space.names)
    target = features_for(device)
    if target is None:
        raise AnnotuneError(
            f"no device features known for '{device}'",
            hint="use a GPU name from annotune/transfer/gpus.toml (e.g. 'NVIDIA A100-PCIE-40GB'), "
            "or run `annotune tune` on that GPU",
        )
    key = StudyKey.for_problem(problem, device=device, build={})
    named = db_path is not None
    db_path = db_path or default_db_path(problem.source)
    with ExitStack() as resources:
        db = resources.enter_context(existing(db_path))
        if db is None and named:
            raise AnnotuneError(f"no results database at {db_path}")
        tasks, warnings = _gather(candidates, key, target, db=db, files=files)
    found = zero_shot(candidates, tasks, target.vector(FEATURE_NAMES), FEATURE_NAMES, rng=rng)
    if found is None:
        reasons = "".join(f"; {w}" for w in warnings)
        raise AnnotuneError(
            f"no other GPU's results of {problem.source.name} to learn from{reasons}",
            hint="tune it on another GPU first (same results database), or pass results "
            "files with --transfer-from",
        )
    prior = _chosen(tasks, found.sources, target, found.selection, warnings)
    row = int(found.ranking[0])
    params = space.to_dicts(legal[[row]])[0]
    header = None
    if write:
        header = tuned_header_path(problem.source, device, out_dir)
        if header.is_file() and PREDICTED not in header.read_text(errors="replace") and not force:
            raise AnnotuneError(
                f"{header}: a measured header is there already; not replacing it",
                hint="--force replaces it with the prediction",
            )
        note = (
            f"{PREDICTED}: ranked best by a model of {', '.join(prior.sources)} (annotune predict)"
        )
        text = render_header(
            problem,
            params,
            device=device,
            space_size=legal_count,
            measurements=0,
            default_time=None,
            best_time=None,
            tool_version=__version__,
            note=note,
        )
        write_if_changed(header, text)
    performance = float(np.exp(found.scores[row]))
    return PredictReport(device, params, performance, prior, legal_count, header)
