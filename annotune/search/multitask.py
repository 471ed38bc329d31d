"""The multi-task surrogate: one regressor of every source GPU's measurements of a space.

Muralidharan et al.'s feature concatenation (ASPLOS '16, §3.1): every measured row of every
source GPU is one training row, the configuration's model inputs (`encode_features`) followed
by that GPU's device features; appending a target GPU's device features to every configuration
selects its slice of the model. A space is thousands of configurations with a time each, so
the model is a regressor (a forest, as in IterML), not the paper's classifier of code variants,
of each source's normalized performance (its best time / the time: GPUs of different speed
become comparable).

It lives in search/ because the `transfer` strategy fits it on the candidates `start` gets.
Which device features it sees (CV-DFS), where the sources come from and the zero-shot use are
`annotune.transfer`'s: this module takes feature columns and sources as given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.base import BaseEstimator

from annotune.core.records import Candidates, TaskData
from annotune.search.models import Surrogate, encode_features, make_regressor

INVALID_PERFORMANCE = 1e-3
"""Normalized performance learned for an invalid configuration (and the floor for valid ones):
as bad as a 1000x slowdown, and finite under the log target."""

TARGETS = ("log", "linear")
"""The learned target: log(normalized performance), or the ratio itself, which squeezes every
configuration below half the optimum into a narrow band near zero."""

FORESTS = ("rf", "et")

PREDICTION_TREES = 256
"""Trees of a forest named by its model name ("rf", "et"), four times IterML's 48: its top pick
is a zero-shot prediction and the `transfer` strategy's first measurement, so the forest's luck
must not decide it (docs/experiments/transfer.md)."""

PREDICTION_ROWS = 24_000
"""Training rows of the ranking forest (`score_space`) at most: beyond, each source gives a
uniform sample of PREDICTION_ROWS / sources rows. Five sources of the convolution space
(21,810 rows) are used whole; ten would take the fit from about 10 s to 40 s (issue 38)."""


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


def encode_space(candidates: Candidates) -> np.ndarray:
    """The model inputs of every configuration (the encoding IterML uses)."""
    if not len(candidates):
        return np.zeros((0, 0))
    return encode_features(candidates.values)


class TransferModel:
    """The feature-concatenation regressor over one space.

    `space` is the encoded space (`encode_space`), `columns` the device feature columns to
    append (indices into each source's `features`). `fit` learns every source's normalized
    performance; `predict(features)` scores every configuration of the space for a GPU with
    those device features (higher is better). `trees` sizes a forest named by `model` ("rf",
    "et"; None: the IterML default).
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


def score_space(
    space: np.ndarray,
    sources: Sequence[Source],
    columns: Sequence[int],
    target_features: Sequence[float],
    rng: np.random.Generator,
    *,
    model: str | BaseEstimator = "rf",
    target: str = "log",
) -> np.ndarray:
    """Fit the model on `sources` with their device feature `columns` and score every row of
    the encoded `space` for the target GPU (`target_features`, laid out like each source's
    `features`; higher is better).

    The fit-and-score step that both the `transfer` strategy and the zero-shot prediction
    (`annotune.transfer.adapt.zero_shot`) take, so that they rank a space alike. The forest
    learns from `PREDICTION_ROWS` rows at most.
    """
    total = sum(source.rows.size for source in sources)
    per_source = None if total <= PREDICTION_ROWS else PREDICTION_ROWS // len(sources)
    model_ = TransferModel(space, columns, model=model, target=target)
    fitted = model_.fit(sources, rng, rows_per_source=per_source)
    return fitted.predict(np.asarray(target_features, dtype=np.float64))
