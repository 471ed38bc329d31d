"""What the search learns besides its own measurements: results measured before it started,
told once it starts (`KnownFirst`), and other GPUs' results as they are measured at the same
time (`LiveTransfer`, `tune --ray` with several kinds)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from annotune.core.records import Candidates, Result
from annotune.search import Strategy
from annotune.session.report import Stopwatch
from annotune.transfer.prior import Prior

LIVE_MIN_MEASURED = 20
"""Other GPUs' measurements before a search learns from them mid-tune."""

LIVE_GROWTH = 1.5
"""How much their measurements must have grown before the space is ranked again."""

LIVE_EVERY = 10
"""This tune's own measurements between two looks at the other GPUs' studies."""


class LiveTransfer:
    """Learning from GPUs of other kinds tuned at the same time (`tune --ray` with several
    kinds): after each told batch, their studies are read again (`gather`); once they hold
    `LIVE_MIN_MEASURED` measurements, and again each time they have grown by `LIVE_GROWTH`,
    the `transfer` strategy ranks the space anew with them (`Transfer.learn`). The device
    features chosen by CV-DFS at each refresh are those of the GPUs measured so far."""

    def __init__(self, strategy: Strategy, prior: Prior, gather: Callable[[], Prior]):
        self.strategy = strategy
        self.prior = prior
        self.gather = gather
        self.learned_from = sum(task.times.size for task in prior.tasks)
        self.looked_at = 0

    def learn(self, evaluations: int) -> bool:
        """Take the other GPUs' new measurements when there are enough, looking every
        `LIVE_EVERY` of this tune's `evaluations`; True when taken."""
        if evaluations - self.looked_at < LIVE_EVERY:
            return False
        self.looked_at = evaluations
        prior = self.gather()
        measured = sum(task.times.size for task in prior.tasks)
        if measured < max(LIVE_MIN_MEASURED, LIVE_GROWTH * self.learned_from):
            return False
        if not self.strategy.learn(prior.tasks, prior.target_features):  # type: ignore[attr-defined]
            return False
        self.prior, self.learned_from = prior, measured
        return True


class KnownFirst(Strategy):
    """A strategy told of results measured before the search (the default configuration).

    They are told once the strategy starts, and filtered out of what it asks for, so they
    cost no budget and are never measured twice.
    """

    def __init__(self, inner: Strategy, known: Sequence[Result], stopwatch: Stopwatch):
        self.inner = inner
        self.known = {result.index: result for result in known}
        self.name = inner.name
        self.stopwatch = stopwatch  # the strategy's time is the tune's "search" time

    def start(self, candidates: Candidates, rng: np.random.Generator) -> None:
        with self.stopwatch.part("search"):
            self.inner.start(candidates, rng)
            if self.known:
                self.inner.tell(list(self.known.values()))

    def ask(self, max_count: int) -> list[int]:
        with self.stopwatch.part("search"):
            while True:
                asked = self.inner.ask(max_count)
                fresh = [i for i in asked if i not in self.known]
                if fresh or not asked:
                    return fresh

    def tell(self, results: Sequence[Result]) -> None:
        with self.stopwatch.part("search"):
            self.inner.tell(results)

    def progress(self) -> dict[str, float]:
        return self.inner.progress()
