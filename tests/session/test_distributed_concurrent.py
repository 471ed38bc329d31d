"""The concurrent search loop: rows in flight, the budget, and batches told whole."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from annotune.core.records import Candidates, Result
from annotune.search import Budget, Strategy, create
from annotune.session.concurrent import MIN_BATCH, room, run_concurrent_search

CANDIDATES = Candidates(np.arange(100, dtype=np.float64).reshape(-1, 1), ("X",))


class Recorder(Strategy):
    """Asks rows in order; records each ask and tell, and how many rows were in flight."""

    def __init__(self, size: int = 100) -> None:
        self.size = size
        self.events: list[tuple[str, object]] = []

    def start(self, candidates: Candidates, rng: np.random.Generator) -> None:
        self.next = 0

    def ask(self, max_count: int) -> list[int]:
        rows = list(range(self.next, min(self.next + max_count, self.size)))
        self.next += len(rows)
        self.events.append(("ask", len(rows)))
        return rows

    def tell(self, results: Sequence[Result]) -> None:
        self.events.append(("tell", [r.index for r in results]))


class Devices:
    """`devices` devices, each finishing one row per collect, in the order started."""

    def __init__(self, devices: int) -> None:
        self.devices = devices
        self.in_flight: list[int] = []
        self.most = 0

    def room(self) -> int:
        return room(self.devices, len(self.in_flight))

    def start(self, rows: Sequence[int]) -> None:
        self.in_flight += rows
        self.most = max(self.most, len(self.in_flight))

    def collect(self) -> list[Result]:
        done, self.in_flight = self.in_flight[: self.devices], self.in_flight[self.devices :]
        return [Result(row, float(100 - row)) for row in done]


def test_room_keeps_every_device_busy_with_one_whole_batch_waiting():
    assert room(8, 0) == 16 and room(8, 8) == 8 and room(8, 9) == 0
    assert room(1, 0) == 1 + MIN_BATCH and room(1, 1) == MIN_BATCH and room(1, 2) == 0
    assert room(2, 7) == 0 and room(2, 2) == MIN_BATCH


def test_the_budget_counts_rows_in_flight_and_every_asked_row_is_told():
    strategy, devices = Recorder(), Devices(4)
    outcome = run_concurrent_search(
        strategy, CANDIDATES, devices, budget=Budget(evaluations=37), rng=np.random.default_rng()
    )
    asked = sum(n for kind, n in strategy.events if kind == "ask")
    told = [row for kind, rows in strategy.events if kind == "tell" for row in rows]  # type: ignore[union-attr]
    assert asked == 37 and sorted(told) == list(range(37))
    assert len(outcome.results) == 37 and outcome.stopped_by == "budget"
    assert outcome.best is not None and outcome.best.index == 36
    assert devices.most <= 4 + MIN_BATCH


def test_what_landed_is_told_before_the_next_ask_in_one_batch():
    devices = Devices(2)
    landed: list[int] = []
    told: list[int] = []
    unknown_at_ask: list[int] = []

    class Checking(Recorder):
        def ask(self, max_count: int) -> list[int]:
            unknown_at_ask.append(len(set(landed) - set(told)))
            return super().ask(max_count)

        def tell(self, results: Sequence[Result]) -> None:
            told.extend(r.index for r in results)
            super().tell(results)

    collect = devices.collect

    def collecting() -> list[Result]:
        results = collect()
        landed.extend(r.index for r in results)
        return results

    devices.collect = collecting  # type: ignore[method-assign]
    strategy = Checking()
    run_concurrent_search(
        strategy, CANDIDATES, devices, budget=Budget(evaluations=30), rng=np.random.default_rng()
    )
    assert len(unknown_at_ask) > 3 and not any(unknown_at_ask)
    tells = [rows for kind, rows in strategy.events if kind == "tell"]
    assert all(len(rows) >= MIN_BATCH for rows in tells[:-1])  # type: ignore[arg-type]


def test_a_callback_stop_still_measures_and_tells_what_is_in_flight():
    strategy, devices = Recorder(), Devices(3)
    seen = []

    def stop(results, outcome, strategy_):
        seen.extend(r.index for r in results)
        return len(seen) >= 10

    outcome = run_concurrent_search(
        strategy, CANDIDATES, devices, budget=Budget(), rng=np.random.default_rng(), on_batch=stop
    )
    asked = sum(n for kind, n in strategy.events if kind == "ask")
    assert outcome.stopped_by == "callback" and len(outcome.results) == asked == len(seen)
    assert asked < 100 and not devices.in_flight


def test_an_exhausted_strategy_ends_the_search_once_the_rest_lands():
    outcome = run_concurrent_search(
        Recorder(size=12), CANDIDATES, Devices(4), budget=Budget(), rng=np.random.default_rng()
    )
    assert outcome.stopped_by == "exhausted" and len(outcome.results) == 12


@pytest.mark.parametrize("strategy", ["iterml", "random", "starchart"])
def test_real_strategies_never_get_a_row_twice(strategy):
    outcome = run_concurrent_search(
        create(strategy),
        CANDIDATES,
        Devices(8),
        budget=Budget(evaluations=60),
        rng=np.random.default_rng(1),
    )
    rows = [r.index for r in outcome.results]
    assert len(rows) == len(set(rows)) == 60
