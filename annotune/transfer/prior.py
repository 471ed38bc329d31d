"""Learning from other GPUs: their measurements of a source gathered for transfer, and the
zero-shot prediction for a GPU with none.

Sources are the results database's studies of the same source content and space on other
devices, and result files the user names (T4 or Kernel Tuner caches). Each GPU's device
features come from its study or file, else the user's or the shipped table, else
`resolve.resolve`'s fallback (the nearest known GPU of its vendor and architecture, or only the
features every GPU has), which a warning says; CV-DFS (`annotune.transfer.adapt`) then chooses
which of them the model uses. `tune` hands the result to the `transfer` strategy;
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
from annotune.results.database import StudyKey, default_db_path, existing
from annotune.results.replay import load_replay, values_in_order
from annotune.results.storage import Storage
from annotune.results.studies import studies_elsewhere
from annotune.search.multitask import encode_space, sources_for
from annotune.transfer.adapt import Selection, select_features, zero_shot
from annotune.transfer.features import DeviceFeatures, dataset_device
from annotune.transfer.resolve import (
    GpuTable,
    Resolved,
    from_features,
    resolve,
    resolve_dataset,
    shared_names,
)


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
    features: Resolved


def gather_prior(
    candidates: Candidates,
    key: StudyKey,
    target: DeviceFeatures | None,
    *,
    db: Storage | None,
    files: Sequence[Path] = (),
    rng: np.random.Generator,
    gpus: GpuTable | None = None,
) -> Prior:
    """What other GPUs measured of `key`'s source and space: the database's studies of the
    same content and space on other devices (per device, the one with the most measurements)
    and the results `files` (T4 or Kernel Tuner caches), with device features from the study
    or file, else `resolve.resolve` over the user's table `gpus` (also for the target when
    `target` is None). A file whose parameters are not the space's is an AnnotuneError; a GPU
    known nowhere is a warning, never a reason to skip transfer."""
    mine = from_features(target) if target is not None else resolve(key.device, gpus)
    gathered = _gather(candidates, key, mine, db=db, files=files, gpus=gpus)
    sources = sources_for(gathered.tasks, candidates)
    if not sources:
        return Prior(warnings=gathered.warnings)
    selection = select_features(encode_space(candidates), sources, gathered.names, rng=rng)
    usable = {source.name for source in sources}
    return _chosen(gathered, usable, mine, selection)


@dataclass(frozen=True)
class _Gathered:
    """Other GPUs' results as tasks over the device features `names` (those every GPU has),
    and what was said on the way."""

    tasks: tuple[TaskData, ...]
    names: tuple[str, ...]
    warnings: tuple[str, ...]


def _gather(
    candidates: Candidates,
    key: StudyKey,
    target: Resolved,
    *,
    db: Storage | None,
    files: Sequence[Path],
    gpus: GpuTable | None,
) -> _Gathered:
    """The other GPUs' results (see `gather_prior`) with the device features they and the
    target share, and every warning: files measured on the target, fallbacks for GPUs known
    nowhere (the target's first, and only when there is something to learn from)."""
    found = _from_database(db, key, candidates.names, gpus) if db is not None else []
    warnings: list[str] = []
    for path in files:
        source = _from_file(path, candidates.names, gpus)
        if source.device == key.device:
            warnings.append(f"{path}: measured on {key.device} itself; not learning from it")
        else:
            found.append(source)
    by_device: dict[str, _Found] = {}
    for source in found:  # the first of a device (the database's) unless a later has more
        known = by_device.get(source.device)
        if known is None or source.times.size > known.times.size:
            by_device[source.device] = source
    if by_device:
        warnings[:0] = target.warnings
    for source in by_device.values():
        warnings.extend(w for w in source.features.warnings if w not in warnings)
    names = shared_names([target, *(s.features for s in by_device.values())])
    tasks = tuple(
        TaskData(s.device, s.values, s.times, tuple(s.features.vector(names)))
        for s in by_device.values()
    )
    return _Gathered(tasks, names, tuple(warnings))


def _chosen(
    gathered: _Gathered, usable: Collection[str], target: Resolved, selection: Selection
) -> Prior:
    """The prior of the tasks named in `usable`, every feature vector cut to the `selection`."""
    columns = list(selection.columns)
    chosen = tuple(
        TaskData(t.name, t.values, t.times, tuple(np.asarray(t.features)[columns]))
        for t in gathered.tasks
        if t.name in usable
    )
    target_features = tuple(target.vector(gathered.names)[columns])
    return Prior(chosen, target_features, selection, gathered.warnings)


def _from_database(
    db: Storage, key: StudyKey, names: Sequence[str], gpus: GpuTable | None
) -> list[_Found]:
    """Per other device, its study of the same content and space with the most valid
    measurements (`annotune.results.studies.studies_elsewhere`), columns in `names` order;
    the device features stored with the study, else `resolve`'s."""
    found = []
    for record in studies_elsewhere(db, key):
        device, stored = record.study.key.device, record.study.device_features
        features = None
        if stored is not None:
            try:
                features = DeviceFeatures.from_json(stored)
            except ValueError:
                features = None
        resolved = from_features(features) if features else resolve(device, gpus, live=False)
        found.append(_Found(device, record.values(names), record.times(), resolved))
    return found


def _from_file(path: Path, names: Sequence[str], gpus: GpuTable | None) -> _Found:
    """A T4 or Kernel Tuner results file of the same parameters, columns in `names` order."""
    dataset = load_replay(path)
    hint = "--transfer-from takes results of the same kernel and space on another GPU"
    values = values_in_order(dataset, names, path, hint=hint)
    try:
        features = resolve_dataset(dataset, gpus)
    except ValueError as error:
        raise AnnotuneError(f"{path}: {error}") from None
    return _Found(dataset_device(dataset), values, dataset.times, features)


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
    gpus: GpuTable | None = None,
) -> PredictReport:
    """The best configuration for `device` predicted from other GPUs' results alone
    (Muralidharan et al.'s zero-shot case): no measurement on `device` at all.

    Sources are those `tune` would learn from (`gather_prior`), ranked by `adapt.zero_shot`
    (the log target: exp(score) is a speed ratio). With `write`, the header goes
    where `tune` puts it, marked `emit.PREDICTED`; a measured header there is only replaced with
    `force`. `gpus`: the user's GPU entries. A GPU known nowhere is predicted for from what
    is known (`resolve.resolve`), with a warning; AnnotuneError when no source can be used.
    """
    space = problem_space(problem)
    rng = np.random.default_rng(seed)
    legal, legal_count = space.search_rows(rng)
    candidates = Candidates(space.decode(legal), space.names)
    target = resolve(device, gpus)
    key = StudyKey.for_problem(problem, device=device, build={})
    named = db_path is not None
    db_path = db_path or default_db_path(problem.source)
    with ExitStack() as resources:
        db = resources.enter_context(existing(db_path))
        if db is None and named:
            raise AnnotuneError(f"no results database at {db_path}")
        gathered = _gather(candidates, key, target, db=db, files=files, gpus=gpus)
    names = gathered.names
    found = zero_shot(candidates, gathered.tasks, target.vector(names), names, rng=rng)
    if found is None:
        reasons = "".join(f"; {w}" for w in gathered.warnings)
        raise AnnotuneError(
            f"no other GPU's results of {problem.source.name} to learn from{reasons}",
            hint="tune it on another GPU first (same results database), or pass results "
            "files with --transfer-from",
        )
    prior = _chosen(gathered, found.sources, target, found.selection)
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
