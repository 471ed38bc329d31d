"""The search loop for several devices at once: ask while they measure, tell as results land.

`annotune.search.run_search` measures one batch at a time: with N devices the slowest
configuration of a batch holds all of them, and the strategy's own batch (IterML asks for 5,
then 10) caps how many measure at once. Here rows stay in flight all the time: every device
measures one while a batch waits behind it (`room`); results are recorded as they land (by
the caller's `Measurements`), and told to the strategy, all those that landed, just before it
is asked for the next batch, so that it knows everything measured when it chooses. IterML and
the other strategies allow this: `ask` never returns a row asked before, and `tell` takes any
subset of what was asked. Telling batch by batch rather than row by row keeps IterML's
per-batch adaptation (its pool narrows after a batch that improved, widens after one that
did not) what it was judged with.

How much work waits is measured, not fixed: while the strategy chooses (IterML's choice takes
about 0.1 s on two cores), the devices work through what waits, so what waits must hold at
least what they measure in that time. The loop times each choice (tell and asks) and the rate
at which results landed since the previous choice began, and keeps `batch_for` rows waiting:
one a device at least, else what the devices measure in two choices of the strategy, and a
quarter more. It chooses again as soon as one device's worth of rows (at least `MIN_BATCH`)
has landed, so the strategy works while the devices do. When the devices starve, the rate it
sees is what the waiting rows allowed, and they grow each choice until the devices no longer
starve, up to `MAX_BATCH_PER_DEVICE` a device (more waiting is chosen on staler results, and
cost the search measurements: docs/experiments/scaleout.md). With a strategy that chooses in
no time, this is a batch of `max(devices, MIN_BATCH)` asked whole. A strategy asked again with
nothing new told keeps its fitted model (IterML, predictive), so topping up a batch from
several asks costs no second fit.

The budget is enforced as `run_search` enforces it, in this one loop: the rows in flight count
against it before anything more is asked, and rows still in flight when the budget, the clock
or the callback stops the search are measured and told, never dropped. Which device measures
what, and lost devices, are the `DevicePool`'s business, not the strategy's.

`measure_whole` is the other way to use several devices: the strategy's own batches, each
measured on all the devices at once and waited for whole (`tune --sync`). It makes the
measurements the search makes on one device, and keeps the devices less busy.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import BuildResult, Candidates, Measurement, Result
from annotune.search import Budget, SearchOutcome, Strategy
from annotune.search.base import BatchCallback

MIN_BATCH = 5
"""The fewest rows asked of the strategy at once while others are in flight. IterML mixes
each batch by proportion (half one-parameter moves, 30% Thompson picks, the rest random),
which a batch of one or two cannot hold (a batch of one is a random pick), and every strategy
was judged on the recorded data with batches of 5 and more."""


MARGIN = 1.25
"""What waits over what the devices measure in two choices of the strategy (`batch_for`)."""

MAX_BATCH_PER_DEVICE = 2
"""The largest waiting batch, per device: more would be chosen on ever staler results."""


def batch_for(devices: int, rate: float, choose_seconds: float) -> int:
    """How many rows to keep waiting for `devices` devices that measure `rate` rows a second
    while each choice of the strategy takes `choose_seconds` (module docstring): two
    choices' worth and a margin, since the rows the devices finished during one choice are
    collected only after the next rows start, and still count as in flight then."""
    least = max(devices, MIN_BATCH)
    needed = math.ceil(MARGIN * 2 * rate * choose_seconds) if rate > 0 else 0
    return max(least, min(needed, MAX_BATCH_PER_DEVICE * least))


def room(devices: int, in_flight: int, batch: int | None = None) -> int:
    """How many rows to ask for with `devices` devices and `in_flight` rows on them: enough
    that each device is busy and `batch` rows (at least `max(devices, MIN_BATCH)`) wait
    behind them; 0 until that many are missing (a strategy's batch is never a row or two),
    unless nothing is in flight."""
    least = max(devices, MIN_BATCH)
    free = devices + max(least, batch or 0) - in_flight
    return free if free >= least or in_flight == 0 else 0


class Measurements(Protocol):
    """Rows measured concurrently: started in any number, collected as they finish."""

    def room(self, batch: int) -> int:
        """How many more rows to start now with `batch` rows waiting behind the busy devices
        (`room`; 0 while the devices have enough). Never 0 when nothing is in flight: a pool
        that can measure nothing raises instead."""
        ...

    def devices(self) -> int:
        """How many devices measure."""
        ...

    def start(self, rows: Sequence[int]) -> None:
        """Begin measuring `rows` (some may be done at once: served from what is known)."""
        ...

    def collect(self) -> list[Result]:
        """Wait until at least one started row is done; its result and any others done."""
        ...


def run_concurrent_search(
    strategy: Strategy,
    candidates: Candidates,
    measurements: Measurements,
    *,
    budget: Budget,
    rng: np.random.Generator,
    on_batch: BatchCallback | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> SearchOutcome:
    """Drive `strategy` with rows in flight on `measurements` (module docstring) until the
    budget is spent or the strategy is done; every row asked is told, and `on_batch` hears
    each told batch."""
    outcome = SearchOutcome()
    strategy.start(candidates, rng)
    started = clock()
    in_flight = 0
    landed: list[Result] = []  # collected, not yet told
    stop = ""  # why nothing more is asked
    rate = 0.0  # rows landed a second, smoothed over the choices
    choose_seconds = 0.0  # the last choice's tell and asks
    last_choice = started

    def tell() -> None:
        nonlocal landed, stop
        results, landed = landed, []
        strategy.tell(results)
        outcome.results.extend(results)
        for result in results:
            if (
                result.time is not None
                and math.isfinite(result.time)
                and (outcome.best is None or result.time < outcome.best.time)  # type: ignore[operator]
            ):
                outcome.best = result
        if on_batch is not None and on_batch(results, outcome, strategy) and not stop:
            stop = "callback"

    while True:
        if not stop and (budget.seconds is None or clock() - started < budget.seconds):
            batch = batch_for(measurements.devices(), rate, choose_seconds)
            allowed = measurements.room(batch)
            if budget.evaluations is not None:
                left = budget.evaluations - len(outcome.results) - len(landed) - in_flight
                allowed = min(allowed, left)
                if left <= 0:
                    stop = "budget"
            if allowed > 0:
                began = clock()
                if began > last_choice and landed:
                    seen = len(landed) / (began - last_choice)
                    rate = seen if rate == 0 else 0.5 * (rate + seen)
                last_choice = began
                if landed:  # the strategy hears everything measured before it chooses
                    tell()
                asked: list[int] = []
                while not stop and len(asked) < allowed:  # topped up: IterML's batch is 10
                    more = strategy.ask(allowed - len(asked))[: allowed - len(asked)]
                    if not more:
                        if not asked:
                            stop = "exhausted"
                        break
                    asked += more
                choose_seconds = clock() - began
                if asked:
                    in_flight += len(asked)
                    measurements.start(asked)
        elif not stop:
            stop = "time"
        if in_flight == 0:
            break
        results = measurements.collect()
        in_flight -= len(results)
        landed.extend(results)
    if landed:
        tell()
    outcome.stopped_by = stop or "exhausted"
    return outcome


def measure_whole(measurements: Measurements, rows: Sequence[int]) -> list[Result]:
    """Measure `rows` on all the devices at once and wait for every one: `run_search`'s
    `measure` for a tune that keeps the sequential search's own batches (`tune --sync`). The
    strategy then chooses as on one device, on every result, and makes the same
    measurements; the devices wait for a batch's slowest row and for each choice. Results
    come back in the order of `rows`, as one device would return them."""
    measurements.start(rows)
    wanted = set(rows)
    landed: dict[int, Result] = {}
    while not landed.keys() >= wanted:
        for result in measurements.collect():
            landed[result.index] = result
    return [landed[row] for row in rows]


@dataclass(frozen=True)
class Work:
    """One build for a device to measure; `key` is the caller's to match the result with,
    `pinned` names the device that must measure it (None: any)."""

    key: int
    build: BuildResult
    stop_above: float | None = None
    pinned: int | None = None


@dataclass(frozen=True)
class DeviceRate:
    """What one device has done so far, for the progress display and the report."""

    name: str  # e.g. "NVIDIA A100-PCIE-40GB #2"
    actor: str  # the device's actor, as its pool names it
    measured: int
    per_minute: float  # measurements a minute since the device started
    lost: str = ""  # why the device was lost ("" while it works)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "actor": self.actor,
            "measured": self.measured,
            "per_minute": round(self.per_minute, 1),
            "lost": self.lost,
        }


class DevicesLost(AnnotuneError):
    """Every device of a pool is gone: nothing more can be measured in this tune."""


class DevicePool(Protocol):
    """Devices of one kind that measure builds concurrently (`annotune.session.distributed`'s
    Ray actors; a fake one in the tests). A device lost while it holds work is replaced by the
    others: that work is measured by another device, never dropped; when none is left,
    `DevicesLost`."""

    def devices(self) -> int:
        """How many devices are alive (DevicesLost when none is)."""
        ...

    def submit(self, work: Work) -> None:
        """Measure `work` on a free device (queued until one is free)."""
        ...

    def wait(self, timeout: float | None) -> list[tuple[Work, Measurement]]:
        """Work done since the last call, waiting up to `timeout` seconds (None: until some
        is done) when none is."""
        ...

    def outstanding(self) -> int:
        """Work submitted and not yet returned by `wait`."""
        ...

    def rates(self) -> tuple[DeviceRate, ...]:
        """Each device's measurements and rate so far."""
        ...
