"""Judging strategies on replay data by the IterML paper's standards.

Run a strategy many times (one seed each) and look at the best normalized performance (best
time in the dataset / best time found; invalid = 0) each run has found after N measurements.

* Standard 1: the smallest N at which the median over the runs reaches `THRESHOLD` (0.95).
* Standard 2: the smallest N at which the 5th percentile reaches it.

Quantiles are taken in the inverted-CDF sense, the same for runs and for the exact baseline:
the q-quantile reaches 0.95 at N when at most a fraction q of runs are still below 0.95 at N.
With 100 runs that is: Standard 1 when 50 runs have reached 0.95, Standard 2 when 95 have.
Only the measurement at which each run first reaches 0.95 matters, so a run stops there
(its later trace is not needed), which keeps 100 repeats cheap.

Random search without replacement needs no runs: after N draws from n configurations of which
k reach 0.95, the chance that none was drawn is C(n-k, N) / C(n, N), a product computed
exactly in log space. The same order statistics give the exact quantiles of its best
performance at any N, drawn as reference lines in the plot.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import gammaln

from annotune.core.diagnostics import AnnotuneError
from annotune.core.files import save_figure
from annotune.core.records import TaskData
from annotune.results.replay import ReplayDataset, load_replay
from annotune.search import Budget, create, run_search

THRESHOLD = 0.95
STD1_QUANTILE = 0.5
STD2_QUANTILE = 0.05


@dataclass(frozen=True)
class Standards:
    """Measurements needed for Standard 1 and 2 (None: not reached within the cap)."""

    std1: int | None
    std2: int | None


# -- exact random search ----------------------------------------------------------------------


def random_miss_probability(normalized: np.ndarray, threshold: float = THRESHOLD) -> np.ndarray:
    """P(no configuration >= threshold among N random draws without replacement), N = 0..n.

    Entry N is C(n-k, N) / C(n, N) = prod_{i<N} (n-k-i) / (n-i), with k the number of
    configurations at or above the threshold.
    """
    n = normalized.size
    k = int(np.count_nonzero(normalized >= threshold))
    i = np.arange(n)
    with np.errstate(divide="ignore"):
        log_terms = np.log(np.maximum(n - k - i, 0)) - np.log(n - i)
    return np.concatenate([[1.0], np.exp(np.cumsum(log_terms))])


def random_standards(normalized: np.ndarray, threshold: float = THRESHOLD) -> Standards:
    """Exact Standards 1 and 2 of random search without replacement."""
    miss = random_miss_probability(normalized, threshold)
    return Standards(
        std1=_first_at_most(miss, STD1_QUANTILE), std2=_first_at_most(miss, STD2_QUANTILE)
    )


def random_best_quantile(normalized: np.ndarray, budget: int, q: float) -> float:
    """Exact q-quantile of random search's best normalized performance after `budget` draws.

    With the values sorted best first, the best of N draws is below v_j exactly when none of
    the j+1 best was drawn, probability C(n-j-1, N) / C(n, N); the q-quantile is the first v_j
    where that probability is at most q (the convention of the standards).
    """
    values = np.sort(normalized)[::-1]
    n = values.size
    draws = min(budget, n)
    rest = n - np.arange(1, n + 1)  # configurations outside the top j+1
    with np.errstate(invalid="ignore"):
        log_miss = (gammaln(rest + 1) - gammaln(np.maximum(rest - draws, 0) + 1)) - (
            gammaln(n + 1) - gammaln(n - draws + 1)
        )
    miss = np.where(rest >= draws, np.exp(log_miss), 0.0)
    ok = np.flatnonzero(miss <= q + 1e-12)
    return float(values[ok[0]]) if ok.size else float(values[-1])


def _first_at_most(miss: np.ndarray, q: float) -> int | None:
    hit = np.flatnonzero(miss <= q + 1e-12)
    return int(hit[0]) if hit.size else None


# -- standards of repeated runs -----------------------------------------------------------------


def standards_from_hits(first_hits: Sequence[int | None]) -> Standards:
    """Standards of a set of runs, given the measurement count at which each first reached 0.95.

    None marks a run that never reached it within its cap.
    """
    runs = len(first_hits)
    reached = np.sort([h for h in first_hits if h is not None])

    def needed(q: float) -> int | None:
        count = math.ceil((1.0 - q) * runs - 1e-9)
        return int(reached[count - 1]) if 0 < count <= reached.size else None

    return Standards(std1=needed(STD1_QUANTILE), std2=needed(STD2_QUANTILE))


@dataclass(frozen=True)
class RunTrace:
    """Best normalized performance after each measurement of one run (stopped at 0.95)."""

    seed: int
    best: np.ndarray

    @property
    def first_hit(self) -> int | None:
        hits = np.flatnonzero(self.best >= THRESHOLD)
        return int(hits[0]) + 1 if hits.size else None

    def at(self, budget: int) -> float:
        """Best after `budget` measurements; past the stop, the last value (a lower bound)."""
        if budget <= 0 or self.best.size == 0:
            return 0.0
        return float(self.best[min(budget, self.best.size) - 1])


def run_once(
    dataset: ReplayDataset,
    strategy: str,
    options: dict[str, Any],
    seed: int,
    cap: int,
    stop_at: float = THRESHOLD,
) -> RunTrace:
    """One search on `dataset` with at most `cap` measurements, stopping at `stop_at`."""
    normalized = dataset.normalized()
    rng = np.random.default_rng(seed)
    best = [0.0]

    def stop(results, outcome, strategy_):
        best[0] = max(best[0], max(normalized[r.index] for r in results))
        return best[0] >= stop_at

    outcome = run_search(
        create(strategy, **options),
        dataset.candidates,
        dataset.measure,
        budget=Budget(evaluations=cap),
        rng=rng,
        on_batch=stop,
    )
    found = normalized[[r.index for r in outcome.results]]
    return RunTrace(seed, np.maximum.accumulate(found) if found.size else found)


# -- many runs on a process pool ----------------------------------------------------------------

_WORKER_DATASET: ReplayDataset | None = None


def _init_worker(dataset: ReplayDataset) -> None:
    global _WORKER_DATASET
    _WORKER_DATASET = dataset


def _run_in_worker(strategy: str, options: dict[str, Any], seed: int, cap: int) -> RunTrace:
    assert _WORKER_DATASET is not None
    return run_once(_WORKER_DATASET, strategy, options, seed, cap)


@dataclass(frozen=True)
class BenchRow:
    """One dataset x strategy line of the bench table (the JSON record plus the traces)."""

    dataset: str
    strategy: str
    size: int
    standards: Standards
    random: Standards
    cap: int
    traces: tuple[RunTrace, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "strategy": self.strategy,
            "size": self.size,
            "std1_evals": self.standards.std1,
            "std2_evals": self.standards.std2,
            "random_std1_evals": self.random.std1,
            "random_std2_evals": self.random.std2,
        }


def load_recordings(paths: Sequence[str | Path]) -> list[ReplayDataset]:
    """The recordings to bench on (`load_replay`); AnnotuneError naming the first file in which
    no configuration has a time (every one invalid, or NaN): with no best there is no
    normalized performance, and every strategy would "need" its whole budget."""
    loaded = []
    for path in paths:
        dataset = load_replay(path)
        if not np.isfinite(dataset.times).any():
            raise AnnotuneError(
                f"{path}: none of its {len(dataset)} configurations has a valid time "
                "(each is NaN or invalid): there is no best to judge strategies by"
            )
        loaded.append(dataset)
    return loaded


def run_seeds(seed: int, repeats: int) -> list[int]:
    """Independent per-repeat seeds derived from one user seed (stable across versions)."""
    children = np.random.SeedSequence(seed).spawn(repeats)
    return [int(c.generate_state(1)[0]) for c in children]


def bench(
    dataset: ReplayDataset,
    strategies: Sequence[str],
    *,
    repeats: int = 100,
    seed: int = 0,
    cap: int | None = None,
    options: dict[str, dict[str, Any]] | None = None,
    workers: int | None = None,
    on_run: Callable[[str, RunTrace], None] | None = None,
) -> list[BenchRow]:
    """Run each strategy `repeats` times on `dataset` and compute its standards.

    `cap` bounds every run's measurements; by default it is random search's exact Standard 2
    (beyond it a strategy has lost to random anyway) or the space size if random never gets
    there. `workers` processes share the runs (default: all cores); `on_run` hears each
    finished run (progress reporting).
    """
    normalized = dataset.normalized()
    random = random_standards(normalized)
    if cap is None:
        cap = random.std2 if random.std2 is not None else len(dataset)
    seeds = run_seeds(seed, repeats)
    workers = workers or os.cpu_count() or 1
    rows = []
    with ProcessPoolExecutor(workers, initializer=_init_worker, initargs=(dataset,)) as pool:
        for name in strategies:
            opts = (options or {}).get(name, {})
            futures = [pool.submit(_run_in_worker, name, opts, s, cap) for s in seeds]
            traces = []
            for future in futures:
                trace = future.result()
                traces.append(trace)
                if on_run is not None:
                    on_run(name, trace)
            rows.append(
                BenchRow(
                    dataset=dataset.name,
                    strategy=name,
                    size=len(dataset),
                    standards=standards_from_hits([t.first_hit for t in traces]),
                    random=random,
                    cap=cap,
                    traces=tuple(traces),
                )
            )
    return rows


# -- learning across problem sizes --------------------------------------------------------------


def size_prior(dataset: ReplayDataset, others: Sequence[ReplayDataset]) -> dict[str, Any]:
    """`predictive` options that let it learn `dataset` from other problem sizes of its kernel.

    The other datasets of the same kernel and parameters but another problem size become the
    prior tasks, each with its problem size as task features, so the model predicts the
    target size before measuring it (Bergstra et al.'s task features). Empty when there are
    none.
    """
    prior = [
        TaskData(other.name, other.candidates.values, other.times, other.problem_size)
        for other in others
        if other is not dataset
        and other.names == dataset.names
        and other.kernel == dataset.kernel
        and other.problem_size != dataset.problem_size
        and len(other.problem_size) == len(dataset.problem_size) > 0
    ]
    return {"prior": prior, "task_features": dataset.problem_size} if prior else {}


# -- the Figure-14 style plot -------------------------------------------------------------------


def plot_boxes(
    rows: Sequence[BenchRow], normalized: dict[str, np.ndarray], path: str | Path
) -> None:
    """Box plots of best normalized performance against budget, one panel per dataset.

    Each strategy gets a box per budget (like the paper's Figure 14); random search's exact
    median and 5th percentile are drawn as lines. Runs stop once they reach 0.95, so values
    past that point are lower bounds. Needs matplotlib (the optional `plot` extra).
    AnnotuneError naming `path` when it cannot be written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(r.dataset for r in rows))
    fig, axes = plt.subplots(len(datasets), 1, figsize=(10, 3.2 * len(datasets)), squeeze=False)
    for ax, name in zip(axes[:, 0], datasets, strict=True):
        mine = [r for r in rows if r.dataset == name]
        cap = max(r.cap for r in mine)
        budgets = sorted({max(1, round(cap * f)) for f in (0.02, 0.05, 0.1, 0.2, 0.4, 0.7, 1.0)})
        width = 0.8 / len(mine)
        for s, row in enumerate(mine):
            data = [[t.at(b) for t in row.traces] for b in budgets]
            positions = [i + (s - (len(mine) - 1) / 2) * width for i in range(len(budgets))]
            box = ax.boxplot(
                data, positions=positions, widths=width * 0.9, patch_artist=True, showfliers=False
            )
            color = f"C{s}"
            for patch in box["boxes"]:
                patch.set_facecolor(color)
                patch.set_alpha(0.6)
            ax.plot([], [], color=color, lw=6, label=row.strategy)
        for q, style in ((0.5, "-"), (0.05, ":")):
            exact = [random_best_quantile(normalized[name], b, q) for b in budgets]
            ax.plot(range(len(budgets)), exact, "k" + style, label=f"random, exact q={q}")
        ax.axhline(THRESHOLD, color="grey", lw=0.5)
        ax.set_xticks(range(len(budgets)), [str(b) for b in budgets])
        ax.set_ylim(0, 1.02)
        ax.set_title(name)
        ax.set_xlabel("measurements")
        ax.set_ylabel("best normalized performance")
        ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    try:
        save_figure(fig, path, dpi=110)
    finally:
        plt.close(fig)
