"""Predictive tuning (Bergstra, Pinto & Cox, "Boosted regression trees for predictive auto-tuning").

The paper's method (§2): fit boosted regression trees to the log speedup of every measured
configuration over a reference configuration, y = log(t_ref / t) (Eq. 1), give invalid
configurations a constant y = zeta < 0, and search the *model* instead of the GPU with a
stochastic hill climb. Task features (the problem size) are part of every model row, so a model
trained on other problem sizes predicts a new one before anything was measured on it.

Here the model picks what to measure next, batch by batch:

1. A random first sample (`initial`; the reference row first when one is given). With `prior`
   data the model already predicts the target, so the default skips it.
2. Each batch: fit the trees on the target's measurements and the prior tasks', predict every
   configuration of the target, and hill-climb on those predictions, half of the climbs
   (`from_best`) from the best measured configuration and the others from random ones
   (random restarts). A climb moves to a neighbour, another legal configuration differing in
   one parameter, while the model predicts an improvement. A climb's end point not yet
   measured joins the batch; an end point already measured or chosen gives its best predicted
   free neighbour instead. A share `explore` of the batch is drawn at random, as is whatever
   the climbs leave, so the search always continues and exhausts a small space.

The reference configuration is the `reference` row (the space's default) when given and
valid, else the first valid configuration measured. Each prior task is normalised by its own
time of that same configuration when it has a valid one, else by its median valid time
(before the target has a reference, always the median): speedups then mean the same thing
across problem sizes, which matters because the trees share splits between tasks.

Choices and deviations from the paper, and why:

* Model: scikit-learn's boosted trees, in whichever of its two implementations fits faster
  (`speedup.boosted_trees`). Both grow each tree best first to 31 leaves, so they build the
  same model; parameter spaces have few distinct values per column, so the 255 histogram bins
  are exact. A search without prior data fits 50-300 rows: `GradientBoostingRegressor` in
  50-110 ms on this 2-core box, `HistGradientBoostingRegressor` in 85-180 ms (its per-tree
  overhead is Python), and these fits were two thirds of IterML's time with 8 devices
  (`docs/experiments/scaleout.md`). With prior data the training set reaches tens of
  thousands of rows: on gemm's 18k configurations the exact one took 1.25 s to fit, the
  histogram one 0.17 s. They cross near 600 rows; up to `speedup.EXACT_ROWS` (500) the exact
  one fits. OpenMP threads are capped at `n_jobs`: unbounded they oversubscribe a busy
  machine (a 20-row fit took 2 s instead of 30 ms while other jobs ran).
* Trees: the paper's 100 boosting rounds, but depth 6 and leaves of at least 2 instead of
  depth 4 and leaves of 10. The paper trained on 1,500-30,000 rows; here the model starts from
  20, and leaves of 10 are too coarse to rank the few configurations within 5% of the best.
* zeta = log(`invalid_speedup`), log(0.5) by default: the paper tried log(0.01)..log(0.99)
  and found moderate values (0.25-0.75) best on one GPU and no effect on the other.
* The paper's climb resamples every parameter with probability 0.25 and starts from the
  reference; here a move changes exactly one parameter to another legal value (the neighbours
  of a constrained space are rows of `Candidates`), chosen at random among those the model
  predicts better (stochastic hill climbing). Tree models are piecewise constant, so a climb
  may also take up to `max_sideways` moves to equally predicted, not yet visited neighbours
  before it stops: plateaus would otherwise end most climbs where they start.
* The paper measures nothing on the target (pure prediction); here prediction only chooses
  what to measure, and the measurements keep refining the model.

How the defaults were chosen (replay data, 20 seeds, Standard 1 / Standard 2 in measurements
on pnpoly, convolution A4000, MI250X, W6600 and RTX 3090; random search 80 / 335, 267 / 1,039,
324 / 1,234, 694 / 2,299, 210 / 861). With 20 runs the 5th percentile is the second worst run,
so differences of a few tens are noise.

* Paper trees (depth 4, leaves 10), batches of climb end points topped up at random:
  53 / 187, 297 / 946, 313 / never, 334 / 1,581, 104 / 221. The climbs of a batch ended in
  only 1-4 distinct places, mostly measured already, so 85% of each batch was random.
  Replacing a measured end point by its best free neighbour and keeping a random share of
  0.2 (10 seeds): 61 / 253, 249 / 751, 92 / 188, 468 / 862.
* Then the trees: leaves of 1, 2, 5 at depth 4: A4000 105 / 222, 144 / 284, 164 / 309, W6600
  232 / 662, 308 / 592, 307 / 682; depth 6 with leaves of 2 (the default): 57 / 151,
  72 / 281, 65 / 153, 205 / 571, 44 / 90; depth 6 with leaves of 1: 62 / 126, 101 / 241,
  102 / 208, 248 / 454, 42 / 216; depth 8 with leaves of 2: 65 / 122, 112 / 254, 62 / 147,
  302 / 921, 46 / 105.
* Within noise of the default, not adopted: batches of 5 (56 / 165, 132 / 254, 61 / 172,
  244 / 532, 43 / 97) or 20 (55 / 224, 124 / 264, 49 / 161, 227 / 631, 51 / 90); a first
  sample of 10 (67 / 211, 127 / 232, 62 / 127, 228 / 507, 41 / 145) or 40 (45 / 152,
  121 / 244, 61 / 162, 321 / 681, 47 / 165); random share 0.1 (87 / 247, 88 / 229, 58 / 173,
  202 / 535, 52 / 193) or 0.3 (62 / 193, 121 / 221, 57 / 144, 194 / 571, 44 / 158); a quarter
  of the climbs from the best (81 / 197, 91 / 265, 68 / 151, 353 / 572, 62 / 117) or three
  quarters (68 / 150, 102 / 282, 64 / 154, 307 / 623, 41 / 125); invalid speedup 0.1
  (55 / 184, 144 / 221, 65 / 153, 205 / 571, 51 / 96); 1.5 climbs per pick instead of 3
  (57 / 180, 72 / 276, 65 / 153, 252 / 671, 44 / 90). Up to 30 sideways moves instead of 10
  changed only MI250X (65 / 136); it is the default because 10 left 8% of the climbs on a
  synthetic plateau function short of its optimum, 30 none.
* The defaults, 100 seeds (`annotune bench --repeats 100`): pnpoly 56 / 215, A4000 125 / 281,
  MI250X 71 / 153, W6600 263 / 612, convolution RTX 3090 51 / 115, A100 155 / 314 (random
  2,181 / 4,144), gemm 75 / 187 (1,959 / 7,057). IterML's: 45 / 133, 91 / 228, 94 / 224,
  471 / 911, 61 / 106, 148 / 316, 116 / 221. With the exact fit for small training sets (the
  same seeds): pnpoly 62 / 211, A4000 121 / 243, MI250X 65 / 201, RTX 3090 51 / 126, against
  56 / 215, 125 / 281, 71 / 153, 51 / 115 the same day; summed, 1,080 against 1,067.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from annotune.core.records import Candidates, Result, TaskData, check_task_features
from annotune.search.base import Strategy
from annotune.search.neighbours import Neighbours, climb_ends
from annotune.search.speedup import SpeedupModel, check_tree_options


class PredictiveStrategy(Strategy):
    """Boosted regression trees on log speedup, hill-climbed to choose each batch.

    Options (keyword-only, validated here):

    batch: configurations measured per model fit.
    initial: size of the first, random sample (None: 20 without `prior`, 0 with it).
    from_best: share of each batch's climbs that start from the best measured configuration;
        the others start from random configurations.
    explore: share of each batch drawn at random among the unmeasured configurations.
    restarts: most climbs per batch, as a multiple of the picks left to the climbs (a climb
        adds nothing when its end point and all its neighbours are measured or chosen).
    max_sideways: moves to equally predicted neighbours a climb may take in a row.
    invalid_speedup: invalid configurations are learned as this speedup (zeta = its log).
    reference: row of the default configuration, measured first and the speedup reference
        (None: the first valid configuration measured).
    task_features: the target's problem-size features, appended to every model row.
    prior: measurements of the same parameters on other problem sizes, each with `features`
        of the same length as `task_features`; trained on together with the target's.
    trees, depth, min_leaf, learning_rate: the boosted trees (the paper: 100, 4, 10, -).
    n_jobs: OpenMP threads for the trees (1 when many searches already run in parallel).
    """

    name = "predictive"

    def __init__(
        self,
        *,
        batch: int = 10,
        initial: int | None = None,
        from_best: float = 0.5,
        explore: float = 0.2,
        restarts: float = 3.0,
        max_sideways: int = 30,
        invalid_speedup: float = 0.5,
        reference: int | None = None,
        task_features: Sequence[float] = (),
        prior: Sequence[TaskData] = (),
        trees: int = 100,
        depth: int = 6,
        min_leaf: int = 2,
        learning_rate: float = 0.1,
        n_jobs: int = 1,
    ) -> None:
        if batch < 1:
            raise ValueError("batch must be >= 1")
        if initial is not None and initial < 0:
            raise ValueError("initial must be >= 0")
        if not (0.0 <= from_best <= 1.0 and 0.0 <= explore <= 1.0):
            raise ValueError("from_best and explore must be fractions in [0, 1]")
        if restarts < 1.0:
            raise ValueError("restarts must be >= 1")
        if max_sideways < 0:
            raise ValueError("max_sideways must be >= 0")
        check_tree_options(
            invalid_speedup=invalid_speedup,
            trees=trees,
            depth=depth,
            min_leaf=min_leaf,
            learning_rate=learning_rate,
        )
        check_task_features(prior, task_features)
        self.batch = batch
        self.initial = initial
        self.from_best = from_best
        self.explore = explore
        self.restarts = restarts
        self.max_sideways = max_sideways
        self.invalid_speedup = invalid_speedup
        self.reference = reference
        self.task_features = tuple(float(f) for f in task_features)
        self.prior = tuple(prior)
        self.trees = trees
        self.depth = depth
        self.min_leaf = min_leaf
        self.learning_rate = learning_rate
        self.n_jobs = n_jobs

    # -- Strategy interface ---------------------------------------------------------------

    def start(self, candidates: Candidates, rng: np.random.Generator) -> None:
        n = len(candidates)
        if self.reference is not None and not 0 <= self.reference < n:
            raise ValueError(f"reference row {self.reference} outside the {n} candidates")
        for task in self.prior:
            if task.values.shape[1] != candidates.values.shape[1]:
                raise ValueError(f"prior task {task.name!r} has other parameters than the target")
        self._rng = rng
        self._model = SpeedupModel(
            candidates.values,
            self.task_features,
            self.prior,
            invalid_speedup=self.invalid_speedup,
            trees=self.trees,
            depth=self.depth,
            min_leaf=self.min_leaf,
            learning_rate=self.learning_rate,
            n_jobs=self.n_jobs,
        )
        self._neighbours = Neighbours.of(candidates.values) if n else None
        self._asked = np.zeros(n, dtype=bool)
        self._times = np.full(n, np.nan)
        self._told: list[int] = []
        self._reference: int | None = None  # row whose time is the target's reference
        self._iteration = 0
        default = 0 if self.prior else 20
        self._initial = default if self.initial is None else self.initial

    def ask(self, max_count: int) -> list[int]:
        free = np.flatnonzero(~self._asked)
        if max_count <= 0 or free.size == 0:
            return []
        asked = int(self._asked.sum())
        if asked < self._initial:
            chosen = self._random(free, min(self._initial - asked, max_count))
        elif not self._can_model():
            chosen = self._random(free, min(self.batch, max_count))
        else:
            chosen = self._climbed(min(self.batch, max_count))
        self._iteration += 1
        self._asked[chosen] = True
        return [int(i) for i in chosen]

    def tell(self, results: Sequence[Result]) -> None:
        for result in results:
            time = result.time
            valid = time is not None and math.isfinite(time)
            self._asked[result.index] = True
            self._times[result.index] = float(time) if valid else math.nan  # type: ignore[arg-type]
            self._told.append(result.index)
            # The given reference row wins once measured valid; until then the first valid row.
            if valid and (self._reference is None or result.index == self.reference):
                self._reference = result.index

    def progress(self) -> dict[str, float]:
        return {"iteration": self._iteration, "measured": len(self._told)}

    def exclude(self, rows: Sequence[int] | np.ndarray) -> None:
        """Never propose `rows`: another strategy sharing this search has chosen them."""
        self._asked[np.asarray(rows, dtype=np.intp)] = True

    # -- internals --------------------------------------------------------------------------

    def _can_model(self) -> bool:
        """Whether there is anything to learn: prior data, or a valid target measurement."""
        return bool(self.prior) or self._reference is not None

    def _random(self, free: np.ndarray, count: int) -> np.ndarray:
        """Random unmeasured rows; the reference row first when it is given and not yet asked."""
        first = self.reference is not None and not self._asked[self.reference]
        rest = free[free != self.reference] if first else free
        drawn = self._rng.choice(rest, size=min(count - first, rest.size), replace=False)
        return np.concatenate([[self.reference] if first else [], drawn]).astype(np.intp)

    def _climbed(self, count: int) -> np.ndarray:
        """`count` rows: end points of hill climbs on the model, and a random share."""
        predicted = self._model.fit_predict(self._told, self._times, self._reference, self._rng)
        assert self._neighbours is not None
        measured = np.flatnonzero(~np.isnan(self._times))
        best = int(measured[np.argmin(self._times[measured])]) if measured.size else -1
        n_climbs = count - round(self.explore * count)
        taken = self._asked.copy()
        chosen = climb_ends(
            predicted,
            self._neighbours,
            taken,
            self._rng,
            count=n_climbs,
            from_best=round(self.from_best * n_climbs) if measured.size else 0,
            best=best,
            restarts=self.restarts,
            max_sideways=self.max_sideways,
        )
        left = np.flatnonzero(~taken)
        extra = self._rng.choice(left, size=min(count - len(chosen), left.size), replace=False)
        return np.concatenate([np.asarray(chosen, dtype=np.intp), extra]).astype(np.intp)
