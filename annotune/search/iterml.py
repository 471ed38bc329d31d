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
  configurations; `local_moves.py`); and Thompson picks over the whole unmeasured space,
  which go where the trees disagree.
* The random picks cover unmeasured (value, value) pairs of small parameters (a greedy pairwise
  covering design, `covering.py`): what the models miss on a plateau is usually a pair of values
  (pnpoly: tile 18-20 with use_method 0).
* Batches of 5 until 50 are measured, then 10: the model changes most per measurement early.
* From 50 measured, two batches of three are hill climbs on boosted trees (the `predictive`
  strategy, run by `climbs.py`) instead. The forest's moves all start from what it ranks best
  and wait on a plateau when the better region needs several parameters changed at once
  (convolution W6600); the climbs' model is biased differently and their random starts end
  elsewhere. Each model learns from the other's measurements.
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
from annotune.search.climbs import Climbs
from annotune.search.covering import PairCoverage
from annotune.search.local_moves import LocalMoves
from annotune.search.models import Surrogate, encode_features, thompson_picks, time_targets


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
        self._best = math.inf
        self._local = LocalMoves(candidates.values, settings.moves_per_centre)
        self._surrogate = Surrogate(settings.model, n_jobs=settings.n_jobs)
        self._pick = max(1, round(settings.pick * n)) if settings.pick < 1 else int(settings.pick)
        self._initial = settings.initial if settings.initial is not None else self._pick
        self._climbs = Climbs(
            candidates,
            rng,
            share=settings.climb_share,
            after=settings.climb_after,
            incumbent_checks=settings.incumbent_checks,
            incumbent_values=settings.incumbent_values,
            n_jobs=settings.n_jobs,
        )
        self._coverage = (
            PairCoverage(candidates.values, settings.cover_values)
            if settings.cover_values and n
            else None
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
            chosen = self._climbs.batch(min(size, max_count), self._told, self._times, self._alive)
            if chosen.size == 0:
                chosen = self._model_guided(alive, min(size, max_count))
        self._climbs.exclude(chosen)
        self._iteration += 1
        self._asked += len(chosen)
        self._alive[chosen] = False
        return [int(i) for i in chosen]

    def tell(self, results: Sequence[Result]) -> None:
        self._climbs.tell(results)
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
            "climbs": self._climbs.batches,
        }

    # -- internals --------------------------------------------------------------------------

    def _model_guided(self, alive: np.ndarray, count: int) -> np.ndarray:
        """Fit on everything measured, predict `alive`, prune, and choose `count` rows."""
        settings = self.settings
        told = np.asarray(self._told)
        # Asked again with nothing new told (several devices measuring: the concurrent search
        # tops up a batch): the same data would give the same model, so it is kept.
        if self._fitted_on != told.size:
            targets = time_targets(self._times, settings.invalid_factor, settings.log_target)
            self._surrogate.fit(self._features[told], targets, self._rng)
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
        local = self._local.choose(
            self._told, self._times, alive, score, n_local - n_sampled, self._rng
        )
        if n_sampled:
            sampled = self._surrogate.sample(features, self._rng)
            sampled[np.isin(alive, local)] = np.inf
            more = self._local.choose(self._told, self._times, alive, sampled, n_sampled, self._rng)
            local = np.concatenate([local, more])
        taken[local] = True
        if thompson:
            free = ~taken[alive]
            exploit = thompson_picks(self._surrogate, alive, features, free, n_exploit, self._rng)
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
