"""The concurrent search loop: rows in flight, the budget, and batches told whole."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import numpy as np
import pytest

from annotune.core.records import Candidates, Result
from annotune.search import Budget, Strategy, create, run_search
from annotune.session import concurrent
from annotune.session.concurrent import (
    MARGIN,
    MAX_BATCH_PER_DEVICE,
    MIN_BATCH,
    batch_for,
    measure_whole,
    room,
    run_concurrent_search,
)

CANDIDATES = Candidates(np.arange(100, dtype=np.float64).reshape(-1, 1), ("X",))


def instant() -> float:
    """A clock for a strategy that chooses in no time: one device's worth waits."""
    return 0.0


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
        self.count = devices
        self.in_flight: list[int] = []
        self.most = 0
        self.batches: list[int] = []

    def room(self, batch: int) -> int:
        self.batches.append(batch)
        return room(self.count, len(self.in_flight), batch)

    def devices(self) -> int:
        return self.count

    def start(self, rows: Sequence[int]) -> None:
        self.in_flight += rows
        self.most = max(self.most, len(self.in_flight))

    def collect(self) -> list[Result]:
        done, self.in_flight = self.in_flight[: self.count], self.in_flight[self.count :]
        return [Result(row, float(100 - row)) for row in done]


def test_room_keeps_every_device_busy_with_one_whole_batch_waiting():
    assert room(8, 0) == 16 and room(8, 8) == 8 and room(8, 9) == 0
    assert room(1, 0) == 1 + MIN_BATCH and room(1, 1) == MIN_BATCH and room(1, 2) == 0
    assert room(2, 7) == 0 and room(2, 2) == MIN_BATCH
    assert room(8, 0, batch=24) == 32 and room(8, 24, batch=24) == 8 and room(8, 25, 24) == 0


def test_the_waiting_batch_covers_what_the_devices_measure_while_the_strategy_chooses():
    assert batch_for(8, rate=0.0, choose_seconds=0.0) == 8  # nothing known yet: one each
    assert batch_for(2, rate=80.0, choose_seconds=0.0) == MIN_BATCH
    assert batch_for(8, rate=80.0, choose_seconds=0.06) == round(MARGIN * 2 * 80 * 0.06)
    assert batch_for(8, rate=1e6, choose_seconds=1.0) == MAX_BATCH_PER_DEVICE * 8


class Timed:
    """`count` devices in virtual time, each measuring its rows one after another, 0.1 s
    each, while the strategy chooses too: `collect` moves the clock to the next finish."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.now = 0.0
        self.ends = [0.0] * count
        self.running: list[tuple[float, int]] = []  # finish, row
        self.batches: list[int] = []
        self.idle = 0.0  # device seconds with nothing to measure

    def clock(self) -> float:
        return self.now

    def room(self, batch: int) -> int:
        self.batches.append(batch)
        return room(self.count, len(self.running), batch)

    def devices(self) -> int:
        return self.count

    def start(self, rows: Sequence[int]) -> None:
        for row in rows:
            device = min(range(self.count), key=lambda d: self.ends[d])
            self.idle += max(0.0, self.now - self.ends[device])
            self.ends[device] = max(self.now, self.ends[device]) + 0.1
            self.running.append((self.ends[device], row))

    def collect(self) -> list[Result]:
        self.now = max(self.now, min(end for end, _ in self.running))
        done = [row for end, row in self.running if end <= self.now]
        self.running = [(end, row) for end, row in self.running if end > self.now]
        return [Result(row, float(1000 - row)) for row in done]


def _slow_search(fit_seconds: float) -> tuple[Timed, Recorder]:
    """600 rows on 8 timed devices for a strategy whose first ask after a tell takes
    `fit_seconds` and gives at most 3 rows (a batch is topped up from several asks)."""
    devices = Timed(8)

    class Slow(Recorder):
        fitted = False

        def ask(self, max_count: int) -> list[int]:
            if not self.fitted:
                devices.now += fit_seconds
                self.fitted = True
            return super().ask(min(max_count, 3))

        def tell(self, results: Sequence[Result]) -> None:
            self.fitted = False
            super().tell(results)

    strategy = Slow(size=1000)
    outcome = run_concurrent_search(
        strategy,
        Candidates(np.arange(1000, dtype=np.float64).reshape(-1, 1), ("X",)),
        devices,
        budget=Budget(evaluations=600),
        rng=np.random.default_rng(),
        clock=devices.clock,
    )
    assert len(outcome.results) == 600
    return devices, strategy


def test_a_slow_strategy_gets_more_rows_waiting_topped_up_from_small_asks(monkeypatch):
    """A fit as long as 1.2 measurements on 8 devices: what waits grows past one row a
    device, each choice is filled from several asks, and the devices are busier than with
    one device's worth waiting."""
    devices, strategy = _slow_search(0.12)
    assert max(devices.batches) > 8
    asks = [kind for kind, _ in strategy.events]
    assert "ask,ask,ask" in ",".join(asks)  # one choice from several asks, no tell between
    grown = 600 * 0.1 / (8 * devices.now)
    monkeypatch.setattr(concurrent, "MAX_BATCH_PER_DEVICE", 1)
    fixed, _ = _slow_search(0.12)
    assert max(fixed.batches) == 8
    assert grown > 0.8 and grown > 600 * 0.1 / (8 * fixed.now) + 0.1


def test_iterml_asked_again_with_nothing_new_keeps_its_model(monkeypatch):
    from annotune.search import models

    fits = []
    fit = models.Surrogate.fit

    def counting(self, *args, **kwargs):
        fits.append(1)
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(models.Surrogate, "fit", counting)
    strategy = create("iterml")
    strategy.start(CANDIDATES, np.random.default_rng(0))
    rows = strategy.ask(20)
    strategy.tell([Result(r, float(100 - r)) for r in rows])
    first = strategy.ask(5)
    second = strategy.ask(5)
    assert len(fits) == 1 and not set(first) & set(second)
    strategy.tell([Result(r, float(100 - r)) for r in first + second])
    strategy.ask(5)
    assert len(fits) == 2


def test_iterml_tops_up_a_batch_from_the_model_it_chose_with(monkeypatch):
    """Asked again with nothing new told, IterML's batch goes on with the model of its turn,
    forest or climbs, fitted and predicted once: a batch topped up from several asks costs
    one fit, not a forest's and a boosted model's."""
    from annotune.search import models, speedup

    calls: list[str] = []
    for owner, name, label in (
        (models.Surrogate, "fit", "forest"),
        (models.Surrogate, "predict", "predict"),
        (speedup.GradientBoostingRegressor, "fit", "climbs"),
        (speedup.HistGradientBoostingRegressor, "fit", "climbs"),
    ):
        original = getattr(owner, name)

        def counting(self, *args, _original=original, _label=label, **kwargs):
            calls.append(_label)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(owner, name, counting)
    strategy = create("iterml", climb_after=20)
    strategy.start(CANDIDATES, np.random.default_rng(0))
    rows = strategy.ask(20)
    strategy.tell([Result(r, float(100 - r)) for r in rows])
    kinds = []
    for _ in range(6):  # forest, climbs, climbs, forest, climbs, climbs
        calls.clear()
        batch = strategy.ask(4) + strategy.ask(4) + strategy.ask(4)
        assert len(batch) == len(set(batch)) == 12
        fits = [c for c in calls if c != "predict"]
        assert len(fits) == 1 and calls.count("predict") <= 1
        kinds.append(fits[0])
        strategy.tell([Result(r, float(100 - r)) for r in batch])
    assert kinds == ["forest", "climbs", "climbs"] * 2


def test_the_budget_counts_rows_in_flight_and_every_asked_row_is_told():
    strategy, devices = Recorder(), Devices(4)
    outcome = run_concurrent_search(
        strategy,
        CANDIDATES,
        devices,
        budget=Budget(evaluations=37),
        rng=np.random.default_rng(),
        clock=instant,
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
        strategy,
        CANDIDATES,
        devices,
        budget=Budget(evaluations=30),
        rng=np.random.default_rng(),
        clock=instant,
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


class Shuffled(Devices):
    """Devices that finish what is in flight in an order of their own (seeded)."""

    def __init__(self, devices: int, seed: int) -> None:
        super().__init__(devices)
        self.rng = np.random.default_rng(seed)

    def collect(self) -> list[Result]:
        self.in_flight = [int(r) for r in self.rng.permutation(self.in_flight)]
        return super().collect()


def test_measure_whole_starts_a_batch_at_once_and_returns_it_in_the_order_asked():
    devices = Shuffled(4, seed=0)
    rows = [7, 3, 9, 1, 0, 5, 2, 8, 6, 4]
    results = measure_whole(devices, rows)
    assert [r.index for r in results] == rows
    assert [r.time for r in results] == [float(100 - row) for row in rows]
    assert devices.most == len(rows) and not devices.in_flight


def test_sync_devices_make_the_sequential_searchs_measurements():
    """`tune --sync`: IterML measured batch by batch on 4 devices that finish in any order
    chooses exactly as on one device (same seed, same rows, same order)."""
    grid = np.array([(x, y) for x in range(20) for y in range(20)], dtype=np.float64)
    candidates = Candidates(grid, ("X", "Y"))
    times = 1.0 + (grid[:, 0] - 13.0) ** 2 + 0.5 * (grid[:, 1] - 4.0) ** 2

    def one_device(rows: Sequence[int]) -> list[Result]:
        return [Result(row, float(times[row])) for row in rows]

    class Timed(Shuffled):
        def collect(self) -> list[Result]:
            return [Result(r.index, float(times[r.index])) for r in super().collect()]

    def search(measure) -> list[tuple[int, float | None]]:
        outcome = run_search(
            create("iterml"),
            candidates,
            measure,
            budget=Budget(evaluations=70),
            rng=np.random.default_rng(3),
        )
        return [(r.index, r.time) for r in outcome.results]

    sequential = search(one_device)
    assert len(sequential) == 70
    assert search(partial(measure_whole, Timed(4, seed=1))) == sequential
