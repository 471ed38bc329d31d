"""A tune's measurements in flight on a pool of several devices (`Flight`), for the concurrent
search (`annotune.session.concurrent.run_concurrent_search`) or the sequential one's batches
measured whole (`--sync`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import closing
from dataclasses import replace
from threading import Event

import numpy as np

from annotune.core.records import BuildResult, Measurement, Number, Result
from annotune.session.concurrent import DevicePool, Work, room
from annotune.session.measuring import CLAIM_POLL_S, Measuring, build_iter, timed
from annotune.session.study import result_of, shared


class Flight:
    """A session's measurements in flight on a pool of devices: the concurrent search's
    `Measurements` (`annotune.session.concurrent`).

    Each configuration goes the sequential loop's way (`Measuring.measure_configs`): served
    from what is known, else claimed, built, and handed to the pool; its measurement is
    recorded and told as it lands. A configuration of a program already in flight waits for
    that program's measurement instead of being measured again; a transient failure is tried
    once more; every `drift_every` new measurements the baseline is re-measured on the first
    device (the one that measures the baseline and the final check). `abandon` releases the
    claims of whatever is still in flight when the search ends early.
    """

    def __init__(self, m: Measuring, pool: DevicePool, stop: Event | None):
        self.m = m
        self.pool = pool
        self.stop = stop
        self.ready: list[Result] = []
        self.held: dict[int, dict[str, Number]] = {}  # row -> configuration another tune holds
        self.claimed: dict[int, dict[str, Number]] = {}  # row -> configuration not yet recorded
        self.work: dict[int, tuple[int, BuildResult, str, int]] = {}  # row, build, program, tries
        self.waiting: dict[str, list[tuple[int, BuildResult]]] = {}  # program -> rows of it
        self.drifts: set[int] = set()  # keys of the baseline's re-measurements
        self.keys = 0
        self.device_count = pool.devices()  # those the tune began with
        m.progress.devices = pool.rates()

    def room(self, batch: int) -> int:
        return room(self.pool.devices(), self.pool.outstanding(), batch)

    def devices(self) -> int:
        return self.pool.devices()

    def start(self, rows: Sequence[int]) -> None:
        s = self.m
        configs = s.space.to_dicts(s.legal[np.asarray(rows, dtype=np.int64)])
        mine: list[tuple[int, dict[str, Number]]] = []
        for row, params in zip(rows, configs, strict=True):
            if self._served(row, params):
                continue
            if s.store.claim(params):
                self.claimed[row] = params
                mine.append((row, params))
            else:
                self.held[row] = params
        self._build(mine)

    def collect(self) -> list[Result]:
        while not self.ready:
            if self.stop is not None and self.stop.is_set():
                raise KeyboardInterrupt
            self._poll_held()
            if self.ready:
                break
            if not self.pool.outstanding():
                if not self.held:
                    raise RuntimeError("collect() with nothing in flight")
                time.sleep(CLAIM_POLL_S)  # all in other tunes' hands: give them time
                continue
            waiting = self.held or self.stop is not None
            self._receive(CLAIM_POLL_S if waiting else None)
            self.m.progress.devices = self.pool.rates()
        ready, self.ready = self.ready, []
        return ready

    def drain(self) -> None:
        """Wait for the drift checks still on a device once the search has all it asked for:
        their times belong in the report."""
        while self.pool.outstanding():
            self._receive(None)
        self.m.progress.devices = self.pool.rates()

    def _receive(self, timeout: float | None) -> None:
        """Wait up to `timeout` (None: until some lands) for the devices' work and record it;
        the wait is the tune's measuring time (the devices measure, the tune waits)."""
        with self.m.stopwatch.part("measure"):
            landed = self.pool.wait(timeout)
        for work, measurement in landed:
            self._landed(work, measurement)

    def abandon(self) -> None:
        """Release the claims of configurations that will not be recorded in this tune."""
        s = self.m
        for params in self.claimed.values():
            s.store.release(params)
        self.claimed.clear()
        s.progress.devices = self.pool.rates()

    def _served(self, row: int, params: dict[str, Number]) -> bool:
        known = self.m.store.served(params)
        if known is None:
            return False
        self.ready.append(result_of(row, known, self.m.objective))
        return True

    def _poll_held(self) -> None:
        """Configurations other tunes held: theirs once recorded, ours once let go."""
        s = self.m
        mine = []
        for row, params in list(self.held.items()):
            if self._served(row, params):
                del self.held[row]
            elif s.store.claim(params):
                del self.held[row]
                self.claimed[row] = params
                mine.append((row, params))
        self._build(mine)

    def _build(self, mine: list[tuple[int, dict[str, Number]]]) -> None:
        """Build in parallel; hand each build to the pool as it lands."""
        if not mine:
            return
        s = self.m
        configs = [params for _, params in mine]
        with closing(build_iter(s.builder, s.through_env, configs)) as builds:
            for index, build in timed(builds, s.stopwatch):
                self._dispatch(mine[index][0], s.built(build))

    def _dispatch(self, row: int, build: BuildResult, tries: int = 0) -> None:
        s = self.m
        program = s.program(build)
        if program and tries == 0:
            same = s.store.programs.get(program)
            if same is not None:
                self._done(row, s.store.keep(shared(same, build.params), shared=True))
                return
            if program in self.waiting:  # the same program is being measured
                self.waiting[program].append((row, build))
                return
            self.waiting[program] = []
        key = self._key()
        self.work[key] = (row, build, program, tries)
        self.pool.submit(Work(key, build, s.stop_above()))

    def _landed(self, work: Work, measurement: Measurement) -> None:
        s = self.m
        # Device seconds, averaged over the devices: shares of the tune's wall time.
        s.stopwatch.book(measurement, 1 / self.device_count)
        if work.key in self.drifts:
            self.drifts.discard(work.key)
            if measurement.status == "ok":
                s.drift.medians.append(measurement.time)  # type: ignore[arg-type]
            return
        row, build, program, tries = self.work.pop(work.key)
        if measurement.transient and tries == 0:
            if build.transient:
                build = s.build(build.params)
            self._dispatch(row, build, tries=1)
            return
        s.tally.noted(measurement)
        if program and not measurement.transient:
            info = {**measurement.compile_info, "program": program}
            measurement = replace(measurement, compile_info=info)
            s.store.programs[program] = measurement
        measurement = s.store.keep(measurement, shared=False)
        self._done(row, measurement)
        for other, other_build in self.waiting.pop(program, []) if program else []:
            if measurement.transient:  # the program has no measurement yet: measure it
                self._dispatch(other, other_build)
            else:
                again = shared(measurement, other_build.params)
                self._done(other, s.store.keep(again, shared=True))
        self._check_drift()

    def _done(self, row: int, measurement: Measurement) -> None:
        self.claimed.pop(row, None)
        self.ready.append(result_of(row, measurement, self.m.objective))

    def _check_drift(self) -> None:
        s = self.m
        if not s.drift_due():
            return
        key = self._key()
        self.drifts.add(key)
        self.pool.submit(Work(key, s.build(s.baseline_params), pinned=0))

    def _key(self) -> int:
        self.keys += 1
        return self.keys
