"""One tune on given devices, as a short story: resolve what it needs once (`annotune.session.
plan`), measure the baseline and the failures to retry, then ask, build, measure, tell and
store until the budget is spent (`annotune.search.run_search`, or the concurrent search on a
pool of devices), and finish: the final check, the header, the report
(`annotune.session.finish`).

Every measurement is committed to the database as it completes, so a crash, SIGKILL or Ctrl-C
loses at most the one being taken; a re-run with the same settings resumes: configurations
already in the database are served from it ("reused") and never measured again. Several tunes
of the same study at once share the work through claims (`annotune.session.study.Store`).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from functools import partial

import numpy as np

from annotune.annotate import Problem
from annotune.annotate.summary import env_only_params
from annotune.core.records import Result
from annotune.search import Budget, Strategy, run_search
from annotune.session.concurrent import DevicesLost, measure_whole, run_concurrent_search
from annotune.session.finish import Closing, Ending, finish
from annotune.session.flight import Flight
from annotune.session.learning import KnownFirst, LiveTransfer
from annotune.session.measuring import Measuring
from annotune.session.options import TuneOptions, kernel_mode
from annotune.session.plan import (
    Devices,
    Ground,
    Instruments,
    Place,
    Search,
    baseline_of,
    device_name,
)
from annotune.session.report import ProgressCallback, Stopwatch, TuneProgress, TuneReport
from annotune.session.study import Store, Tally, claim_lifetime
from annotune.transfer.prior import Prior


def tune_on(
    problem: Problem,
    options: TuneOptions,
    devices: Devices | None,
    on_progress: ProgressCallback | None = None,
) -> TuneReport:
    """`tune` on `devices` (None: this machine's GPU, or its CPU), with no check that a GPU
    is there. A pool of devices that is lost entirely ends the search as Ctrl-C does (what was
    measured is kept; no final check), and the report's `devices_lost` says why."""
    rng = np.random.default_rng(options.seed)
    ground = Ground.of(problem, rng)
    baseline = baseline_of(ground.space, options.reference)
    device = device_name(options.device, devices)
    place = Place.of(problem, device, options.gpus, options.db_path, options.cache_dir)
    stopwatch = Stopwatch()
    with ExitStack() as resources:
        instruments = Instruments.open(
            problem,
            devices,
            place,
            resources,
            settings=options.measuring(),
            jobs=options.jobs,
            compile_timeout=options.compile_timeout,
            fresh=options.fresh,
            retry_failed=options.retry_failed,
        )
        search = Search.choose(
            ground,
            instruments,
            place,
            devices,
            strategy=options.strategy,
            transfer=options.transfer,
            transfer_from=options.transfer_from,
            seed=options.seed,
        )
        progress = TuneProgress(
            device,
            ground.legal_count,
            options.budget,
            search.strategy.name,
            transfer_from=search.prior.sources,
            warnings=_warnings(place, search, instruments, ground.unrecorded(devices)),
            objective=options.objective,
        )
        lifetime = claim_lifetime(options.compile_timeout, options.run)
        m = Measuring(
            ground.space,
            ground.legal,
            instruments.builder,
            instruments.measurer,
            Store(instruments.db, instruments.study, Tally(progress, on_progress), lifetime),
            stopwatch,
            baseline=baseline,
            objective=options.objective,
            check=options.check,
            drift_every=options.drift_every,
            through_env=env_only_params(problem),
        )
        batches = _Batches(m.tally, search.live)
        limits = (options.budget, options.seconds)
        ending = _search(
            m, ground, instruments, search, devices, batches, limits, options.sync, rng
        )
        prior = batches.prior(search.prior)
        return finish(m, problem, _closing(problem, options), ending, place.db_path, prior)


def _warnings(
    place: Place, search: Search, instruments: Instruments, unrecorded: tuple[str, ...]
) -> tuple:
    """What the progress display warns of from the start: results moved to the user's cache,
    the prior's doubts, the measurer's and the compiler's limits, a recording's gaps."""
    builder = instruments.builder
    compiler_warnings = (builder.nvrtc_unavailable,) if builder.nvrtc_unavailable else ()
    return (
        (place.moved,) * bool(place.moved)
        + search.prior.warnings
        + instruments.measurer.warnings
        + compiler_warnings
        + unrecorded
    )


def _search(
    m: Measuring,
    ground: Ground,
    instruments: Instruments,
    search: Search,
    devices: Devices | None,
    batches: _Batches,
    limits: tuple[int | None, float | None],
    sync: bool,
    rng: np.random.Generator,
) -> Ending:
    """The baseline, the failures to measure again, then the search until its `limits` (the
    measurements and the seconds; None: no limit) are spent: sequential on this machine's
    measurer, or on a pool of devices, concurrent unless `sync`."""
    pool = devices.pool if devices is not None else None
    stop = devices.stop if devices is not None else None
    flight = Flight(m, pool, stop) if pool is not None else None
    try:
        known = m.measure_baseline()
        if m.baseline_failed:
            return Ending(False)
        known += m.measure(ground.rows([r.params for r in instruments.retry]))
        evaluations, seconds = limits
        left = None if evaluations is None else evaluations - m.progress.evaluations
        budget = Budget(max(0, left) if left is not None else None, seconds)
        strategy = KnownFirst(search.strategy, known, m.stopwatch)
        if flight is None or sync:
            run_search(
                strategy,
                ground.candidates,
                m.measure if flight is None else partial(measure_whole, flight),
                budget=budget,
                rng=rng,
                batch_size=m.batch_size,
                on_batch=batches.after_batch,
            )
        else:
            run_concurrent_search(
                strategy,
                ground.candidates,
                flight,
                budget=budget,
                rng=rng,
                on_batch=batches.after_batch,
            )
        if flight is not None:
            flight.drain()
    except KeyboardInterrupt:
        return Ending(True, batches.gave_up)
    except DevicesLost as error:
        return Ending(True, batches.gave_up, error.message)  # no device is left for the final check
    finally:
        if flight is not None:
            flight.abandon()
    return Ending(False, batches.gave_up)


def _closing(problem: Problem, options: TuneOptions) -> Closing:
    return Closing(
        recheck=options.recheck,
        rounds=options.recheck_rounds,
        stable_within=options.run.stable_within,
        write_header=options.write_header,
        out_dir=options.out_dir,
        gpu_code=kernel_mode(problem, options.mode)
        or problem.language == "cuda"
        or "acc" in problem.pragmas,
    )


class _Batches:
    """What is done after each batch the search was told: the progress shown, other kinds'
    new results learned (`LiveTransfer`), and whether to give up."""

    def __init__(self, tally: Tally, live: LiveTransfer | None):
        self.tally = tally
        self.live = live
        self.gave_up = False

    def after_batch(self, results: Sequence[Result], outcome, strategy: Strategy) -> bool:
        """True (stop) once every configuration failed the same way (`GIVE_UP_AFTER`)."""
        progress = self.tally.progress
        progress.iteration = int(strategy.progress().get("iteration", 0))
        if self.live is not None and self.live.learn(progress.evaluations):
            progress.transfer_from = self.live.prior.sources
        self.tally.report()
        self.gave_up = self.tally.all_failed_alike()
        return self.gave_up

    def prior(self, started_with: Prior) -> Prior:
        """What the search learned from other GPUs: the last prior it took."""
        return self.live.prior if self.live is not None else started_with
