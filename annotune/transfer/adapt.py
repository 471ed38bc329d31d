"""Architecture adaptation: which device features the multi-task model sees, and the zero-shot
ranking of a space for a GPU with no measurements of it.

`select_features` is CV-DFS (Muralidharan et al., ASPLOS '16, §3.4): each source GPU is held
out in turn, and every subset of up to three device features trains the model
(`annotune.search.multitask`) on the others and is scored by what the tuner would get on the
held-out GPU, the best normalized performance among the model's top picks. The scores are
averaged over the folds, since with two to four GPUs the paper's count of per-fold winners
ties constantly; the empty subset competes, so features that route no GPU better than pooling
are not used. There is no profile DFS (annotune collects no hardware profiles); with two
sources all features are used (§3.2's baseline), with one none. docs/experiments/transfer.md
has the numbers.

Where it departs from the paper for speed (issue 38): the paper fits its model per fold and
subset. Here subsets that train the same tree model share one fit (`_signature`), which with
three or four GPUs leaves a few fits per fold; from five GPUs on nearly every subset trains
its own model and that took over 20 minutes for six GPUs, so there the subsets are scored by
a cheaper stand-in for the same model, the source blend (`_blend_scores`: one forest per GPU
in all, folds and subsets then cost a mean of predictions). Every subset is still scored.

`zero_shot` is the one select → fit → rank step (`annotune predict`, `annotune bench
--transfer`); the `transfer` strategy, which cannot import this stage, fits and scores through
the same `multitask.score_space` on features chosen here.
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

from annotune.search.multitask import (
    INVALID_PERFORMANCE,
    Source,
    TransferModel,
    encode_space,
    score_space,
    sources_for,
)

if TYPE_CHECKING:
    from annotune.core.records import Candidates, TaskData

MAX_SUBSET = 3
"""The paper restricts CV-DFS to subsets of at most three device features."""

CORRELATION_TIE = 0.01
"""Mean rank correlations closer than this are a tie in CV-DFS: two subsets that give the
same model on every fold but one where both are wrong differ by about 1e-3 from the forests'
randomness alone."""

CV_ROWS_PER_SOURCE = 3000
"""Rows per source GPU a CV-DFS model is trained on (a uniform sample of larger spaces): the
selection fits a model per fold and distinct subset, so it is bounded like this."""

RANKINGS = ("auto", "forest", "blend")
"""The models CV-DFS can score subsets with (`select_features`)."""

EXHAUSTIVE_FITS = 48
"""CV-DFS scores subsets with the multi-task forest itself while that takes at most this many
fits over all folds: with three or four GPUs a fold has at most four distinct models (12 to
16 fits). With five or more GPUs nearly every subset trains a distinct model (hundreds of fits
per fold, 20 minutes for six GPUs), so the source blend (`_blend_scores`) scores them."""


@dataclass(frozen=True)
class Selection:
    """The device features chosen for a group of source GPUs and how.

    `columns` index the feature vectors; `names` are their names. `method` is "cv" (CV-DFS
    ran; `score` is the winner's mean best normalized performance among the top picks on the
    held-out GPUs, `correlation` its mean rank correlation, `ranking` the model that scored
    the subsets: "forest" or "blend", see `select_features`), "all" (the full set: two sources,
    or no selection asked for) or "none" (one source: no feature can matter).
    """

    columns: tuple[int, ...]
    names: tuple[str, ...]
    method: str
    score: float | None = None
    correlation: float | None = None
    ranking: str | None = None

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
            "cv_ranking": self.ranking,
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
    ranking: str = "auto",
) -> Selection:
    """CV-DFS over every subset of `min_size`..`max_size` of the device feature columns.

    Each source is held out in turn; a subset's score on a fold is the best normalized
    performance among the `top` rows of the held-out source the model trained on the others
    ranks highest (its rank correlation breaks ties). See the module docstring for the
    fallbacks with fewer than three sources. `ranking` names the model that scores the
    subsets: "forest" (the multi-task model itself, one fit per fold and distinct subset),
    "blend" (`_blend_scores`: one fit per source GPU in all) or "auto" (the forest while it
    needs at most `EXHAUSTIVE_FITS` fits, else the blend).
    """
    width = len(names)
    if any(s.features.size != width for s in sources):
        raise ValueError(f"every source needs {width} device features")
    if ranking not in RANKINGS:
        raise ValueError(f"ranking must be one of {', '.join(RANKINGS)}")
    if len(sources) < 2:
        return Selection((), (), "none")
    if len(sources) == 2:
        return Selection(tuple(range(width)), tuple(names), "all")
    subsets = [
        c
        for size in range(min_size, max_size + 1)
        for c in itertools.combinations(range(width), size)
    ]
    folds = [
        ([s for i, s in enumerate(sources) if i != held], sources[held])
        for held in range(len(sources))
    ]
    # Common random numbers: every subset's model is fitted with the same seed, so that
    # scores differ by the features, not by the forest's luck.
    seed = int(rng.integers(2**63 - 1))
    keys = [[_signature(train, test, subset) for subset in subsets] for train, test in folds]
    fits = sum(len(set(fold)) for fold in keys)
    if ranking == "forest" or (ranking == "auto" and fits <= EXHAUSTIVE_FITS):
        ranking = "forest"
        totals = _forest_scores(space, folds, subsets, keys, seed, top, model, target)
    else:
        ranking = "blend"
        totals = _blend_scores(space, sources, subsets, seed, top, model, target)
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
        ranking,
    )


def _forest_scores(
    space: np.ndarray,
    folds: Sequence[tuple[Sequence[Source], Source]],
    subsets: Sequence[tuple[int, ...]],
    keys: Sequence[Sequence[frozenset]],
    seed: int,
    top: int,
    model: str | BaseEstimator,
    target: str,
) -> np.ndarray:
    """Per subset, the fold scores of the multi-task model summed over the folds: one fit per
    fold and distinct `_signature` (`keys[fold][subset]`)."""
    totals = np.zeros((len(subsets), 2))
    for (train, test), fold_keys in zip(folds, keys, strict=True):
        fitted: dict[frozenset, tuple[float, float]] = {}
        for k, subset in enumerate(subsets):
            key = fold_keys[k]
            if key not in fitted:
                transfer = TransferModel(space, subset, model=model, target=target, trees=None)
                rng = np.random.default_rng(seed)
                transfer.fit(train, rng, rows_per_source=CV_ROWS_PER_SOURCE)
                fitted[key] = _judge(transfer.predict(test.features, test.rows), test, rng, top)
            totals[k] += fitted[key]
    return totals


def _blend_scores(
    space: np.ndarray,
    sources: Sequence[Source],
    subsets: Sequence[tuple[int, ...]],
    seed: int,
    top: int,
    model: str | BaseEstimator,
    target: str,
) -> np.ndarray:
    """Per subset, the fold scores of the source blend summed over the folds.

    The blend stands in for the multi-task model where fitting that per fold and subset
    would take minutes (five or more GPUs): each source GPU's own model (no device features)
    is fitted once, and a fold's prediction for the held-out GPU is the mean of the models of
    the training GPUs nearest to it in the subset's features (`_nearest`). That is what the
    forest does with device features that are constant per GPU: its splits on them group the
    training GPUs and route the held-out one to the group on its side of each midpoint, and
    within a group it pools. A fold's score then costs a weighted mean of predictions, so
    every subset is still scored (no pruned search) and one fit per GPU serves every fold.
    """
    predictions = np.array(
        [
            TransferModel(space, (), model=model, target=target, trees=None)
            .fit([source], np.random.default_rng(seed), rows_per_source=CV_ROWS_PER_SOURCE)
            .predict(source.features)
            for source in sources
        ]
    )
    totals = np.zeros((len(subsets), 2))
    for held, test in enumerate(sources):
        train = [i for i in range(len(sources)) if i != held]
        values = np.array([sources[i].features for i in train])
        judged: dict[tuple[int, ...], tuple[float, float]] = {}
        for k, subset in enumerate(subsets):
            near = tuple(train[i] for i in _nearest(values, test.features, subset))
            if near not in judged:
                blend = predictions[list(near)][:, test.rows].mean(axis=0)
                judged[near] = _judge(blend, test, np.random.default_rng(seed), top)
            totals[k] += judged[near]
    return totals


def _nearest(values: np.ndarray, target: np.ndarray, subset: Sequence[int]) -> np.ndarray:
    """Rows of `values` (training GPUs' features) nearest to `target` in the `subset`
    columns: L1 distance with each column scaled by its range over the training GPUs
    (columns constant there ignored, as a tree never splits on them); all rows when none
    is left."""
    columns = [c for c in subset if np.ptp(values[:, c]) > 0]
    if not columns:
        return np.arange(values.shape[0])
    scaled = np.abs(values[:, columns] - target[columns]) / np.ptp(values[:, columns], axis=0)
    distance = scaled.sum(axis=1)
    return np.flatnonzero(distance <= distance.min() + 1e-12)


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


def _judge(
    predicted: np.ndarray, test: Source, rng: np.random.Generator, top: int
) -> tuple[float, float]:
    """A fold's score of a prediction for the held-out GPU's rows: the best normalized
    performance among its `top` picks (ties broken at random), and its rank correlation."""
    actual = np.where(test.performance > INVALID_PERFORMANCE, test.performance, 0.0)
    order = np.lexsort((rng.random(predicted.size), -predicted))
    correlation = spearmanr(predicted, actual).statistic
    return float(actual[order[:top]].max()), 0.0 if math.isnan(correlation) else float(correlation)


@dataclass(frozen=True)
class ZeroShot:
    """The zero-shot prediction for a target GPU: its score for every configuration of the
    space (higher is better), the source GPUs it learned from and the device features used."""

    scores: np.ndarray
    sources: tuple[str, ...]
    selection: Selection

    @property
    def ranking(self) -> np.ndarray:
        """Rows of the space, most promising first (ties in row order)."""
        return np.argsort(-self.scores, kind="stable")


def zero_shot(
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
) -> ZeroShot | None:
    """Select device features, fit the model on `tasks` and rank `candidates` for the target.

    `names` name the columns of every feature vector (the tasks' and `target_features`). With
    `select`, CV-DFS picks the columns (else every column is used). None when no task shares
    a configuration with the space.
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
    scores = score_space(
        space, sources, selection.columns, target_features, rng, model=model, target=target
    )
    return ZeroShot(scores, tuple(s.name for s in sources), selection)
