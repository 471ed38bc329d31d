"""The ask/tell strategy interface and the one driver loop that enforces the budget.

A strategy knows nothing of source files, compilers or replay data: it sees the legal
configurations as a float matrix (`Candidates`) and answers "which rows next?" (`ask`), then
hears what happened (`tell`). The budget lives only in `run_search`, so every strategy is cut
off the same way and a batch cut short by the budget is still told.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from annotune.core.records import Candidates, Result

Measure = Callable[[Sequence[int]], list[Result]]
"""A runner: measures the given rows, returns one Result per row in the same order."""


class Strategy(ABC):
    """Propose batches of configurations; learn from their results.

    Contract: `start` is called once before anything else; `ask` never returns an index it
    returned before and returns `[]` when it has nothing left to propose; `tell` receives the
    results of asked indices (possibly fewer than asked, when the budget cut a batch short).
    A strategy draws all its randomness from the generator given to `start`, so the same seed
    gives the same search.
    """

    name: str = "strategy"

    @abstractmethod
    def start(self, candidates: Candidates, rng: np.random.Generator) -> None:
        """Reset for a new search over `candidates`."""

    @abstractmethod
    def ask(self, max_count: int) -> list[int]:
        """Up to `max_count` row indices to measure next; `[]` means the search is done."""

    @abstractmethod
    def tell(self, results: Sequence[Result]) -> None:
        """Results for indices returned by `ask`."""

    def progress(self) -> dict[str, float]:
        """Strategy-specific progress figures (e.g. iteration number) for callbacks."""
        return {}


@dataclass(frozen=True)
class Budget:
    """When to stop: after `evaluations` measurements and/or `seconds` of wall time.

    None means unlimited; with both None the search runs until the strategy is done.
    """

    evaluations: int | None = None
    seconds: float | None = None

    def __post_init__(self) -> None:
        if self.evaluations is not None and self.evaluations < 0:
            raise ValueError("evaluations must be >= 0")
        if self.seconds is not None and self.seconds < 0:
            raise ValueError("seconds must be >= 0")


@dataclass
class SearchOutcome:
    """Everything measured in a search, in measurement order, and the best valid result."""

    results: list[Result] = field(default_factory=list)
    best: Result | None = None
    stopped_by: str = ""  # "budget", "time", "exhausted" or "callback"


BatchCallback = Callable[[Sequence[Result], SearchOutcome, Strategy], bool | None]
"""Called after each told batch; returning True stops the search (e.g. a target was hit)."""


def run_search(
    strategy: Strategy,
    candidates: Candidates,
    measure: Measure,
    *,
    budget: Budget,
    rng: np.random.Generator,
    batch_size: int | Callable[[], int] = 1_000_000,
    on_batch: BatchCallback | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> SearchOutcome:
    """Drive `strategy` against `measure` until the budget is spent or the strategy is done.

    The only place a budget is enforced. `batch_size` caps how many configurations are asked
    for at once (a runner's parallelism), or is asked before each batch for that cap; the
    strategy may return fewer. Invalid results are never `best`.
    """
    outcome = SearchOutcome()
    strategy.start(candidates, rng)
    started = clock()
    while True:
        allowed = batch_size() if callable(batch_size) else batch_size
        if budget.evaluations is not None:
            allowed = min(allowed, budget.evaluations - len(outcome.results))
        if allowed <= 0:
            outcome.stopped_by = "budget"
            break
        if budget.seconds is not None and clock() - started >= budget.seconds:
            outcome.stopped_by = "time"
            break
        asked = strategy.ask(allowed)[:allowed]
        if not asked:
            outcome.stopped_by = "exhausted"
            break
        results = measure(asked)
        strategy.tell(results)
        outcome.results.extend(results)
        for result in results:
            if (
                result.time is not None
                and math.isfinite(result.time)
                and (
                    outcome.best is None or result.time < outcome.best.time  # type: ignore[operator]
                )
            ):
                outcome.best = result
        if on_batch is not None and on_batch(results, outcome, strategy):
            outcome.stopped_by = "callback"
            break
    return outcome
