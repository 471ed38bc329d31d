"""The `predictive` strategy's model: boosted regression trees on log speedup (Bergstra et al.).

Every measured configuration, of the target and of the prior tasks (other problem sizes),
becomes one training row: its encoded parameters with its task's features appended, learned as
its log speedup over its task's reference time (`log_speedup`, `reference_time`). The trees
are scikit-learn's, in whichever implementation fits faster at the training set's size
(`boosted_trees`; why, and the measurements, in the `predictive` module's docstring).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from sklearn.ensemble import GradientBoostingRegressor, HistGradientBoostingRegressor
from threadpoolctl import threadpool_limits

from annotune.core.records import TaskData
from annotune.search.models import checked_once, encode_features

EXACT_ROWS = 500
"""Training sets up to this size are fitted by exact boosting, larger ones by histograms
(`boosted_trees`)."""


def log_speedup(times: np.ndarray, reference: float, invalid: float) -> np.ndarray:
    """The paper's target (Eq. 1): log(reference / time); NaN (invalid) times get `invalid`."""
    times = np.asarray(times, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        y = np.log(reference / times)
    return np.where(np.isnan(times), invalid, y)


def reference_time(
    values: np.ndarray, times: np.ndarray, configuration: np.ndarray | None
) -> float:
    """A task's reference time: its valid time of `configuration`, else its median valid time.

    NaN when the task has no valid time at all (every row is then learned as invalid).
    """
    valid = ~np.isnan(times)
    if configuration is not None:
        same = np.flatnonzero(np.all(values == configuration, axis=1) & valid)
        if same.size:
            return float(times[same[0]])
    return float(np.median(times[valid])) if valid.any() else math.nan


def boosted_trees(
    rows: int, *, trees: int, depth: int, min_leaf: int, learning_rate: float, seed: int
) -> GradientBoostingRegressor | HistGradientBoostingRegressor:
    """Unfitted boosted regression trees for a training set of `rows` rows: the same model
    either way (trees grown best first to 31 leaves, squared error, no subsampling), fitted
    by whichever of scikit-learn's two implementations is faster at that size (the
    `predictive` module's docstring)."""
    same = {
        "max_depth": depth,
        "max_leaf_nodes": 31,
        "min_samples_leaf": min_leaf,
        "learning_rate": learning_rate,
        "random_state": seed,
    }
    if rows <= EXACT_ROWS:
        return GradientBoostingRegressor(n_estimators=trees, **same)
    return HistGradientBoostingRegressor(max_iter=trees, early_stopping=False, **same)


def check_tree_options(
    *, invalid_speedup: float, trees: int, depth: int, min_leaf: int, learning_rate: float
) -> None:
    """ValueError unless the options make a `SpeedupModel`."""
    if not 0.0 < invalid_speedup < 1.0:
        raise ValueError("invalid_speedup must be in (0, 1): worse than the reference")
    if trees < 1 or depth < 1 or min_leaf < 1 or learning_rate <= 0:
        raise ValueError("trees, depth, min_leaf and learning_rate must be positive")


class SpeedupModel:
    """Boosted trees fitted on the target's measurements and the prior tasks', predicting the
    log speedup of every configuration of the target.

    values: the target's configurations (n, d); task_features: the target's task features;
    prior: the other tasks' measurements, with features of the same length. The other options
    are `PredictiveStrategy`'s.
    """

    def __init__(
        self,
        values: np.ndarray,
        task_features: Sequence[float],
        prior: Sequence[TaskData],
        *,
        invalid_speedup: float,
        trees: int,
        depth: int,
        min_leaf: int,
        learning_rate: float,
        n_jobs: int,
    ) -> None:
        self.values = values
        self.prior = tuple(prior)
        self.invalid_speedup = invalid_speedup
        self.trees = trees
        self.depth = depth
        self.min_leaf = min_leaf
        self.learning_rate = learning_rate
        self.n_jobs = n_jobs
        self.rows = self._model_rows(values, task_features)
        self._predicted: tuple[int, np.ndarray] | None = None  # results fitted on, prediction

    def _model_rows(self, values: np.ndarray, task_features: Sequence[float]) -> np.ndarray:
        """Encoded parameters plus task features of the target's rows (float32, as the trees).

        The parameters of all tasks are encoded together, so that a column means the same
        transform (log2, alignment) for every task; the prior tasks' rows are kept too.
        """
        blocks = [values, *(task.values for task in self.prior)]
        sizes = [len(block) for block in blocks]
        stacked = np.vstack(blocks)
        encoded = encode_features(stacked) if len(stacked) else stacked
        features = [task_features, *(task.features for task in self.prior)]
        rows = [
            np.hstack([part, np.tile(np.asarray(f, dtype=np.float64), (len(part), 1))])
            for part, f in zip(np.split(encoded, np.cumsum(sizes)[:-1]), features, strict=True)
        ]
        self._prior_rows = [r.astype(np.float32) for r in rows[1:]]
        return rows[0].astype(np.float32)

    def training_set(
        self, told: Sequence[int], times: np.ndarray, reference: int | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Model rows and log-speedup targets of every measurement, target and prior: the
        target's `told` rows with their `times` (per row of the target, NaN when invalid),
        over the time of row `reference` (None: no valid one yet)."""
        zeta = math.log(self.invalid_speedup)
        told = np.asarray(told, dtype=np.intp)
        configuration = None if reference is None else self.values[reference]
        xs = [self.rows[told]]
        ys = []
        if told.size:
            own_reference = times[reference] if reference is not None else math.nan
            ys.append(log_speedup(times[told], own_reference, zeta))
        for task, rows in zip(self.prior, self._prior_rows, strict=True):
            xs.append(rows)
            own = reference_time(task.values, task.times, configuration)
            ys.append(log_speedup(task.times, own, zeta))
        return np.vstack(xs), np.concatenate(ys) if ys else np.zeros(0)

    def fit_predict(
        self,
        told: Sequence[int],
        times: np.ndarray,
        reference: int | None,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """Fit the boosted trees (`training_set`) and predict the log speedup of every target
        configuration; asked again with nothing new told (a batch topped up while devices
        measure), the last prediction: the same data would give the same model."""
        if self._predicted is not None and self._predicted[0] == len(told):
            return self._predicted[1]
        x, y = self.training_set(told, times, reference)
        model = boosted_trees(
            len(x),
            trees=self.trees,
            depth=self.depth,
            min_leaf=self.min_leaf,
            learning_rate=self.learning_rate,
            seed=int(rng.integers(2**31 - 1)),
        )
        with threadpool_limits(self.n_jobs, user_api="openmp"), checked_once(x, y):
            model.fit(x, y)
            predicted = model.predict(self.rows)
        self._predicted = (len(told), predicted)
        return predicted
