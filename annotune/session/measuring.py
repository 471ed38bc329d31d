"""Measuring the configurations the search asks for, one tune's way: served from the study
when known, else claimed, built in parallel and measured one by one as their compiles finish
(`Measuring`); the baseline first, and again every `drift_every` new measurements to see
whether the machine's speed moved (`DriftWatch`). A transient failure (killed from outside,
out of disk or memory) is retried once and never stored."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import closing
from dataclasses import replace

import numpy as np

from annotune.builder import Builder
from annotune.core.records import BuildResult, Measurement, Number, Result
from annotune.results.database import config_key
from annotune.run.protocol import Measurer
from annotune.session.plan import rows_of
from annotune.session.replay_device import ReplayBuilder
from annotune.session.report import Drift, Stopwatch
from annotune.session.study import Store, result_of, results_of, shared
from annotune.space import Space

CLEARLY_SLOWER = 1.25
"""A configuration whose fastest run is this much slower than the best median so far gets only
the minimum number of timed runs: it is no contender, and its time need not be precise."""

PIPELINE_BATCH = 20
"""Once a configuration has run correctly, at least this many are asked of the strategy at once
(IterML's first batch): they are compiled in parallel and measured in the order their compiles
finish, so the GPU is measuring one while the pool compiles the next. It is also the batch the
strategies were judged with on the recorded data, where nothing capped it."""

CLAIM_POLL_S = 0.1
"""How often a tune waiting for another tune's measurement looks for it in the database."""


class DriftWatch:
    """The baseline re-measured during the tune, every `every` new measurements (0: never)."""

    def __init__(self, every: int):
        self.every = every
        self.medians: list[float] = []
        self.since = 0

    def due(self) -> bool:
        """Count a new measurement; True every `every` of them."""
        if not self.every:
            return False
        self.since += 1
        if self.since < self.every:
            return False
        self.since = 0
        return True

    def summary(self, baseline: Measurement | None, within: float) -> Drift | None:
        """Whether a re-measurement left the first measurement's interval (`within`
        of its median when it has none): then the machine's speed changed under the tune."""
        if not self.medians or baseline is None or baseline.time is None:
            return None
        first = baseline.time
        largest = max(((t - first) / first for t in self.medians), key=abs)
        interval = baseline.interval
        outside = [
            not (interval[0] <= t <= interval[1]) if interval else abs(t - first) > within * first
            for t in self.medians
        ]
        return Drift(tuple(self.medians), largest, any(outside))


class Measuring:
    """The measuring of one tune: the builder and measurer it uses, what the study knows
    (`store`), what was counted (`tally`), and where the time went (`stopwatch`)."""

    def __init__(
        self,
        space: Space,
        legal: np.ndarray,
        builder: Builder | ReplayBuilder,
        measurer: Measurer,  # a measurer of `annotune.session.measurers`, a replay one, or a proxy
        store: Store,
        stopwatch: Stopwatch,
        *,
        baseline: dict[str, Number],
        objective: str,
        check: bool,
        drift_every: int,
        through_env: frozenset[str],
    ):
        self.space = space
        self.legal = legal
        self.builder = builder
        self.measurer = measurer
        self.store = store
        self.tally = store.tally
        self.progress = store.tally.progress
        self.stopwatch = stopwatch
        self.baseline_params = baseline
        self.objective = objective
        self.check = check
        self.drift = DriftWatch(drift_every)
        self.through_env = through_env  # one binary for all their values
        self.baseline: Measurement | None = None
        self.baseline_failed = ""
        self.fallbacks: list[str] = []  # why NVRTC did not compile each variant nvcc compiled

    def batch_size(self) -> int:
        """How many configurations to ask for next: as many as compile at once until one has
        run correctly (a program that fails every time is given up after `GIVE_UP_AFTER`),
        then `PIPELINE_BATCH`, so that compiles run ahead of the runs."""
        jobs = max(1, self.builder.jobs)
        return jobs if self.progress.best_time is None else max(PIPELINE_BATCH, jobs)

    def measure_baseline(self) -> list[Result]:
        """Measure the baseline first: its time is what the report compares with, and its
        output what every other configuration's is checked against. Without a working
        baseline nothing can be checked, so the tune stops unless checking is off."""
        (measurement,) = self.measure_configs([self.baseline_params])
        if measurement.status == "ok":
            self.baseline = measurement
            self.progress.default_time = measurement.time
        elif self.check:
            self.baseline_failed = f"{measurement.status}: {measurement.error}".strip(": ")
            return []
        self.measurer.adopt_baseline(
            measurement, lambda: self.builder.build([self.baseline_params])[0]
        )
        self.tally.report()
        rows = rows_of(self.space, self.legal, [self.baseline_params])
        return [result_of(row, measurement, self.objective) for row in rows]

    def measure(self, indices: Sequence[int]) -> list[Result]:
        configs = self.space.to_dicts(self.legal[np.asarray(indices, dtype=np.int64)])
        return results_of(indices, self.measure_configs(configs), self.objective)

    def measure_configs(self, configs: list[dict[str, Number]]) -> list[Measurement]:
        """Serve what the database has; claim the rest, build them in parallel, then run them
        one by one.

        A configuration is claimed (`Database.claim`) before it is built, so that another tune
        of the same study running now neither runs it nor builds it at the same time; one that
        tune holds is waited for, polling the database, and taken over if that tune dies or
        gives it up. Every configuration asked gets its measurement: the strategy must hear of
        each.
        """
        found: dict[int, Measurement] = {}
        pending = list(range(len(configs)))
        while pending:
            mine, held = [], []
            for i in pending:
                known = self.store.served(configs[i])
                if known is not None:
                    found[i] = known
                elif self.store.claim(configs[i]):
                    mine.append(i)
                else:
                    held.append(i)
            measured = self._measure_claimed([configs[i] for i in mine]) if mine else []
            found.update(zip(mine, measured, strict=True))
            if held and not mine:
                time.sleep(CLAIM_POLL_S)  # all in other tunes' hands: give them time
            pending = held
        return [found[i] for i in range(len(configs))]

    def _measure_claimed(self, configs: list[dict[str, Number]]) -> list[Measurement]:
        """Build the configurations this tune claimed, in parallel, and measure each as soon
        as its compile is done (completion order), so that compiles run ahead of the runs.
        Each claim ends with its recorded measurement, or is released: at once after a
        transient failure, and for the rest when anything (Ctrl-C) stops the batch."""
        done: dict[int, Measurement] = {}
        try:
            with closing(build_iter(self.builder, self.through_env, configs)) as builds:
                for index, build in timed(builds, self.stopwatch):
                    done[index] = self._measure_built(self.built(build))
        finally:
            for index, params in enumerate(configs):
                if index not in done:
                    self.store.release(params)
        return [done[i] for i in range(len(configs))]

    def built(self, build: BuildResult) -> BuildResult:
        """Note what a build says of the compile: its pool time, and an NVRTC fallback."""
        if not build.cached:
            self.stopwatch.add("compiled", build.seconds)
            if build.fallback:
                self.fallbacks.append(build.fallback)
        return build

    def build(self, params: Mapping[str, Number]) -> BuildResult:
        """One configuration's build outside a batch (a retry, the drift check's baseline)."""
        with self.stopwatch.part("compile"):
            return self.built(self.builder.build([dict(params)])[0])

    def _timed_measure(self, measure: Callable[[], Measurement]) -> Measurement:
        """A runner's measurement, its wall time and set-up counted in the tune's breakdown."""
        with self.stopwatch.part("measure"):
            measurement = measure()
        self.stopwatch.book(measurement)
        return measurement

    def _measure_built(self, build: BuildResult) -> Measurement:
        """Measure one build, or serve it another configuration's measurement of the same
        program; record it."""
        program = self.program(build)
        same = self.store.programs.get(program) if program else None
        if same is not None:
            return self.store.keep(shared(same, build.params), shared=True)
        measurement = self._measure_one(build)
        if program and not measurement.transient:
            info = {**measurement.compile_info, "program": program}
            measurement = replace(measurement, compile_info=info)
            self.store.programs[program] = measurement
        measurement = self.store.keep(measurement, shared=False)
        self._check_drift()
        return measurement

    def program(self, build: BuildResult) -> str:
        """What makes two runs the same: the preprocessed program and what the run takes
        from the parameters besides it; "" when either is unknown."""
        run = self.measurer.run_of(build.params) if build.program else None
        if run is None:
            return ""
        return hashlib.sha256(f"{build.program}\0{run}".encode()).hexdigest()

    def stop_above(self) -> float | None:
        """The time past which a configuration gets only the fewest runs: it is no contender
        for time (`CLEARLY_SLOWER`). None for energy: a slower configuration may use less."""
        best = self.progress.best_time
        if best is None or self.objective != "time":
            return None
        return CLEARLY_SLOWER * best

    def _measure_one(self, build: BuildResult) -> Measurement:
        """Measure one build; a transient failure is tried once more (rebuilt if the compile
        was what failed) before it is given up for this run, unstored."""
        stop_above = self.stop_above()
        measurement = self._timed_measure(lambda: self.measurer.measure(build, stop_above))
        if measurement.transient:
            if build.transient:
                build = self.build(build.params)
            again = build
            measurement = self._timed_measure(lambda: self.measurer.measure(again, stop_above))
        self.tally.noted(measurement)
        return measurement

    def drift_due(self) -> bool:
        """Count a new measurement; True every `drift_every` of them (with a baseline)."""
        return self.baseline is not None and self.drift.due()

    def _check_drift(self) -> None:
        """Every `drift_every` new measurements, measure the baseline again (not stored: the
        study keeps its first measurement) to see whether the machine's speed moved."""
        if not self.drift_due():
            return
        build = self.build(self.baseline_params)
        again = self._timed_measure(lambda: self.measurer.measure(build))
        if again.status == "ok":
            self.drift.medians.append(again.time)


def build_iter(
    builder: Builder | ReplayBuilder, through_env: frozenset[str], configs: list[dict[str, Number]]
) -> Iterator[tuple[int, BuildResult]]:
    """`Builder.build_iter`, but configurations that differ only in parameters set through
    the environment (`through_env`) are built once, not once each in parallel: they are one
    binary, which each runs with its own environment. The others come right after the one
    built, as served from the cache."""
    groups: dict[str, list[int]] = {}
    for index, params in enumerate(configs):
        binary = {k: v for k, v in params.items() if k not in through_env}
        groups.setdefault(config_key(binary), []).append(index)
    members = list(groups.values())
    with closing(builder.build_iter([configs[g[0]] for g in members])) as builds:
        for position, build in builds:
            first, *others = members[position]
            yield first, build
            for other in others:
                yield other, replace(build, params=dict(configs[other]), cached=True)


def timed(
    builds: Iterator[tuple[int, BuildResult]], stopwatch: Stopwatch
) -> Iterator[tuple[int, BuildResult]]:
    """Each build as it lands, the wait for it booked as compile time: what the loop does with
    it between two waits is booked by the loop."""
    while True:
        with stopwatch.part("compile"):
            landed = next(builds, None)
        if landed is None:
            return
        yield landed
