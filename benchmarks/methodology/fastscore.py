"""The field's score (Willemsen et al. 2024), computed directly from a strategy's runs.

Our own implementation of the definition that `autotuning-methodology` 1.1.0 applies with
`judge.py`'s settings (read from its source, not copied): the best-found objective over
*charged tuning time*, standardised against random search calculated exactly on the space,
averaged over a time range that ends where random search is expected to reach 95% of the way
from the space's median to its optimum.

* **The space** (`SpaceStats`): each configuration's total time is the sum of its recorded
  compile time, kernel runs (`times`), framework time and verification time, in seconds; the
  valid objective values sorted ascending are the distribution the curves index into.
* **The time range**: random search's expected evaluations to reach the target (the
  package's `ceil(i / (N + 1 - i))` over the sorted distribution) times the median total time
  per configuration, from the 1% target to the 95% target, 1000 points.
* **The budget** a strategy gets: 1.1 times the range's end.
* **Random search**: after M evaluations the value at index `round(M (N + 1) / (M + 1))` of
  the distribution sorted worst first, M = time / mean time per evaluation (invalid ones
  weighted by their share), smoothed with a monotone cubic (PCHIP) as the package does.
* **A strategy's curve**: every repeat's (cumulative charged time, best so far) pooled, the
  best mapped to its index in the distribution, one isotonic fit over time (clipped at both
  ends), held flat after the "real stopping point" (the first repeat end past the median
  repeat end). The package's own curve is the mean of a bootstrap bagging of such isotonic fits
  (unseeded); here the fit is the plain one, so the score is deterministic.
* **The score**: mean over the time range of (strategy - random) / (optimum - random).

`cell_score` also gives each repeat's own score (the same curve from that repeat alone) and a
95% bootstrap interval of the pooled score over repeats: a cell's spread.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.interpolate import PchipInterpolator
from sklearn.ensemble import BaggingRegressor
from sklearn.isotonic import IsotonicRegression

RESOLUTION = 1000
CUTOFF = 0.95
CUTOFF_START = 0.01
BUDGET_MARGIN = 0.1


@dataclass(frozen=True)
class SpaceStats:
    """What the score needs of a brute-forced space (times in seconds, objective in ms)."""

    dist: np.ndarray  # valid objective values, ascending
    median_time: float  # median total time of a configuration
    time_per_feval: float  # random search's mean charged time per evaluation
    fevals_start: int
    fevals_end: int

    @property
    def optimum(self) -> float:
        return float(self.dist[0])

    @property
    def time_range(self) -> np.ndarray:
        return np.linspace(
            self.fevals_start * self.median_time, self.fevals_end * self.median_time, RESOLUTION
        )

    @property
    def budget_seconds(self) -> float:
        return self.fevals_end * self.median_time * (1 + BUDGET_MARGIN)


def _total_time_ms(record: dict) -> float:
    parts = [
        record.get("compile_time"),
        sum(record["times"]) if record.get("times") else None,
        record.get("framework_time"),
        record.get("strategy_time"),
        record.get("verification_time"),
    ]
    numbers = [float(p) for p in parts if p is not None and not isinstance(p, str)]
    return sum(numbers) if numbers else math.nan


def _fevals_to_target(descending: np.ndarray, fraction: float, median: float) -> int:
    """Random search's expected evaluations to reach `fraction` of the way from the median to
    the optimum (the distribution sorted worst first, as the package indexes it)."""
    optimum = descending[-1]
    target = optimum + (median - optimum) * (1 - fraction)
    i = int(np.argmax(descending <= target))
    if fraction != 1.0 and descending[i] == optimum:
        if i == 0:
            raise ValueError("the optimum is reached at once")
        i -= 1
    n = descending.shape[0]
    return math.ceil(i / (n + 1 - i))


def space_stats(cache: dict) -> SpaceStats:
    """The statistics of a Kernel Tuner cache (`cache["cache"]`: one record per config)."""
    records = list(cache["cache"].values())
    values = np.array(
        [r["time"] if not isinstance(r["time"], str) else math.nan for r in records], dtype=float
    )
    totals = np.array([_total_time_ms(r) for r in records]) / 1000.0
    invalid = np.isnan(values)
    dist = np.sort(values[~invalid])
    median = float(np.median(dist))
    if invalid.any():
        per_feval = float(np.mean(totals[~invalid])) + invalid.mean() * float(
            np.mean(totals[invalid])
        )
    else:
        per_feval = float(np.mean(totals))
    descending = dist[::-1]
    start = _fevals_to_target(descending, CUTOFF_START, median)
    end = _fevals_to_target(descending, CUTOFF, median)
    if end - start < 2:
        everything = _fevals_to_target(descending, 1.0, median)
        if start == 0:
            end = min(everything, end + 2)
        else:
            end = min(everything, end + 1)
            start -= 1
    return SpaceStats(dist, float(np.median(totals[~np.isnan(totals)])), per_feval, start, end)


def random_curve(stats: SpaceStats) -> np.ndarray:
    """Random search without replacement, calculated on the space, over the time range."""
    fevals = np.round(np.maximum(stats.time_range / stats.time_per_feval, 1)).astype(int)
    descending = stats.dist[::-1]
    n = descending.shape[0]
    draws = descending[np.minimum(n - 1, np.round(fevals * (n + 1) / (fevals + 1)).astype(int))]
    first = np.concatenate([[True], np.diff(fevals) > 0])
    if first.sum() < 2:
        return draws
    smooth = np.linspace(fevals[0], fevals[-1], fevals.shape[0])
    return PchipInterpolator(fevals[first], draws[first])(smooth)


@dataclass(frozen=True)
class Run:
    """One repeat: the cumulative charged time (s) after each evaluation and the best valid
    objective so far (NaN until the first valid one, and where the time is unknown)."""

    times: np.ndarray
    best: np.ndarray


def run_from_evaluations(charged: Sequence[float], values: Sequence[float]) -> Run:
    """A Run from each evaluation's charged seconds (NaN: not charged, e.g. not legal) and
    objective (NaN: invalid)."""
    charged = np.asarray(charged, dtype=float)
    times = np.cumsum(np.nan_to_num(charged))
    times[np.isnan(charged)] = math.nan
    best = np.fmin.accumulate(np.asarray(values, dtype=float))
    return Run(times, best)


def _padded(runs: Sequence[Run]) -> tuple[np.ndarray, np.ndarray]:
    lengths = [r.times.shape[0] for r in runs]
    rows = max(lengths)
    if rows > 2 * np.mean(lengths):  # the package cuts an outlier run to twice the mean
        rows = int(2 * np.mean(lengths))
    times = np.full((rows, len(runs)), np.nan)
    best = np.full((rows, len(runs)), np.nan)
    for j, run in enumerate(runs):
        k = min(rows, run.times.shape[0])
        times[:k, j] = run.times[:k]
        best[:k, j] = run.best[:k]
    return times, best


def strategy_curve(
    stats: SpaceStats, runs: Sequence[Run], bagging_seed: int | None = None
) -> np.ndarray:
    """The strategy's best-found objective over the time range, from its pooled repeats.

    `bagging_seed`: fit as the package does, the mean of a bootstrap bagging of isotonic fits
    (one per repeat, at least 3, each on 1/sqrt(their number) of the points), seeded; None:
    the plain isotonic fit."""
    time_range = stats.time_range
    times, best = _padded(runs)
    keep = ~np.isnan(best).all(axis=1)
    times, best = times[keep], best[keep]
    times = np.where(np.isnan(best), np.nan, times)
    ends = np.sort(np.nanmax(times, axis=0))
    later = ends[np.nanmedian(ends) < ends]
    stop = later[0] if later.size else time_range[-1]
    margin = 0.1 + 0.25 * (len(runs) / times.size)
    inside = (time_range[0] * (1 - margin) <= times) & (times <= time_range[-1] * (1 + margin))
    if not np.all(inside.sum(axis=0) > 1):
        raise ValueError("a repeat has fewer than two evaluations inside the time range")
    x, y = times[inside], best[inside]
    indices = np.searchsorted(stats.dist, y, side="left").astype(float)
    isotonic = IsotonicRegression(
        increasing=False, y_min=indices.min(), y_max=indices.max(), out_of_bounds="clip"
    )
    if bagging_seed is None:
        predicted = isotonic.fit(x, indices).predict(time_range)
    else:
        estimators = max(len(runs), 3)
        bagging = BaggingRegressor(
            isotonic,
            n_estimators=estimators,
            max_samples=1 / np.sqrt(estimators),
            bootstrap=True,
            random_state=bagging_seed,
        )
        predicted = bagging.fit(x.reshape(-1, 1), indices).predict(time_range.reshape(-1, 1))
    curve_indices = np.clip(np.round(predicted).astype(int), 0, len(stats.dist) - 1)
    curve = stats.dist[curve_indices]
    if stop < time_range[-1]:
        if stop <= time_range[0]:
            raise ValueError("the runs stop before the time range starts")
        cut = int(np.nonzero(time_range > stop)[0][0])
        curve[cut:] = curve[cut]
    return curve


def score(
    stats: SpaceStats,
    runs: Sequence[Run],
    baseline: np.ndarray | None = None,
    bagging_seed: int | None = None,
) -> float:
    """The package's score of these runs: mean standardised performance over the range."""
    random = random_curve(stats) if baseline is None else baseline
    curve = strategy_curve(stats, runs, bagging_seed)
    return float(np.mean((curve - random) / (stats.optimum - random)))


@dataclass(frozen=True)
class CellScore:
    """A cell: the pooled score, each repeat's own score, and a 95% bootstrap interval."""

    score: float
    per_repeat: tuple[float, ...]
    low: float
    high: float

    @property
    def std(self) -> float:
        return float(np.std(self.per_repeat, ddof=1)) if len(self.per_repeat) > 1 else math.nan

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


def cell_score(
    stats: SpaceStats, runs: Sequence[Run], *, resamples: int = 200, seed: int = 0
) -> CellScore:
    """Score `runs` pooled, each alone, and over `resamples` bootstrap draws of the repeats."""
    baseline = random_curve(stats)
    pooled = score(stats, runs, baseline)
    alone = tuple(score(stats, [r], baseline) for r in runs)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(resamples):
        pick = rng.integers(len(runs), size=len(runs))
        try:
            draws.append(score(stats, [runs[i] for i in pick], baseline))
        except ValueError:
            continue
    low, high = np.percentile(draws, [2.5, 97.5]) if draws else (math.nan, math.nan)
    return CellScore(pooled, alone, float(low), float(high))
