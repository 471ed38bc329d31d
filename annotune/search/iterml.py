"""IterML (Cui & Feng): measure a pick, fit a model, predict the rest, prune the worst; repeat.

The paper's Algorithm 1: each round measures a constant number of configurations drawn at
random from what is left of the space, fits a regression model (a random forest did best in
the paper) on everything measured so far, predicts the rest, and irreversibly prunes the `cut`
fraction predicted worst. `IterMLSettings(paper=True)` (strategy `iterml-paper`) is that
algorithm, kept for comparison. On real spaces its pruning is what fails: a run that prunes
the optimum early never gets it back (on the replay data the 5th percentile of runs stalls at
0.87-0.93 of the optimum, at 0.22 on convolution MI250X).

The default keeps the loop (fit on everything measured, predict everything left, choose by
prediction) and deviates where the replay measurements said so:

* The forest learns log(time) of a richer encoding (`models.encode_features`): run times span
  orders of magnitude, and power-of-two alignment separates the fast configurations. Invalid
  configurations are learned as a bad time, so the model steers away from their region.
* Pruning is soft: the pool is the best `(1 - cut) ** depth` of what is left under the current
  model, and depth grows after a batch that improved the best and shrinks after one that did
  not. What an early, poor model pruned comes back, and a stalled search widens again.
* Batches mix three moves: the paper's random picks inside the pool (they keep the model
  honest); one-parameter moves around the best measured, each (centre, parameter) pair once,
  to the value one sampled tree ranks best (a forest is too coarse to rank the top
  configurations); and Thompson picks over the whole unmeasured space, which go where the trees
  disagree.
* The random picks cover unmeasured (value, value) pairs of small parameters (a greedy pairwise
  covering design, `covering.py`): what the models miss on a plateau is usually a pair of values
  (pnpoly: tile 18-20 with use_method 0).
* Batches of 5 until 50 are measured, then 10: the model changes most per measurement early.
* From 50 measured, two batches of three are hill climbs on boosted trees (the `predictive`
  strategy) instead. The forest's moves all start from what it ranks best and wait on a plateau
  when the better region needs several parameters changed at once (convolution W6600); the
  climbs' model is biased differently and their random starts end elsewhere. Each model
  learns from the other's measurements.
* Each climbs batch first checks the best measured configuration's neighbours along parameters
  of at most 4 values (method switches, small tiles): the local moves expand each pair only
  once, so a near-best configuration could keep a wrong switch forever.

Every choice was measured on the replay data (Standard 1 / Standard 2, many seeds, against
random search); the experiments, their commands and numbers, adopted or not, are in
`docs/experiments/iterml.md`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from sklearn.base import BaseEstimator

from annotune.core.records import Candidates, Result
from annotune.search.base import Strategy
from annotune.search.covering import PairCoverage
from annotune.search.models import Surrogate, encode_features
from annotune.search.predictive import PredictiveStrategy


@dataclass(frozen=True, kw_only=True)
class IterMLSettings:
    """IterML's options, checked on construction (ValueError). The defaults are the best
    measured on the replay data (`docs/experiments/iterml.md`)."""

    # "rf", "et", "cart", "knn", "svr", "mlp", "gbt", or an unfitted scikit-learn regressor
    # (cloned for every fit). Thompson sampling needs a forest ("rf", "et"); other models
    # exploit their mean prediction. The paper found the random forest best.
    model: str | BaseEstimator = "rf"
    # Configurations measured per batch; a float in (0, 1) is the paper's pick *ratio* of the
    # whole space, turned into a constant count. Batches of 5 were no better for twice the fits.
    pick: float = 10
    # The first, purely random batch (None: `pick`).
    initial: int | None = 20
    # Batch size while fewer than `early_until` are measured (0: always `pick`): the model
    # changes most per measurement early on, so refitting often pays then; later, batches of
    # `pick` keep compiles parallel and fits rare.
    early_pick: int = 5
    early_until: int = 50
    # Fraction of the unmeasured space pruned per step of the pool's depth (0.1-0.4: noise).
    cut: float = 0.2
    # Fractions of each model batch: `local` one-parameter moves around the best measured,
    # `exploit` picks by the acquisition, the rest random in the pool. More exploitation lost
    # on the convolution spaces.
    local: float = 0.5
    exploit: float = 0.3
    # Share of the local moves valued by one tree drawn per batch instead of the forest's mean
    # (only with "thompson"): centres on a plateau then try different values.
    local_sample: float = 1.0
    # Parameters expanded around one centre per batch before the next centre (2-3: worse).
    moves_per_centre: int = 1
    # "thompson" (each pick the minimum of a different tree) or "mean".
    acquisition: str = "thompson"
    # Soft pool that narrows on progress and widens on stalls (else it narrows every batch).
    adaptive: bool = True
    # The soft pool never shrinks below this many configurations.
    min_keep: int = 50
    # Learn log(time) instead of time: run times span orders of magnitude.
    log_target: bool = True
    # An invalid configuration is learned as this multiple of the worst valid time so far.
    invalid_factor: float = 2.0
    # The plain Algorithm 1: irreversible pruning, purely random picks, raw time targets; it
    # turns off `local`, `exploit`, `log_target`, `early_pick`, `climb_share` and
    # `cover_values`. The `iterml-paper` strategy also sets pick 20, initial None and cut 0.5.
    paper: bool = False
    # Threads for the models (1 when many searches already run in parallel).
    n_jobs: int = 1
    # From `climb_after` measured, this fraction of the batches (evenly interleaved; 2/3:
    # forest, climbs, climbs, forest, ...) is hill climbs on boosted trees (0: never).
    # From 0, the climbs slowed the forest's early finds on pnpoly.
    climb_share: float = 2 / 3
    climb_after: int = 50
    # Each climbs batch first measures up to `incumbent_checks` unmeasured neighbours of the
    # best measured along parameters of at most `incumbent_values` values (0: none); 4 covers
    # pnpoly's between_method, whose wrong value otherwise stalls runs at 0.949.
    incumbent_checks: int = 2
    incumbent_values: int = 4
    # Random picks cover value pairs of the parameters with at most this many values (0:
    # uniform picks). 12 spans the replay spaces' tile, block-height and method counts, not
    # their block widths (16, 31), whose pairs would crowd out the rest.
    cover_values: int = 12

    def __post_init__(self) -> None:
        if self.pick <= 0:
            raise ValueError("pick must be a positive count or a ratio in (0, 1)")
        if not 0.0 <= self.cut < 1.0:
            raise ValueError("cut must be in [0, 1)")
        local, exploit = self.local, self.exploit
        if not (0.0 <= exploit <= 1.0 and 0.0 <= local <= 1.0 and exploit + local <= 1.0):
            raise ValueError("local and exploit must be fractions with local + exploit <= 1")
        if not 0.0 <= self.local_sample <= 1.0:
            raise ValueError("local_sample must be a fraction in [0, 1]")
        if self.moves_per_centre < 1:
            raise ValueError("moves_per_centre must be >= 1")
        if self.early_pick < 0 or self.early_until < 0:
            raise ValueError("early_pick and early_until must be >= 0")
        if not 0.0 <= self.climb_share <= 1.0 or self.climb_after < 0:
            raise ValueError("climb_share must be a fraction in [0, 1] and climb_after >= 0")
        if self.cover_values < 0:
            raise ValueError("cover_values must be >= 0")
        if self.incumbent_checks < 0 or self.incumbent_values < 0:
            raise ValueError("incumbent_checks and incumbent_values must be >= 0")
        if self.initial is not None and self.initial < 1:
            raise ValueError("initial must be >= 1")
        if self.acquisition not in ("thompson", "mean"):
            raise ValueError("acquisition must be 'thompson' or 'mean'")
        if self.invalid_factor < 1.0:
            raise ValueError("invalid_factor must be >= 1")


class IterML(Strategy):
    """Iterative model-guided pruning search (see the module docstring).

    settings: the options (None: the defaults). With `paper`, `self.settings` holds the
        settings in effect, the paper's zeros in place of the moves it turns off.
    extra_features: optional (n, k) array, one row per candidate of the search to come,
        appended to the model inputs: knowledge from outside the search, e.g. the `transfer`
        strategy's prediction from other GPUs, which the forest can split on from the start.
        Data about one space, not a setting, so it is given here.
    """

    name = "iterml"

    def __init__(
        self,
        settings: IterMLSettings | None = None,
        *,
        extra_features: np.ndarray | None = None,
    ) -> None:
        settings = settings if settings is not None else IterMLSettings()
        if settings.paper:
            settings = replace(
                settings,
                local=0.0,
                exploit=0.0,
                log_target=False,
                early_pick=0,
                climb_share=0.0,
                cover_values=0,
            )
            self.name = "iterml-paper"
        self.settings = settings
        self.extra_features = extra_features

    def set_extra_features(self, extra_features: np.ndarray | None) -> None:
        """Replace the extra model inputs (`extra_features`), also mid-search: the `transfer`
        strategy's prediction once other GPUs tuned at the same time have results. The next
        batch is chosen by a model fitted with them."""
        self.extra_features = extra_features
        n = len(self._encoded)
        self._features = self._encoded
        if extra_features is not None and n:
            extra = np.asarray(extra_features, dtype=np.float32).reshape(n, -1)
            self._features = np.hstack([self._encoded, extra])
        self._fitted_on = -1

    def unasked(self) -> np.ndarray:
        """The rows not asked yet (nor pruned), as a mask."""
        return self._alive.copy()

    # -- Strategy interface ---------------------------------------------------------------

    def start(self, candidates: Candidates, rng: np.random.Generator) -> None:
        n = len(candidates)
        settings = self.settings
        self._rng = rng
        self._values = candidates.values
        # float32: what scikit-learn's trees compute in; converting once saves a copy per call.
        self._encoded = (
            encode_features(candidates.values).astype(np.float32) if n else (candidates.values)
        )
        self._fitted_on = -1  # how many results the surrogate was last fitted on
        self._mean = np.full(n, np.nan)  # its mean prediction per row (nan: not predicted yet)
        self.set_extra_features(self.extra_features)
        self._alive = np.ones(n, dtype=bool)  # unmeasured and (paper mode) not pruned
        self._told: list[int] = []
        self._times: list[float] = []  # parallel to _told: time, or nan when invalid
        self._asked = 0
        self._iteration = 0
        self._depth = 0  # pruning steps applied to the soft pool
        self._best = math.inf
        self._expanded: dict[int, set[int]] = {}  # centre row -> parameters moved along
        self._surrogate = Surrogate(settings.model, n_jobs=settings.n_jobs)
        self._pick = max(1, round(settings.pick * n)) if settings.pick < 1 else int(settings.pick)
        self._initial = settings.initial if settings.initial is not None else self._pick
        self._batches_after_climb_start = 0
        self._turn_told = -1  # results told when the turn last passed
        self._climb_batches = 0
        self._candidates = candidates
        self._climber: PredictiveStrategy | None = None  # created at its first turn
        self._coverage = (
            PairCoverage(candidates.values, settings.cover_values)
            if settings.cover_values and n
            else None
        )
        self._checked_axes = np.array(
            [np.unique(column).size <= settings.incumbent_values for column in candidates.values.T],
            dtype=bool,
        )

    def ask(self, max_count: int) -> list[int]:
        alive = np.flatnonzero(self._alive)
        if max_count <= 0 or alive.size == 0:
            return []
        if self._asked < self._initial or not self._told:
            size = min(self._initial - self._asked, max_count, alive.size)
            chosen = self._random_picks(alive, max(size, 1))
        else:
            size = self._pick
            if self.settings.early_pick and len(self._told) < self.settings.early_until:
                size = self.settings.early_pick
            chosen = self._climbed(min(size, max_count))
            if chosen.size == 0:
                chosen = self._model_guided(alive, min(size, max_count))
        if self._climber is not None:
            self._climber.exclude(chosen)
        self._iteration += 1
        self._asked += len(chosen)
        self._alive[chosen] = False
        return [int(i) for i in chosen]

    def tell(self, results: Sequence[Result]) -> None:
        if self._climber is not None:
            self._climber.tell(results)
        if self._coverage is not None:
            self._coverage.record([result.index for result in results])
        improved = False
        for result in results:
            self._alive[result.index] = False
            self._told.append(result.index)
            time = result.time
            valid = time is not None and math.isfinite(time)
            self._times.append(float(time) if valid else math.nan)  # type: ignore[arg-type]
            if valid and time < self._best:  # type: ignore[operator]
                self._best = float(time)  # type: ignore[arg-type]
                improved = True
        self._depth = self._depth + 1 if improved else max(0, self._depth - 1)

    def progress(self) -> dict[str, float]:
        return {
            "iteration": self._iteration,
            "measured": len(self._told),
            "alive": int(self._alive.sum()),
            "climbs": self._climb_batches,
        }

    # -- internals --------------------------------------------------------------------------

    def _climbed(self, count: int) -> np.ndarray:
        """The climbs' batch when it is their turn, else nothing.

        The forest's moves (one-parameter steps, Thompson picks inside a pool ranked by one
        model) wait on a plateau when the better region needs several parameters changed at
        once. Climbs on a second, differently biased model from random starts end in other
        places: on convolution W6600 the `predictive` strategy alone reaches Standard 1 in 263
        measurements where the forest alone needed 511. Sharing the batches, each model learns from
        the other's measurements.
        """
        if not self.settings.climb_share or len(self._told) < self.settings.climb_after:
            return np.zeros(0, dtype=np.intp)
        # The turn passes only when something new was told: asked again first (several
        # devices measuring: the concurrent search tops up a batch), the batch goes on with the
        # same model, so topping it up costs no fit of the other model.
        if len(self._told) != self._turn_told:
            self._turn_told = len(self._told)
            self._batches_after_climb_start += 1
        turn = self._batches_after_climb_start
        # Batch `turn` is the climbs' when it completes another whole share (1e-9: 3 * (2/3)).
        if math.floor(turn * self.settings.climb_share + 1e-9) == math.floor(
            (turn - 1) * self.settings.climb_share + 1e-9
        ):
            return np.zeros(0, dtype=np.intp)
        if self._climber is None:
            self._climber = self._start_climber()
        checks = self._incumbent_neighbours(min(self.settings.incumbent_checks, count))
        self._climber.exclude(checks)
        climbed = np.asarray(self._climber.ask(count - checks.size), dtype=np.intp)
        chosen = np.concatenate([checks, climbed[self._alive[climbed]]])
        self._climb_batches += bool(chosen.size)
        return chosen

    def _incumbent_neighbours(self, count: int) -> np.ndarray:
        """Up to `count` unmeasured one-parameter neighbours of the best measured, along the
        parameters with at most `incumbent_values` values, in random order."""
        times = np.asarray(self._times)
        valid = ~np.isnan(times)
        if count <= 0 or not valid.any():
            return np.zeros(0, dtype=np.intp)
        best = np.asarray(self._told)[valid][np.argmin(times[valid])]
        differs, one_move = self._one_move_from(best)
        neighbours = one_move & self._alive & differs[:, self._checked_axes].any(axis=1)
        return self._rng.permutation(np.flatnonzero(neighbours))[:count].astype(np.intp)

    def _one_move_from(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        """Which parameters of each candidate differ from `row`'s, and which candidates differ
        in exactly one (its neighbours)."""
        differs = self._values != self._values[row]
        return differs, differs.sum(axis=1, dtype=np.int32) == 1

    def _start_climber(self) -> PredictiveStrategy:
        """The climbs' strategy, told everything measured so far.

        Created late because its neighbour table costs about 2 s on 10^6 configurations,
        wasted on a search that stops before `climb_after` measurements.
        """
        # explore=0: the forest's batches already hold the random (pair-covering) share; the
        # predictive strategy's own uniform random fifth only diluted the climbs.
        climber = PredictiveStrategy(initial=0, explore=0.0, n_jobs=self.settings.n_jobs)
        climber.start(self._candidates, self._rng)
        climber.tell(
            [
                Result(row, None if math.isnan(time) else time)
                for row, time in zip(self._told, self._times, strict=True)
            ]
        )
        climber.exclude(np.flatnonzero(~self._alive))  # asked, results still to come
        return climber

    def _targets(self) -> np.ndarray:
        """Training targets: (log) times, invalid ones imputed as a bad time."""
        times = np.asarray(self._times)
        valid = ~np.isnan(times)
        if not valid.any():
            return np.zeros(times.size)
        filled = np.where(valid, times, times[valid].max() * self.settings.invalid_factor)
        return np.log(np.maximum(filled, 1e-300)) if self.settings.log_target else filled

    def _model_guided(self, alive: np.ndarray, count: int) -> np.ndarray:
        """Fit on everything measured, predict `alive`, prune, and choose `count` rows."""
        settings = self.settings
        told = np.asarray(self._told)
        # Asked again with nothing new told (several devices measuring: the concurrent search
        # tops up a batch): the same data would give the same model, so it is kept.
        if self._fitted_on != told.size:
            self._surrogate.fit(self._features[told], self._targets(), self._rng)
            self._fitted_on = told.size
            self._mean = np.full(self._alive.size, np.nan)
        features = self._features[alive]
        unknown = np.isnan(self._mean[alive])  # predicted once per fit
        if unknown.any():
            self._mean[alive[unknown]] = self._surrogate.predict(features[unknown]).mean
        score = self._mean[alive]
        # Best (lowest) first; random keys break the many ties a tree model produces.
        ranked = alive[np.lexsort((self._rng.random(alive.size), score))]
        if settings.paper:
            keep = ranked.size - int(settings.cut * ranked.size)
            self._alive[ranked[keep:]] = False
            return self._rng.choice(ranked[:keep], size=min(count, keep), replace=False)
        depth = self._depth if settings.adaptive else self._iteration
        size = max(settings.min_keep, math.ceil(ranked.size * (1.0 - settings.cut) ** depth))
        pool = ranked[:size]
        n_local = round(settings.local * count)
        n_exploit = min(round(settings.exploit * count), count - n_local)
        taken = np.zeros(self._alive.size, dtype=bool)
        thompson = settings.acquisition == "thompson"
        n_sampled = round(settings.local_sample * n_local) if thompson else 0
        local = self._local(alive, score, n_local - n_sampled)
        if n_sampled:
            sampled = self._surrogate.sample(features, self._rng)
            sampled[np.isin(alive, local)] = np.inf
            local = np.concatenate([local, self._local(alive, sampled, n_sampled)])
        taken[local] = True
        if thompson:
            exploit = self._thompson(alive, features, ~taken[alive], n_exploit)
        else:
            exploit = ranked[~taken[ranked]][:n_exploit]
        taken[exploit] = True
        rest = pool[~taken[pool]]
        n_random = min(count - local.size - exploit.size, rest.size)
        explore = self._random_picks(rest, n_random)
        return np.concatenate([local, exploit, explore])

    def _random_picks(self, rows: np.ndarray, count: int) -> np.ndarray:
        """`count` of `rows` at random, spread over uncovered value pairs unless turned off."""
        if self._coverage is None:
            return self._rng.choice(rows, size=count, replace=False)
        return self._coverage.spread(rows, count, self._rng)

    def _local(self, alive: np.ndarray, score: np.ndarray, count: int) -> np.ndarray:
        """`count` model-chosen unmeasured neighbours of the best measured configurations.

        A neighbour differs from its centre in exactly one parameter. Centres are taken best
        first; around each, up to `moves_per_centre` parameters not expanded before (drawn
        at random) are moved to the value with the best `score` (predicted for `alive`: the
        forest's mean, or one tree's). Drawing the parameter
        first matters: ranking all neighbours together spends the picks on the parameter
        with the most values even when it hardly matters (pnpoly's 31 block sizes). Each
        (centre, parameter) pair is expanded once per run, so the search walks down the
        ranking instead of circling the same few centres.
        """
        if count <= 0:
            return np.zeros(0, dtype=np.intp)
        times = np.asarray(self._times)
        told = np.asarray(self._told)
        valid = ~np.isnan(times)
        centres = told[valid][np.argsort(times[valid], kind="stable")]
        predicted = np.full(self._alive.size, np.inf)
        predicted[alive] = score
        chosen: list[int] = []
        for centre in centres:
            if len(chosen) == count:
                break
            differs, one_move = self._one_move_from(centre)
            near = one_move & np.isfinite(predicted)
            if not near.any():
                continue
            expanded = self._expanded.setdefault(int(centre), set())
            axes = [a for a in np.flatnonzero(differs[near].any(axis=0)) if a not in expanded]
            moves = min(self.settings.moves_per_centre, count - len(chosen))
            for axis in self._rng.permutation(axes)[:moves]:
                expanded.add(int(axis))
                along = np.flatnonzero(near & differs[:, axis] & np.isfinite(predicted))
                if along.size == 0:
                    continue
                best = along[predicted[along] == predicted[along].min()]
                pick = int(best[self._rng.integers(best.size)])
                predicted[pick] = np.inf
                chosen.append(pick)
        return np.asarray(chosen, dtype=np.intp)

    def _thompson(
        self, rows: np.ndarray, features: np.ndarray, free: np.ndarray, count: int
    ) -> np.ndarray:
        """`count` of the `free` `rows`, each the minimum of a freshly drawn model sample."""
        chosen: list[int] = []
        free = free.copy()
        for _ in range(min(count, int(free.sum()))):
            draw = self._surrogate.sample(features, self._rng)
            draw[~free] = np.inf
            best = np.flatnonzero(draw == draw.min())
            pick = int(best[self._rng.integers(best.size)])
            free[pick] = False
            chosen.append(int(rows[pick]))
        return np.asarray(chosen, dtype=np.intp)
