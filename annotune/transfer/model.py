"""Architecture-adaptive transfer: learn a new GPU's space from other GPUs' measurements.

Muralidharan et al., "Architecture-Adaptive Code Variant Tuning" (ASPLOS '16), §3.1 and §3.4:

* Feature concatenation (§3.1). Every measured row of every source GPU becomes one training
  row: the configuration's model inputs (`annotune.search.models.encode_features`) followed by that
  GPU's device features. One regressor learns all GPUs at once; appending the *target's*
  device features to every configuration of the space selects its slice of the model, with no
  measurement on the target at all (the zero-shot case).
* Cross-validation device feature selection, CV-DFS (§3.4, Algorithm 2). Each source GPU is
  held out in turn as a temporary target; every subset of up to `max_size` (3, the paper's
  limit) device features trains a model on the remaining sources and is scored on the held-out
  GPU's real measurements. The best subset wins.

Where and why this deviates from the paper:

* The paper selects among code *variants* with an SVM classifier; a tuning space is thousands
  of configurations with a run time each, so the model is a regressor (a random forest, the
  model IterML uses) of each source's *normalized performance* (its best time / the time).
  Normalizing per GPU makes GPUs of different speed comparable; the target is learned as
  log(normalized performance) by default (`target="log"`): leaving each of the four
  convolution GPUs of the shared replay data out in turn, the configuration the model ranks
  best reached 0.654 / 0.985 / 0.972 / 1.000 of the held-out GPU's optimum (A100, A4000,
  MI250X, W6600) with the log, 0.654 / 0.724 / 0.980 / 0.820 with the plain ratio, which
  squeezes every configuration below half the optimum into a narrow band near zero. Invalid
  configurations get `INVALID_PERFORMANCE`.
* The score of a feature subset on a held-out GPU is what the tuner gets from it: the best
  normalized performance among the `top` configurations the model ranks highest (the first
  batch a transfer search measures); ties, frequent with few GPUs, are broken by the Spearman
  rank correlation over all the held-out GPU's rows. The paper counts how often each feature
  is in a fold's best subset and keeps the k most frequent features (k = 1); with the two to
  four GPUs a project has, per-fold winners tie constantly, so each subset's scores are
  averaged over the folds and the best subset is kept (ties: the smaller subset, then
  `FEATURE_NAMES` order, which puts vendor and generation first; correlations closer than
  `CORRELATION_TIE` count as equal). The empty subset competes too (one model for all GPUs,
  the target is not told apart): a feature constant over the sources is then never reported
  as chosen, and where no feature routes the held-out GPUs better than pooling them, none is
  used. Each subset's model is fitted with the same seed (common random numbers): without
  that, the forests' own randomness changed which subset won between runs.
* Subsets that cannot give different models are fitted once. A tree splits on a device
  feature only to separate training GPUs, and sends the held-out GPU to the side of the
  midpoint its value lies on; two subsets whose features induce the same splits of the
  training GPUs and send the held-out GPU the same way train the same model (`_signature`).
  With three sources, every fold has at most four distinct models out of 378 subsets.
* The paper's first phase (profile DFS, P-DFS) needs hardware profiles of application
  proxies, which annotune does not collect; the subsets range over all device features.
* With fewer than three source GPUs, CV-DFS is impossible: a fold trains on one GPU, whose
  device features are constant, so every subset gives the same model. Then two sources use
  the full feature set (the paper's §3.2 baseline: the trees separate the two GPUs and route
  the target by the features on which it resembles each), and one source uses none (its
  features are constant and could not be split on anyway; the model is that GPU's own).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy.stats import spearmanr
from sklearn.base import BaseEstimator

from annotune.search.models import Surrogate, encode_features, make_regressor
from annotune.transfer.features import DeviceFeatures, lookup

if TYPE_CHECKING:  # at run time the strategies package imports this module, not the reverse
    from annotune.core.records import Candidates, TaskData
    from annotune.results.replay import ReplayDataset

INVALID_PERFORMANCE = 1e-3
"""Normalized performance learned for an invalid configuration (and the floor for valid ones):
as bad as a 1000x slowdown, and finite under the log target."""

TARGETS = ("log", "linear")
FORESTS = ("rf", "et")
MAX_SUBSET = 3
"""The paper restricts CV-DFS to subsets of at most three device features."""

CORRELATION_TIE = 0.01
"""Mean rank correlations closer than this are a tie in CV-DFS: two subsets that give the
same model on every fold but one where both are wrong differ by about 1e-3 from the forests'
randomness alone."""

PREDICTION_TREES = 256
"""Trees of the forest that ranks a space for a new GPU (the model's name "rf" or "et"; the
CV-DFS folds keep the IterML default of 48). Its top pick is the zero-shot prediction and the
`transfer` strategy's first measurement, so the forest's luck must not decide it: with 48
trees, the top pick for convolution MI250X (sources A100, A4000, W6600) ran at 0.117 of the
optimum for 2 of 8 seeds and at 0.98 otherwise; with 256, at 0.97-0.98 in all 8 and in
`annotune bench --transfer`. A fit on three
sources of 4,362 configurations takes 3.4 s instead of 0.6 s."""

CV_ROWS_PER_SOURCE = 3000
"""Rows per source GPU a CV-DFS model is trained on (a uniform sample of larger spaces): the
selection fits a model per fold and distinct subset, so it is bounded like this."""


@dataclass(frozen=True)
class Source:
    """One source GPU's data matched to the target's space.

    `rows` index the target's candidates (only configurations present in both); `performance`
    is normalized performance on that GPU (its best time / the time; invalid:
    `INVALID_PERFORMANCE`); `features` its device features (all columns).
    """

    name: str
    rows: np.ndarray
    performance: np.ndarray
    features: np.ndarray


def dataset_device(dataset: ReplayDataset) -> str:
    """The GPU a results file was measured on: as the file says, else its name's last part
    ("convolution_MI250X" -> "MI250X": some Kernel Tuner caches leave the device empty)."""
    return dataset.device or dataset.name.rsplit("_", 1)[-1]


def dataset_features(dataset: ReplayDataset) -> DeviceFeatures | None:
    """The device features of a results file's GPU: from the file (T4 metadata written by
    `annotune export`), else the table's for the name it gives or its name's last part.
    None when neither is known; ValueError when the file's own features are malformed."""
    if dataset.device_features is not None:
        return DeviceFeatures.from_json(dataset.device_features)
    for name in (dataset.device, dataset.name.rsplit("_", 1)[-1]):
        found = lookup(name) if name else None
        if found is not None:
            return found
    return None


def match_rows(space: np.ndarray, values: np.ndarray) -> np.ndarray:
    """For each row of `values`, the index of the equal row of `space` (-1 where none is)."""
    index = {row.tobytes(): i for i, row in enumerate(np.ascontiguousarray(space, np.float64))}
    rows = np.ascontiguousarray(values, dtype=np.float64)
    return np.array([index.get(row.tobytes(), -1) for row in rows], dtype=np.intp)


def align(task: TaskData, candidates: Candidates) -> Source:
    """`task`'s measurements matched to the rows of `candidates` by parameter values.

    Row order may differ between GPUs' files; configurations the target's space lacks are
    dropped (they can never be measured there). A task without a single valid time matches
    nothing.
    """
    matched = match_rows(candidates.values, task.values)
    rows, times = matched[matched >= 0], np.asarray(task.times, dtype=np.float64)[matched >= 0]
    rows, first = np.unique(rows, return_index=True)  # a configuration listed twice: the first
    times = times[first]
    features = np.asarray(task.features, dtype=np.float64)
    valid = ~np.isnan(times)
    if not valid.any():
        return Source(task.name, rows[:0], times[:0], features)
    performance = np.full(times.size, INVALID_PERFORMANCE)
    performance[valid] = np.maximum(times[valid].min() / times[valid], INVALID_PERFORMANCE)
    return Source(task.name, rows, performance, features)


def sources_for(tasks: Sequence[TaskData], candidates: Candidates) -> list[Source]:
    """The tasks that share at least one valid configuration with the space, aligned."""
    aligned = [align(task, candidates) for task in tasks]
    return [s for s in aligned if s.rows.size]


class TransferModel:
    """The feature-concatenation regressor over one space (§3.1).

    `space` is the encoded space (`encode_features(candidates.values)`), `columns` the device
    feature columns to append (indices into each source's `features`). `fit` learns every
    source's normalized performance; `predict(features)` scores every configuration of the
    space for a GPU with those device features (higher is better). `trees` sizes a forest
    named by `model` ("rf", "et"; None: the IterML default).
    """

    def __init__(
        self,
        space: np.ndarray,
        columns: Sequence[int],
        *,
        model: str | BaseEstimator = "rf",
        target: str = "log",
        trees: int | None = PREDICTION_TREES,
        n_jobs: int = 1,
    ) -> None:
        self.space = space
        self.columns = np.asarray(columns, dtype=np.intp)
        self.model = model
        self.target = target
        self.trees = trees
        self.n_jobs = n_jobs

    def fit(
        self,
        sources: Sequence[Source],
        rng: np.random.Generator,
        rows_per_source: int | None = None,
    ) -> TransferModel:
        if self.target not in TARGETS:
            raise ValueError(f"target must be one of {', '.join(TARGETS)}")
        if not sources:
            raise ValueError("the transfer model needs at least one source")
        inputs, targets = [], []
        for source in sources:
            keep = np.arange(source.rows.size)
            if rows_per_source is not None and keep.size > rows_per_source:
                keep = np.sort(rng.choice(keep.size, rows_per_source, replace=False))
            inputs.append(self._inputs(source.rows[keep], source.features))
            y = source.performance[keep]
            targets.append(np.log(y) if self.target == "log" else y)
        template = self.model
        if self.trees is not None and template in FORESTS:
            template = make_regressor(template, n_jobs=self.n_jobs).set_params(
                n_estimators=self.trees
            )
        self.surrogate_ = Surrogate(template, n_jobs=self.n_jobs).fit(
            np.vstack(inputs), np.concatenate(targets), rng
        )
        return self

    def predict(self, features: Sequence[float], rows: np.ndarray | None = None) -> np.ndarray:
        """Predicted score of `rows` of the space (default: all) on a GPU with `features`."""
        if not hasattr(self, "surrogate_"):
            raise RuntimeError("TransferModel.predict called before fit")
        rows = np.arange(self.space.shape[0]) if rows is None else rows
        return self.surrogate_.predict(self._inputs(rows, np.asarray(features, float))).mean

    def _inputs(self, rows: np.ndarray, features: np.ndarray) -> np.ndarray:
        device = np.broadcast_to(features[self.columns], (rows.size, self.columns.size))
        return np.hstack([self.space[rows], device]).astype(np.float32)


def encode_space(candidates: Candidates) -> np.ndarray:
    """The model inputs of every configuration (the encoding IterML uses)."""
    if not len(candidates):
        return np.zeros((0, 0))
    return encode_features(candidates.values)


# -- device feature selection (CV-DFS) ----------------------------------------------------------


@dataclass(frozen=True)
class Selection:
    """The device features chosen for a group of source GPUs and how.

    `columns` index the feature vectors; `names` are their names. `method` is "cv" (CV-DFS
    ran; `score` is the winner's mean best normalized performance among the top picks on the
    held-out GPUs, `correlation` its mean rank correlation), "all" (the full set: two sources,
    or no selection asked for) or "none" (one source: no feature can matter).
    """

    columns: tuple[int, ...]
    names: tuple[str, ...]
    method: str
    score: float | None = None
    correlation: float | None = None

    def describe(self) -> str:
        """The choice in words, for tables and progress lines."""
        if self.method == "all":
            return f"all {len(self.names)} (no cross-validation)"
        if self.method == "none":
            return "none (one source)"
        return ", ".join(self.names) or "none (pooled)"

    def to_json(self) -> dict:
        return {
            "features": list(self.names),
            "method": self.method,
            "cv_score": self.score,
            "cv_correlation": self.correlation,
        }


def select_features(
    space: np.ndarray,
    sources: Sequence[Source],
    names: Sequence[str],
    *,
    rng: np.random.Generator,
    max_size: int = MAX_SUBSET,
    min_size: int = 0,
    top: int = 10,
    model: str | BaseEstimator = "rf",
    target: str = "log",
) -> Selection:
    """CV-DFS over every subset of `min_size`..`max_size` of the device feature columns.

    Each source is held out in turn; a subset's score on a fold is the best normalized
    performance among the `top` rows of the held-out source the model trained on the others
    ranks highest (its rank correlation breaks ties). See the module docstring for the
    fallbacks with fewer than three sources.
    """
    width = len(names)
    if any(s.features.size != width for s in sources):
        raise ValueError(f"every source needs {width} device features")
    if len(sources) < 2:
        return Selection((), (), "none")
    if len(sources) == 2:
        return Selection(tuple(range(width)), tuple(names), "all")
    subsets = [
        c
        for size in range(min_size, max_size + 1)
        for c in itertools.combinations(range(width), size)
    ]
    totals = np.zeros((len(subsets), 2))
    # Common random numbers: every subset's model is fitted with the same seed, so that
    # scores differ by the features, not by the forest's luck.
    seed = int(rng.integers(2**63 - 1))
    for held in range(len(sources)):
        train = [s for i, s in enumerate(sources) if i != held]
        test = sources[held]
        fitted: dict[frozenset, tuple[float, float]] = {}
        for k, subset in enumerate(subsets):
            key = _signature(train, test, subset)
            if key not in fitted:
                fitted[key] = _fold_score(
                    space, train, test, subset, np.random.default_rng(seed), top, model, target
                )
            totals[k] += fitted[key]
    means = totals / len(sources)
    # Best score; then correlation, where it differs by more than the forests' own noise;
    # then the smaller subset, then the order of `names`.
    winners = means[:, 0] >= means[:, 0].max() - 1e-9
    close = winners & (means[:, 1] >= means[winners, 1].max() - CORRELATION_TIE)
    best = min(np.flatnonzero(close), key=lambda k: len(subsets[k]))
    chosen = subsets[best]
    return Selection(
        chosen,
        tuple(names[c] for c in chosen),
        "cv",
        float(means[best, 0]),
        float(means[best, 1]),
    )


def _signature(train: Sequence[Source], test: Source, subset: Sequence[int]) -> frozenset:
    """What a tree model can see of `subset`: per feature, how it orders the training GPUs
    and on which side of each midpoint the held-out GPU falls (order-reversal invariant).
    Features constant over the training GPUs are never split on and leave no trace."""
    parts = set()
    for column in subset:
        values = np.array([s.features[column] for s in train])
        levels = np.unique(values)
        if levels.size < 2:
            continue
        groups = tuple(tuple(np.flatnonzero(values == v).tolist()) for v in levels)
        midpoints = (levels[:-1] + levels[1:]) / 2
        side = int(np.count_nonzero(midpoints < test.features[column]))
        forward = (groups, side)
        backward = (groups[::-1], levels.size - 1 - side)
        parts.add(min(forward, backward))
    return frozenset(parts)


def _fold_score(
    space: np.ndarray,
    train: Sequence[Source],
    test: Source,
    subset: Sequence[int],
    rng: np.random.Generator,
    top: int,
    model: str | BaseEstimator,
    target: str,
) -> tuple[float, float]:
    transfer = TransferModel(space, subset, model=model, target=target, trees=None)
    transfer.fit(train, rng, rows_per_source=CV_ROWS_PER_SOURCE)
    predicted = transfer.predict(test.features, test.rows)
    actual = np.where(test.performance > INVALID_PERFORMANCE, test.performance, 0.0)
    order = np.lexsort((rng.random(predicted.size), -predicted))
    correlation = spearmanr(predicted, actual).statistic
    return float(actual[order[:top]].max()), 0.0 if math.isnan(correlation) else float(correlation)


# -- the whole step: select, fit, predict the target -------------------------------------------


@dataclass(frozen=True)
class Transfer:
    """A transferred prediction for a target GPU: its score for every configuration of the
    space (higher is better), the source GPUs it learned from and the device features used."""

    scores: np.ndarray
    sources: tuple[str, ...]
    selection: Selection

    @property
    def ranking(self) -> np.ndarray:
        """Rows of the space, most promising first (ties in row order)."""
        return np.argsort(-self.scores, kind="stable")


def transfer(
    candidates: Candidates,
    tasks: Sequence[TaskData],
    target_features: Sequence[float],
    names: Sequence[str],
    *,
    rng: np.random.Generator,
    select: bool = True,
    model: str | BaseEstimator = "rf",
    target: str = "log",
    top: int = 10,
) -> Transfer | None:
    """Fit the concatenation model on `tasks` and score `candidates` for the target GPU.

    `names` name the columns of every feature vector. With `select`, CV-DFS picks the columns
    (else every column is used). None when no task shares a configuration with the space.
    """
    space = encode_space(candidates)
    sources = sources_for(tasks, candidates)
    if not sources:
        return None
    if select:
        selection = select_features(
            space, sources, names, rng=rng, top=top, model=model, target=target
        )
    else:
        selection = Selection(tuple(range(len(names))), tuple(names), "all")
    model_ = TransferModel(space, selection.columns, model=model, target=target)
    scores = model_.fit(sources, rng).predict(np.asarray(target_features, dtype=np.float64))
    return Transfer(scores, tuple(s.name for s in sources), selection)
