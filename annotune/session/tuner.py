"""The tuning loop: strategy, builder, runner and database joined, one batch at a time.

When the database (or result files the user names) holds measurements of the same source and
space on other GPUs, the search learns from them (`annotune.transfer.prior.gather_prior`): the
`transfer` strategy ranks the space with a model of those GPUs, measures the most promising
configurations first and goes on as IterML (see `annotune.search.transfer`).

Every measurement is committed to the database as it completes, so a crash, SIGKILL or Ctrl-C
loses at most the one being taken; a re-run with the same settings resumes: configurations
already in the database are served from it ("reused") and never measured again. The default
configuration (or the user's `reference`) is always measured first: its time is the baseline,
and its `annotune-check:` value is the reference every other configuration's output must match;
when it fails, the tune stops, since nothing could be checked or compared against it.

Numbers the report claims are re-measured: the default is measured again every `drift_every`
new measurements (a default that drifts out of its interval marks the tune noisy), and before
the header is written the best few and the baseline are re-measured interleaved
(`annotune.session.recheck`); the winner and its speedup come from that check alone. A
transient failure (killed from outside, out of disk or memory) is retried once and never
stored.

Several tunes of the same study at once share the work: each configuration is claimed in the
database before it is run, and a tune waits for the measurement of one another tune holds
(`_Session._measure_configs`). In a read-only checkout the database and the compile cache go
to the user's cache directory (`annotune.results.database.workspace`), and the report says so.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, closing, contextmanager
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from threading import Event
from typing import Any, Literal

import numpy as np

from annotune import __version__
from annotune.annotate import Problem, problem_space
from annotune.annotate.kernel import KernelSpec, LaunchError
from annotune.annotate.summary import env_only_params
from annotune.builder import Builder, CompilerCommand
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.records import (
    OBJECTIVE_GAINS,
    OBJECTIVE_UNITS,
    OBJECTIVES,
    BuildResult,
    Candidates,
    Measurement,
    Number,
    Result,
    objective_value,
)
from annotune.emit import render_header, tuned_header_path, write_if_changed
from annotune.results.database import Database, Owner, Study, StudyKey, config_key, workspace
from annotune.run import energy
from annotune.run.backends import select_backend
from annotune.run.conditions import open_monitor
from annotune.run.device import CPU_PREFIX, current_device_name, gpu_name
from annotune.run.kernel import KernelReference, KernelRunner
from annotune.run.program import ProgramRunner, RunSpec
from annotune.run.sampling import Sampling
from annotune.search import Budget, Strategy, create, run_search
from annotune.session.concurrent import (
    DevicePool,
    DeviceRate,
    DevicesLost,
    Work,
    measure_whole,
    room,
    run_concurrent_search,
)
from annotune.session.recheck import Verdict, recheck
from annotune.session.replay_device import ReplayBuilder, ReplayMeasurer, ReplayTable, load_table
from annotune.space import Space
from annotune.transfer.prior import TRANSFER_STRATEGIES, Prior, gather_prior
from annotune.transfer.resolve import resolve, user_table


@dataclass(frozen=True)
class TuneOptions:
    """Everything `tune` can be told; every field has a documented default."""

    strategy: str = "iterml"
    budget: int | None = 100  # measurements (new + reused); None = until the strategy is done
    seconds: float | None = None  # wall-time budget
    seed: int = 0
    device: str | None = None  # default: the GPU's name, else cpu-<model>
    jobs: int | None = None  # parallel compiles; default: the core count
    out_dir: Path | None = None  # default: tuned/ beside the source
    db_path: Path | None = None  # default: .annotune/results.db beside the source (workspace)
    cache_dir: Path | None = None  # default: .annotune/cache beside the source (workspace)
    fresh: bool = False
    compiler: CompilerCommand | None = None  # default: by language (see build.compiler)
    compile_timeout: float = 300.0
    run: RunSpec = field(default_factory=RunSpec)
    mode: str = "auto"  # "program", "kernel", or "auto": kernel when the source declares one
    kernel: str | None = None  # which `#pragma annotune kernel` (needed when there are several)
    backend: str | None = None  # kernel mode: "pycuda" or "cuda-python" (default: what imports)
    transfer: bool = True  # learn from other GPUs' results (only for iterml and transfer)
    transfer_from: tuple[Path, ...] = ()  # T4 / Kernel Tuner cache files of other GPUs
    recheck: int = 3  # contenders re-measured against the baseline at the end; 0: none
    recheck_rounds: int = 30  # interleaved rounds of that check (6 at least for an interval)
    drift_every: int = 25  # new measurements between re-measurements of the default; 0: never
    retry_failed: bool = False  # measure the study's failed configurations again
    reference: dict[str, Number] | None = None  # the baseline instead of the default
    check: bool = True  # compare each configuration's output with the baseline's
    flush_l2: bool | None = None  # kernel mode: None flushes when the data fit in L2
    write_header: bool = True  # False: the caller writes it (`tune --sizes`: one for all sizes)
    ray: bool = False  # measure on devices that are Ray actors (`annotune.session.distributed`)
    ray_address: str | None = None  # the cluster to join; None: start a local one
    devices: int | Literal["all"] | None = None  # --ray: how many; None: every GPU (1 replay)
    replay: tuple[Path, ...] = ()  # recordings served by replay devices instead of GPUs
    replay_delay: float | None = 0.1  # seconds a replay measurement takes; None: recorded
    sync: bool = False  # several devices measure the search's own batches, each waited for whole
    objective: str = "time"  # what the search minimises: "time", "energy" or "edp" (OBJECTIVES)
    gpus: Path | None = None  # the user's GPU table (`--gpus`), over the config's [[gpu]]

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise AnnotuneError(
                f"unknown objective {self.objective!r}: one of {', '.join(OBJECTIVES)}"
            )
        if self.objective != "time" and self.replay:
            raise AnnotuneError(
                f"--objective {self.objective} needs energy, and a recording holds times only: "
                "replay devices tune for time"
            )


@dataclass(frozen=True)
class FailureKind:
    """Invalid configurations that failed the same way, numbers aside: how many, and the first
    one's own error and parameters, so a user sees why without opening the database."""

    status: str
    count: int
    error: str
    params: dict[str, Number]

    def to_json(self) -> dict:
        return asdict(self)


_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def failure_kind(status: str, error: str) -> tuple[str, str]:
    """Failures that differ only in their numbers (sizes, indices, line numbers) are one kind."""
    return status, _NUMBER.sub("#", error)


GIVE_UP_AFTER = 8
"""Configurations that all failed the same way, with none valid, before the search stops."""

CLEARLY_SLOWER = 1.25
"""A configuration whose fastest run is this much slower than the best median so far gets only
the minimum number of timed runs: it is no contender, and its time need not be precise."""

RECHECK_SAMPLES = 5
"""Kernel mode: timed launches per round of the final check (a launch is microseconds)."""

PIPELINE_BATCH = 20
"""Once a configuration has run correctly, at least this many are asked of the strategy at once
(IterML's first batch): they are compiled in parallel and measured in the order their compiles
finish, so the GPU is measuring one while the pool compiles the next. It is also the batch the
strategies were judged with on the recorded data, where nothing capped it."""

CLAIM_POLL_S = 0.1
"""How often a tune waiting for another tune's measurement looks for it in the database."""


@dataclass
class TuneProgress:
    """What a progress display shows; updated after every measurement."""

    device: str
    space_size: int | None  # legal configurations; None when too many to count
    budget: int | None
    strategy: str
    iteration: int = 0
    evaluations: int = 0
    reused: int = 0
    same_program: int = 0  # served by another configuration's measurement of the same program
    measured: int = 0
    compile_failures: int = 0
    run_failures: int = 0
    best_time: float | None = None
    best_params: dict[str, Number] | None = None
    default_time: float | None = None
    failures: list[FailureKind] = field(default_factory=list)  # each kind when first seen
    transfer_from: tuple[str, ...] = ()  # the GPUs the search learned from
    warnings: tuple[str, ...] = ()
    transient: int = 0  # failures retried and not stored (measured again next run)
    phase: str = "search"  # "search", then "recheck" while the final check runs
    recheck_round: int = 0  # the final check's rounds done, of `recheck_rounds`
    recheck_rounds: int = 0
    devices: tuple[DeviceRate, ...] = ()  # each device's rate, when several measure
    objective: str = "time"  # what best_value is (`OBJECTIVES`), in `OBJECTIVE_UNITS`
    best_value: float | None = None  # the best configuration's objective (its time: best_time)


@dataclass(frozen=True)
class Outcome:
    """A configuration's median time in the search, its 95% interval and sample count, and
    its median energy per run (J) with its interval when energy was measured."""

    params: dict[str, Number]
    time: float | None
    interval: tuple[float, float] | None = None
    samples: int = 0
    energy: float | None = None
    energy_interval: tuple[float, float] | None = None

    @classmethod
    def of(cls, params: dict[str, Number], measurement: Measurement | None) -> Outcome:
        if measurement is None or measurement.status != "ok":
            return cls(params, None)
        return cls(
            params,
            measurement.time,
            measurement.interval,
            len(measurement.times),
            measurement.energy,
            measurement.energy_interval,
        )

    def to_json(self) -> dict:
        data = {
            "params": self.params,
            "time": self.time,
            "interval": list(self.interval) if self.interval else None,
            "samples": self.samples,
        }
        if self.energy is not None:
            data["energy"] = self.energy
            data["energy_interval"] = list(self.energy_interval) if self.energy_interval else None
        return data


@dataclass(frozen=True)
class Drift:
    """The default re-measured during the tune: each median, and whether one left the first
    measurement's interval (then the machine's speed changed under the tune: noisy)."""

    medians: tuple[float, ...]
    largest: float  # the largest relative change from the first median, e.g. 0.07 for 7%
    noisy: bool

    def to_json(self) -> dict:
        return {"medians": list(self.medians), "largest": self.largest, "noisy": self.noisy}


@dataclass(frozen=True)
class WallBreakdown:
    """Where a tune's wall time went, in seconds. `compile` is only the time spent waiting for
    a compile with nothing to measure (compiles overlap runs); `compiled` is the compile time
    summed over the pool's workers, which may exceed it. `startup` is the measurements' set-up
    (program mode: process start-up and whatever runs outside the timed region; kernel mode:
    loading the module, the checked launch, warm-up), `timeout` the same of measurements that
    timed out, which is mostly runs killed at the limit and no start-up, `run` the rest of the
    measurements, `gpu` the device's busy time in timed runs (program mode: the timed
    regions). `busy_on` says what that time kept busy: "GPU" for GPU code on a GPU, "host" for
    a host program or a CPU device, whose timed regions are no GPU's. With several devices,
    `startup`, `timeout` and `gpu` are averaged over them, and the measurements' time is the
    time the search waited on them."""

    wall: float
    compile: float
    startup: float
    timeout: float
    run: float
    search: float
    recheck: float
    other: float
    compiled: float
    gpu: float
    busy_on: str

    def to_json(self) -> dict:
        return {k: v if isinstance(v, str) else round(v, 3) for k, v in asdict(self).items()}


class _Stopwatch:
    """Seconds spent in each part of a tune, summed over the tune."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.parts: Counter[str] = Counter()

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.parts[name] += time.perf_counter() - started

    def add(self, name: str, seconds: float) -> None:
        self.parts[name] += seconds

    def book(self, measurement: Measurement, share: float = 1.0) -> None:
        """A measurement's device time (`share` of it: one device's of several): its set-up as
        start-up, or as time lost to a timeout when it timed out, and its timed regions."""
        spent = measurement.compile_info.get("run_seconds", {})
        setup = "timeout" if measurement.status == "timeout" else "startup"
        self.add(setup, spent.get("setup", 0.0) * share)
        self.add("gpu", spent.get("gpu", 0.0) * share)

    def breakdown(self, busy_on: str) -> WallBreakdown:
        parts = self.parts
        wall = time.perf_counter() - self.started
        measure = parts["measure"]
        accounted = parts["compile"] + measure + parts["search"] + parts["recheck"]
        startup = min(parts["startup"], measure)
        timeout = min(parts["timeout"], measure - startup)
        return WallBreakdown(
            wall=wall,
            compile=parts["compile"],
            startup=startup,
            timeout=timeout,
            run=max(0.0, measure - startup - timeout),
            search=parts["search"],
            recheck=parts["recheck"],
            other=max(0.0, wall - accounted),
            compiled=parts["compiled"],
            gpu=parts["gpu"],
            busy_on=busy_on,
        )


@dataclass(frozen=True)
class TuneReport:
    device: str
    evaluations: int
    reused: int
    invalid: int
    best: Outcome | None
    default: Outcome
    header: Path | None
    interrupted: bool
    space_size: int | None
    db_path: Path
    prior: Prior | None = None
    warnings: tuple[str, ...] = ()
    failures: tuple[FailureKind, ...] = ()  # the most common first
    gave_up: bool = False  # stopped early: every configuration failed the same way
    baseline: Outcome | None = None  # the user's reference, when one was given
    baseline_failed: str = ""  # why the baseline failed (the tune then stops)
    recheck: Verdict | None = None  # the final check; None when it did not run
    search_best: Outcome | None = None  # the fastest in the search, before the final check
    drift: Drift | None = None
    transient: int = 0
    timing: str = ""  # where times came from: "header", "regex", "wall" (start-up included)
    notes: tuple[str, ...] = ()  # what the user should know about these numbers
    run_dir: Path | None = None  # where the program ran (program mode)
    same_program: int = 0  # configurations served by a measurement of the same program
    wall_breakdown: WallBreakdown | None = None
    devices: tuple[DeviceRate, ...] = ()  # what each device measured (several devices)
    devices_lost: str = ""  # why the tune stopped early: every device was lost
    objective: str = "time"  # what was minimised; the speedup is the baseline's over the winner's

    def to_json(self) -> dict:
        verdict = self.recheck
        return {
            "device": self.device,
            "objective": self.objective,
            "evaluations": self.evaluations,
            "reused": self.reused,
            "same_program": self.same_program,
            "invalid": self.invalid,
            "best": self.best.to_json() if self.best else None,
            "search_best": self.search_best.to_json() if self.search_best else None,
            "default": self.default.to_json(),
            "baseline": self.baseline.to_json() if self.baseline else None,
            "baseline_failed": self.baseline_failed,
            "speedup": verdict.speedup if verdict else None,
            "speedup_interval": list(verdict.interval) if verdict and verdict.interval else None,
            "kept_default": verdict.kept_baseline if verdict else None,
            "recheck": _verdict_json(verdict),
            "drift": self.drift.to_json() if self.drift else None,
            "transient": self.transient,
            "timing": self.timing,
            "notes": list(self.notes),
            "run_dir": str(self.run_dir) if self.run_dir else None,
            "header": str(self.header) if self.header else None,
            "interrupted": self.interrupted,
            "space_size": self.space_size,
            "db": str(self.db_path),
            "transfer": self.prior.to_json() if self.prior and self.prior.tasks else None,
            "warnings": list(self.warnings),
            "failures": [f.to_json() for f in self.failures],
            "gave_up": self.gave_up,
            "wall_breakdown": self.wall_breakdown.to_json() if self.wall_breakdown else None,
            "devices": [d.to_json() for d in self.devices],
            "devices_lost": self.devices_lost,
        }


def _verdict_json(verdict: Verdict | None) -> dict | None:
    if verdict is None:
        return None
    return {
        "rounds": verdict.rounds,
        "contenders": [c.to_json() for c in verdict.contenders],
        "baseline_error": verdict.baseline_error,
    }


ProgressCallback = Callable[[TuneProgress], None]


class NoCudaDevice(AnnotuneError):
    """A CUDA tune on a machine without a CUDA GPU: not a mistake in the input but in where it
    runs, so the command line exits with 1, not 2."""


def kernel_mode(problem: Problem, mode: str) -> bool:
    """Whether `mode` ("program", "kernel" or "auto": kernel when the source declares one)
    launches a kernel in process rather than running the program."""
    if mode not in ("program", "kernel", "auto"):
        raise AnnotuneError(f"unknown mode {mode!r} (expected program, kernel or auto)")
    return mode == "kernel" or (mode == "auto" and bool(problem.kernels))


def _require_cuda_device(problem: Problem, options: TuneOptions) -> None:
    """Stop a tune of a CUDA program (or a kernel) at once when this machine has no CUDA GPU:
    every run would fail, and the failures would be timed and stored. The driver is asked
    (nvidia-smi), never `ANNOTUNE_DEVICE` or `--device`: they name a GPU, they cannot make one."""
    launches_kernel = kernel_mode(problem, options.mode) and bool(problem.kernels)
    if (problem.language == "cuda" or launches_kernel) and gpu_name() is None:
        raise NoCudaDevice(
            f"{problem.source} is CUDA, and this machine has no CUDA GPU (nvidia-smi finds "
            "none): every run would fail",
            hint="check that the variants compile with --compile-only (--arch sm_XY picks "
            "the GPU architecture)",
        )


@dataclass(frozen=True)
class Devices:
    """Where a tune measures when not on this machine's own GPU (a Ray cluster's devices, or
    a replay device): the device name its study and header go by; the measurer of the steps
    that take one device (the baseline, retried failures, the final check), which also keys
    the study; the compile settings its GPU needs; and the pool the search measures on
    concurrently (None: the sequential loop on `measurer`). With `replay` nothing is compiled.
    `stop`, once set, interrupts the tune as Ctrl-C does (a tune in another thread)."""

    name: str
    measurer: Any  # a _KernelMeasurer, _ProgramMeasurer, ReplayMeasurer or a device's proxy
    compiler: CompilerCommand | None = None
    nvrtc_arch: tuple[int, int] | None = None
    pool: DevicePool | None = None
    replay: ReplayTable | None = None
    stop: Event | None = None
    learn_live: bool = False  # other kinds tune at the same time: learn from them as they go


def tune(
    problem: Problem, options: TuneOptions, on_progress: ProgressCallback | None = None
) -> TuneReport:
    """Tune `problem` on this machine and write the winning configuration's header.

    Ctrl-C (KeyboardInterrupt) stops the search cleanly: what was measured is kept and the
    best-so-far header is still written (with no speedup claimed: nothing was re-checked); the
    report says `interrupted`. NoCudaDevice, before anything is built, for a CUDA program on a
    machine without a GPU. With `options.replay` the one recording is served by a replay
    device here (no GPU needed); with `options.ray` the devices are a Ray cluster's
    (`annotune.session.distributed.tune_devices`), and this is the report of their one kind.
    """
    if options.ray:
        from annotune.session.distributed import tune_devices

        (report,) = tune_devices(problem, options, on_progress, one_kind=True)
        return report
    if options.replay:
        return tune_on(problem, options, replay_devices(problem, options), on_progress)
    _require_cuda_device(problem, options)
    return tune_on(problem, options, None, on_progress)


def replay_devices(problem: Problem, options: TuneOptions) -> Devices:
    """The one replay device of a tune without Ray: `options.replay`'s one recording."""
    if len(options.replay) != 1:
        raise AnnotuneError("several --replay recordings are several kinds of device: add --ray")
    table = load_table(options.replay[0], problem_space(problem).names)
    measurer = ReplayMeasurer(table, options.replay_delay)
    return Devices(table.device, measurer, replay=table)


def tune_on(
    problem: Problem,
    options: TuneOptions,
    devices: Devices | None,
    on_progress: ProgressCallback | None = None,
) -> TuneReport:
    """`tune` on `devices` (None: this machine's GPU, or its CPU), with no check that a GPU
    is there. A pool of devices that is lost entirely ends the search as Ctrl-C does (what was
    measured is kept; no final check), and the report's `devices_lost` says why."""
    space = problem_space(problem)
    rng = np.random.default_rng(options.seed)
    legal, legal_count = space.search_rows(rng)
    candidates = Candidates(space.decode(legal), space.names)
    device = options.device or (devices.name if devices else current_device_name())
    config = Path(problem.config_file) if problem.config_file else None
    gpus = user_table(options.gpus, config)
    resolved = resolve(device, gpus)
    # A stand-in's features are resolved again by `gather_prior`, which says whose they are.
    target = None if resolved.warnings else resolved.features()
    baseline = _baseline(space, options.reference)
    place = workspace(problem.source)
    if options.db_path is not None:
        _require_db_directory(options.db_path)
    db_path = options.db_path or place.db_path
    moved = place.warning if options.db_path is None or options.cache_dir is None else ""
    stopwatch = _Stopwatch()
    with ExitStack() as resources:
        if devices is None:
            measurer, compiler, nvrtc_arch = open_measurer(problem, options, resources)
        else:
            measurer, compiler, nvrtc_arch = devices.measurer, devices.compiler, devices.nvrtc_arch
        if devices is not None and devices.replay is not None:
            jobs = devices.pool.devices() if devices.pool is not None else 1
            builder = ReplayBuilder(devices.replay, jobs)
        else:
            builder = resources.enter_context(
                Builder(
                    problem,
                    compiler=compiler,
                    cache_dir=options.cache_dir or place.cache_dir,
                    jobs=options.jobs,
                    timeout=options.compile_timeout,
                    nvrtc_arch=nvrtc_arch,
                )
            )
        db = resources.enter_context(Database(db_path))
        key = StudyKey.for_problem(
            problem,
            device=device,
            build={
                "compiler": builder.identity(),
                "run": measurer.to_json(),
                **({"inputs": inputs} if (inputs := builder.program_inputs()) else {}),
            },
        )
        study = db.open_study(
            key, fresh=options.fresh, device_features=target.to_json() if target else None
        )
        retry = db.forget_failures(study) if options.retry_failed else []

        def gather() -> Prior:
            """Other GPUs' results as they are now (again while other kinds tune)."""
            return gather_prior(
                candidates,
                key,
                target,
                db=db,
                files=options.transfer_from,
                rng=np.random.default_rng([options.seed, 1]),
                gpus=gpus,
            )

        prior = Prior()
        if options.transfer and options.strategy in TRANSFER_STRATEGIES:
            prior = gather()
        live = (
            devices is not None
            and devices.learn_live
            and options.transfer
            and options.strategy in TRANSFER_STRATEGIES
        )
        strategy = (
            create("transfer", **prior.options())
            if prior.tasks or live
            else create(options.strategy)
        )
        session = _Session(
            problem, space, legal, db, study, builder, measurer, baseline, options, on_progress
        )
        if live:
            session.live = _LiveTransfer(strategy, prior, gather)
        session.stopwatch = stopwatch
        compiler_warnings = (builder.nvrtc_unavailable,) if builder.nvrtc_unavailable else ()
        session.progress = TuneProgress(
            device,
            legal_count,
            options.budget,
            strategy.name,
            transfer_from=prior.sources,
            warnings=(moved,) * bool(moved)
            + prior.warnings
            + measurer.warnings
            + compiler_warnings
            + _unrecorded(devices, space, legal),
            objective=options.objective,
        )
        pool = devices.pool if devices is not None else None
        flight = _Flight(session, pool, devices.stop) if pool is not None else None
        interrupted = False
        try:
            known = session.measure_baseline()
            if session.baseline_failed:
                return session.finish(interrupted, db_path, session.prior(prior))
            known += session.measure([*_rows(space, legal, [m.params for m in retry])])
            left = None if options.budget is None else options.budget - session.progress.evaluations
            budget = Budget(max(0, left) if left is not None else None, options.seconds)
            search = _KnownFirst(strategy, known, stopwatch)
            if flight is None or options.sync:
                run_search(
                    search,
                    candidates,
                    session.measure if flight is None else partial(measure_whole, flight),
                    budget=budget,
                    rng=rng,
                    batch_size=session.batch_size,
                    on_batch=session.after_batch,
                )
            else:
                run_concurrent_search(
                    search, candidates, flight, budget=budget, rng=rng, on_batch=session.after_batch
                )
            if flight is not None:
                flight.drain()
        except KeyboardInterrupt:
            interrupted = True
        except DevicesLost as error:
            interrupted = True  # no device is left for the final check
            session.devices_lost = error.message
        finally:
            if flight is not None:
                flight.abandon()
        return session.finish(interrupted, db_path, session.prior(prior))


def _unrecorded(devices: Devices | None, space: Space, legal: np.ndarray) -> tuple[str, ...]:
    """A warning when the replay recording lacks legal configurations of the space (each is a
    failure, "not in the recording", if the search asks for it)."""
    table = devices.replay if devices is not None else None
    missing = table.missing(space.to_dicts(legal)) if table is not None else 0
    if not missing:
        return ()
    return (
        f"{missing} of the {len(legal)} legal configurations are not in the recording "
        f"{table.name}: each fails as 'not in the recording' when the search asks for it",
    )


def _require_db_directory(db_path: Path) -> None:
    """A database the user names goes in a directory that exists: a mistyped --db is an
    error, not a new directory tree (the default place is made: it is annotune's own)."""
    directory = db_path.parent
    if not directory.is_dir():
        raise AnnotuneError(
            f"{db_path}: there is no directory {directory} to hold the results database",
            hint=f"create it (mkdir -p {directory}), or pick another --db",
        )


def _claim_lifetime(options: TuneOptions) -> float:
    """The longest a measurement may take, twice (a transient failure is rebuilt and run
    again): after that a claim on it lapses even if its tune's process seems alive."""
    run = options.run
    return 2.0 * (options.compile_timeout + run.timeout * (run.warmup + run.max_repeats + 1))


def _baseline(space: Space, reference: dict[str, Number] | None) -> dict[str, Number]:
    """The configuration every other is compared with: the user's reference, else the default.
    AnnotuneError when the reference is not a complete, legal configuration of the space."""
    default = space.to_dicts(space.default_row()[None, :])[0]
    if reference is None:
        return default
    unknown = sorted(set(reference) - set(default))
    if unknown:
        raise AnnotuneError(f"--reference names no parameter {', '.join(unknown)}")
    row = space.index_row({**default, **reference})
    if row is None or not space.is_legal(row[None, :])[0]:
        raise AnnotuneError(
            f"--reference {reference} is not a legal configuration of the space",
            hint="every value must be in its parameter's domain and meet the constraints",
        )
    return space.to_dicts(row[None, :])[0]


def _rows(space: Space, legal: np.ndarray, configs: Sequence[Mapping[str, Number]]) -> list[int]:
    """The rows of `legal` that hold `configs` (those that are not legal now are skipped): one
    sort of the rows as byte strings, then a binary search for each config, so that resuming
    many configurations in a large space is not configurations x rows."""
    wanted = [row for row in map(space.index_row, configs) if row is not None]
    if not wanted or not len(legal):
        return []

    def keys(rows: np.ndarray) -> np.ndarray:
        rows = np.ascontiguousarray(rows, dtype=legal.dtype)
        return rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()

    rows = keys(legal)
    order = np.argsort(rows, kind="stable")
    ordered = rows[order]
    queries = keys(np.array(wanted))
    at = np.minimum(np.searchsorted(ordered, queries), len(ordered) - 1)
    return [int(order[i]) for i, q in zip(at, queries, strict=True) if ordered[i] == q]


def open_measurer(problem: Problem, options: TuneOptions, resources: ExitStack):
    """The runner for this problem, the compile command it needs, and in kernel mode the
    architecture the builder compiles cubins for (with NVRTC, unless the user named a compile
    command)."""
    kernel = kernel_mode(problem, options.mode)
    monitor, why_not = None, ""
    if kernel or problem.language == "cuda":
        monitor, why_not = open_monitor()
        if monitor is not None:
            resources.callback(monitor.close)
    warnings = (f"GPU conditions (clock, temperature, power) are not recorded: {why_not}",)
    warnings = warnings if why_not else ()
    meter = None
    if options.objective != "time":
        # The GPU's board for kernels and CUDA programs; the host's packages for the rest.
        on_gpu = kernel or problem.language == "cuda"
        meter = energy.open_meter(["nvml"] if on_gpu else ["rapl"], powercap=energy.POWERCAP)
        resources.callback(meter.close)
    if not kernel:
        # Where annotune was started, unless told: input files named in arguments are found
        # where the user expects them, whatever directory the source is in.
        spec = replace(options.run, cwd=options.run.cwd or Path.cwd())
        runner = ProgramRunner(spec, monitor, meter)
        once = ProgramRunner(replace(spec, repeats=1, max_repeats=1), monitor, meter)
        measurer = _ProgramMeasurer(runner, once, check=options.check, warnings=warnings)
        return measurer, options.compiler, None
    spec = _kernel_spec(problem, options.kernel)
    backend = resources.enter_context(select_backend(options.backend))

    def runner(sampling: Sampling) -> KernelRunner:
        return KernelRunner(
            spec,
            backend,
            warmup=options.run.warmup,
            sampling=sampling,
            seed=options.seed,
            rtol=options.run.check_tolerance,
            timeout=options.run.timeout,
            flush_l2=options.flush_l2,
            monitor=monitor,
            meter=meter,
        )

    fixed = Sampling(min_runs=RECHECK_SAMPLES, max_runs=RECHECK_SAMPLES)
    # The final check's rounds are its energy samples: one energy batch a round is enough.
    recheck_runner = runner(fixed)
    recheck_runner.energy_batches = 1
    measurer = _KernelMeasurer(
        runner(options.run.sampling), recheck_runner, check=options.check, warnings=warnings
    )
    return measurer, options.compiler, backend.compute_capability()


def _kernel_spec(problem: Problem, name: str | None) -> KernelSpec:
    names = [k.name for k in problem.kernels]
    where = Location(str(problem.source), 1, 1)
    if not names:
        raise AnnotuneError("kernel mode needs a '#pragma annotune kernel NAME ...'", where)
    if name is None:
        if len(names) > 1:
            raise AnnotuneError(
                f"{len(names)} kernels are declared ({', '.join(names)}); choose one with --kernel",
                where,
            )
        return problem.kernels[0]
    for spec in problem.kernels:
        if spec.name == name:
            return spec
    raise AnnotuneError(
        f"no '#pragma annotune kernel {name}' (declared: {', '.join(names)})", where
    )


def run_key(spec: RunSpec | KernelSpec, params: Mapping[str, Number]) -> str | None:
    """What of a run `params` change besides its program: a program's environment, a
    kernel's launch (None when it cannot be computed). Two configurations of one program
    with the same run key are one measurement."""
    if isinstance(spec, RunSpec):
        return repr(sorted(spec.environment(params).items()))
    try:
        return repr(spec.launch(params))
    except LaunchError:
        return None


def run_environment(spec: RunSpec | KernelSpec, params: Mapping[str, Number]) -> str:
    """The header's line on the environment `params` ran in: "OMP_NUM_THREADS=4, ..." ("" for
    a kernel: no program is started, no environment is set)."""
    if not isinstance(spec, RunSpec):
        return ""
    return ", ".join(f"{k}={v}" for k, v in spec.environment(params).items())


class _ProgramMeasurer:
    """Program mode: the baseline's `annotune-check:` value is every other run's reference."""

    def __init__(self, runner: ProgramRunner, once: ProgramRunner, *, check: bool, warnings: tuple):
        self.runner = runner
        self.once = once  # one timed run: a round of the final check
        self.check = check
        self.warnings: tuple[str, ...] = warnings
        self.reference: float | None = None

    def to_json(self) -> dict:
        return {**self.runner.to_json(), "check": self.check}

    @property
    def run_dir(self) -> Path | None:
        return self.runner.spec.cwd

    def environment(self, params: Mapping[str, Number]) -> str:
        return run_environment(self.runner.spec, params)

    @property
    def run_spec(self) -> RunSpec:
        return self.runner.spec

    def run_of(self, params: Mapping[str, Number]) -> str | None:
        return run_key(self.runner.spec, params)

    def measure(self, build: BuildResult, stop_above: float | None = None) -> Measurement:
        return self.runner.measure(build, self.reference, stop_above)

    def sample(self, build: BuildResult) -> Measurement:
        return self.once.measure(build, self.reference)

    def adopt_baseline(self, measurement: Measurement, rebuild: Callable[[], BuildResult]) -> None:
        if self.check and measurement.status == "ok":
            self.reference = measurement.compile_info.get("check")


class _KernelMeasurer:
    """Kernel mode: the baseline configuration's output arrays are the reference."""

    def __init__(self, runner: KernelRunner, once: KernelRunner, *, check: bool, warnings: tuple):
        self.runner = runner
        self.once = once  # a few timed launches: a round of the final check
        self.check = check
        self.warnings: tuple[str, ...] = warnings
        self.reference: KernelReference | None = None
        self._last: KernelReference | None = None

    def to_json(self) -> dict:
        return {**self.runner.to_json(), "check": self.check}

    run_dir = None  # the kernel runs in annotune's process

    def environment(self, params: Mapping[str, Number]) -> str:
        return run_environment(self.runner.spec, params)

    @property
    def run_spec(self) -> KernelSpec:
        return self.runner.spec

    def run_of(self, params: Mapping[str, Number]) -> str | None:
        return run_key(self.runner.spec, params)

    def measure(self, build: BuildResult, stop_above: float | None = None) -> Measurement:
        measurement, self._last = self.runner.measure(build, self.reference, stop_above)
        return measurement

    def sample(self, build: BuildResult) -> Measurement:
        return self.once.measure(build, self.reference)[0]

    def adopt_baseline(self, measurement: Measurement, rebuild: Callable[[], BuildResult]) -> None:
        """Outputs are not stored: when the baseline was reused, run it once more for them."""
        if not self.check or measurement.status != "ok":
            return
        if self._last is None:
            _, self._last = self.runner.measure(rebuild(), None)
        self.reference = self._last


LIVE_MIN_MEASURED = 20
"""Other GPUs' measurements before a search learns from them mid-tune."""

LIVE_GROWTH = 1.5
"""How much their measurements must have grown before the space is ranked again."""

LIVE_EVERY = 10
"""This tune's own measurements between two looks at the other GPUs' studies."""


class _LiveTransfer:
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


class _KnownFirst(Strategy):
    """A strategy told of results measured before the search (the default configuration).

    They are told once the strategy starts, and filtered out of what it asks for, so they
    cost no budget and are never measured twice.
    """

    def __init__(self, inner: Strategy, known: Sequence[Result], stopwatch: _Stopwatch):
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


class _Session:
    """The state of one `tune` call: what was measured, reused, and the best so far."""

    def __init__(
        self,
        problem: Problem,
        space: Space,
        legal: np.ndarray,
        db: Database,
        study: Study,
        builder: Builder,
        measurer: _ProgramMeasurer | _KernelMeasurer,
        baseline: dict[str, Number],
        options: TuneOptions,
        on_progress: ProgressCallback | None,
    ):
        self.problem = problem
        self.space = space
        self.legal = legal
        self.db = db
        self.study = study
        self.builder = builder
        self.measurer = measurer
        self.options = options
        self.on_progress = on_progress
        self.known: dict[str, Measurement] = {}
        self.programs: dict[str, Measurement] = {}
        for measurement in db.measurements(study):
            self._learn(measurement)
        self.seen: set[str] = set()
        self.invalid = 0
        self.failures: dict[tuple[str, str], FailureKind] = {}
        self.gave_up = False
        self.default_params = space.to_dicts(space.default_row()[None, :])[0]
        self.baseline_params = baseline
        self.baseline: Measurement | None = None
        self.baseline_failed = ""
        self.drift: list[float] = []
        self.since_drift = 0
        self.timing: set[str] = set()
        self.throttled: Counter[str] = Counter()
        self.owner = Owner.here()
        self.lifetime = _claim_lifetime(options)
        self.by_others = 0  # configurations another tune of this study measured meanwhile
        self.fallbacks: list[str] = []  # why NVRTC did not compile each variant nvcc compiled
        self.devices_lost = ""  # why the search stopped early: every device was lost
        self.live: _LiveTransfer | None = None  # learning from other kinds as they measure
        self.unmetered = 0  # configurations that ran with no energy, tuning for energy
        self.stopwatch = _Stopwatch()
        self.through_env = env_only_params(problem)  # one binary for all their values
        self.progress: TuneProgress

    def batch_size(self) -> int:
        """How many configurations to ask for next: as many as compile at once until one has
        run correctly (a program that fails every time is given up after `GIVE_UP_AFTER`),
        then `PIPELINE_BATCH`, so that compiles run ahead of the runs."""
        jobs = max(1, self.builder.jobs)
        return jobs if self.progress.best_time is None else max(PIPELINE_BATCH, jobs)

    def _report(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.progress)

    def measure_baseline(self) -> list[Result]:
        """Measure the baseline first: its time is what the report compares with, and its
        output what every other configuration's is checked against. Without a working
        baseline nothing can be checked, so the tune stops unless checking is off."""
        (measurement,) = self._measure_configs([self.baseline_params])
        if measurement.status == "ok":
            self.baseline = measurement
            self.progress.default_time = measurement.time
        elif self.options.check:
            self.baseline_failed = f"{measurement.status}: {measurement.error}".strip(": ")
            return []
        self.measurer.adopt_baseline(
            measurement, lambda: self.builder.build([self.baseline_params])[0]
        )
        self._report()
        rows = _rows(self.space, self.legal, [self.baseline_params])
        return [_result(row, measurement, self.options.objective) for row in rows]

    def measure(self, indices: Sequence[int]) -> list[Result]:
        configs = self.space.to_dicts(self.legal[np.asarray(indices, dtype=np.int64)])
        measurements = self._measure_configs(configs)
        objective = self.options.objective
        return [
            _result(index, m, objective) for index, m in zip(indices, measurements, strict=True)
        ]

    def _measure_configs(self, configs: list[dict[str, Number]]) -> list[Measurement]:
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
                known = self._stored(configs[i])
                if known is not None:
                    found[i] = known
                    self._count(configs[i], known, reused=True)
                elif self.db.claim(self.study, configs[i], self.owner, lifetime=self.lifetime):
                    mine.append(i)
                else:
                    held.append(i)
            measured = self._measure_claimed([configs[i] for i in mine]) if mine else []
            found.update(zip(mine, measured, strict=True))
            if held and not mine:
                time.sleep(CLAIM_POLL_S)  # all in other tunes' hands: give them time
            pending = held
        return [found[i] for i in range(len(configs))]

    def _stored(self, params: Mapping[str, Number]) -> Measurement | None:
        """The measurement of `params` this tune knows, or one another tune stored since."""
        known = self.known.get(config_key(params))
        if known is None:
            known = self.db.lookup(self.study, params)
            if known is not None:
                self._learn(known)
                self.by_others += 1
        return known

    def _learn(self, measurement: Measurement) -> None:
        """Know a stored measurement: served again, and its program's for configurations of
        the same program."""
        self.known[config_key(measurement.params)] = measurement
        program = measurement.compile_info.get("program")
        if program and "same_program_as" not in measurement.compile_info:
            self.programs.setdefault(program, measurement)

    def _measure_claimed(self, configs: list[dict[str, Number]]) -> list[Measurement]:
        """Build the configurations this tune claimed, in parallel, and measure each as soon
        as its compile is done (completion order), so that compiles run ahead of the runs.
        Each claim ends with its recorded measurement, or is released: at once after a
        transient failure, and for the rest when anything (Ctrl-C) stops the batch."""
        done: dict[int, Measurement] = {}
        try:
            with closing(self.build_iter(configs)) as builds:
                while True:
                    with self.stopwatch.part("compile"):
                        landed = next(builds, None)
                    if landed is None:
                        break
                    index, build = landed
                    done[index] = self._measure_built(self._built(build))
        finally:
            for index, params in enumerate(configs):
                if index not in done:
                    self.db.release(self.study, params, self.owner)
        return [done[i] for i in range(len(configs))]

    def build_iter(self, configs: list[dict[str, Number]]) -> Iterator[tuple[int, BuildResult]]:
        """`Builder.build_iter`, but configurations that differ only in parameters set through
        the environment are built once, not once each in parallel: they are one binary, which
        each runs with its own environment. The others come right after the one built, as
        served from the cache."""
        groups: dict[str, list[int]] = {}
        for index, params in enumerate(configs):
            binary = {k: v for k, v in params.items() if k not in self.through_env}
            groups.setdefault(config_key(binary), []).append(index)
        members = list(groups.values())
        with closing(self.builder.build_iter([configs[g[0]] for g in members])) as builds:
            for position, build in builds:
                first, *others = members[position]
                yield first, build
                for other in others:
                    yield other, replace(build, params=dict(configs[other]), cached=True)

    def _built(self, build: BuildResult) -> BuildResult:
        """Note what a build says of the compile: its pool time, and an NVRTC fallback."""
        if not build.cached:
            self.stopwatch.add("compiled", build.seconds)
            if build.fallback:
                self.fallbacks.append(build.fallback)
        return build

    def _build(self, params: Mapping[str, Number]) -> BuildResult:
        """One configuration's build outside a batch (a retry, the drift check's baseline)."""
        with self.stopwatch.part("compile"):
            return self._built(self.builder.build([dict(params)])[0])

    def _timed_measure(self, measure: Callable[[], Measurement]) -> Measurement:
        """A runner's measurement, its wall time and set-up counted in the tune's breakdown."""
        with self.stopwatch.part("measure"):
            measurement = measure()
        self.stopwatch.book(measurement)
        return measurement

    def _measure_built(self, build: BuildResult) -> Measurement:
        """Measure one build, or serve it another configuration's measurement of the same
        program; record it."""
        program = self._program(build)
        same = self.programs.get(program) if program else None
        if same is not None:
            return self._keep(_shared(same, build.params), shared=True)
        measurement = self._measure_one(build)
        if program and not measurement.transient:
            info = {**measurement.compile_info, "program": program}
            measurement = replace(measurement, compile_info=info)
            self.programs[program] = measurement
        measurement = self._keep(measurement, shared=False)
        self._check_drift()
        return measurement

    def _keep(self, measurement: Measurement, *, shared: bool) -> Measurement:
        """Record a measurement, which ends its claim, and count it; a transient failure is
        not recorded and its claim released, so another tune may measure it at once. When
        another tune recorded the configuration first, its measurement is the study's."""
        if measurement.transient:
            self.db.release(self.study, measurement.params, self.owner)
        else:
            if not self.db.record(self.study, measurement):
                measurement = self.db.lookup(self.study, measurement.params) or measurement
            self.known[config_key(measurement.params)] = measurement
        self._count(measurement.params, measurement, reused=False, shared=shared)
        return measurement

    def _program(self, build: BuildResult) -> str:
        """What makes two runs the same: the preprocessed program and what the run takes
        from the parameters besides it; "" when either is unknown."""
        run = self.measurer.run_of(build.params) if build.program else None
        if run is None:
            return ""
        return hashlib.sha256(f"{build.program}\0{run}".encode()).hexdigest()

    def _stop_above(self) -> float | None:
        """The time past which a configuration gets only the fewest runs: it is no contender
        for time (`CLEARLY_SLOWER`). None for energy: a slower configuration may use less."""
        best = self.progress.best_time
        if best is None or self.options.objective != "time":
            return None
        return CLEARLY_SLOWER * best

    def _measure_one(self, build: BuildResult) -> Measurement:
        """Measure one build; a transient failure is tried once more (rebuilt if the compile
        was what failed) before it is given up for this run, unstored."""
        stop_above = self._stop_above()
        measurement = self._timed_measure(lambda: self.measurer.measure(build, stop_above))
        if measurement.transient:
            if build.transient:
                build = self._build(build.params)
            again = build
            measurement = self._timed_measure(lambda: self.measurer.measure(again, stop_above))
        self._noted(measurement)
        return measurement

    def _noted(self, measurement: Measurement) -> None:
        """Note where a new measurement's time came from and whether the GPU throttled."""
        if measurement.status == "ok":
            self.timing.add(measurement.compile_info.get("timing", "events"))
            self.throttled.update(measurement.compile_info.get("gpu", {}).get("throttled", ()))

    def drift_due(self) -> bool:
        """Count a new measurement; True every `drift_every` of them (with a baseline)."""
        every = self.options.drift_every
        if not every or self.baseline is None:
            return False
        self.since_drift += 1
        if self.since_drift < every:
            return False
        self.since_drift = 0
        return True

    def _check_drift(self) -> None:
        """Every `drift_every` new measurements, measure the baseline again (not stored: the
        study keeps its first measurement) to see whether the machine's speed moved."""
        if not self.drift_due():
            return
        build = self._build(self.baseline_params)
        again = self._timed_measure(lambda: self.measurer.measure(build))
        if again.status == "ok":
            self.drift.append(again.time)

    def _count(
        self, params: dict[str, Number], m: Measurement, *, reused: bool, shared: bool = False
    ) -> None:
        key = config_key(params)
        if key in self.seen:
            return
        self.seen.add(key)
        p = self.progress
        p.evaluations += 1
        p.reused += reused
        p.same_program += shared
        p.measured += not (reused or shared)
        if m.transient:
            p.transient += 1
            if p.transient == 1:
                p.warnings += (
                    f"a transient failure, not stored (measured again next run): {m.error}",
                )
        elif m.status == "ok":
            value = objective_value(m, p.objective)
            if value is not None and (p.best_value is None or value < p.best_value):
                p.best_value, p.best_time, p.best_params = value, m.time, dict(params)
            elif value is None and not self.unmetered:
                p.warnings += (
                    f"{params} ran but has no energy ({_energy_error(m)}): the search takes "
                    "it as failed; so will any other such configuration",
                )
            self.unmetered += value is None
        else:
            self.invalid += 1
            p.compile_failures += m.status == "compile_error"
            p.run_failures += m.status != "compile_error"
            kind = failure_kind(m.status, m.error)
            known = self.failures.get(kind)
            if known is None:
                self.failures[kind] = FailureKind(m.status, 1, m.error, dict(params))
                p.failures.append(self.failures[kind])
            else:
                self.failures[kind] = replace(known, count=known.count + 1)
        self._report()

    def after_batch(self, results: Sequence[Result], outcome, strategy: Strategy) -> bool:
        """True (stop) once `GIVE_UP_AFTER` configurations and nothing else all failed the
        same way: then the program or its environment is broken (no GPU, a missing input), not
        the configurations, and more measurements would only repeat the failure."""
        self.progress.iteration = int(strategy.progress().get("iteration", 0))
        if self.live is not None and self.live.learn(self.progress.evaluations):
            self.progress.transfer_from = self.live.prior.sources
        self._report()
        kinds = list(self.failures.values())
        self.gave_up = (
            self.progress.best_time is None and len(kinds) == 1 and kinds[0].count >= GIVE_UP_AFTER
        )
        return self.gave_up

    def prior(self, started_with: Prior) -> Prior:
        """What the search learned from other GPUs: the last prior it took."""
        return self.live.prior if self.live is not None else started_with

    def _recheck(self) -> Verdict:
        """The final check of the best `recheck` configurations against the baseline."""
        self.progress.phase = "recheck"
        self.progress.recheck_rounds = self.options.recheck_rounds
        self._report()
        baseline_key = config_key(self.baseline_params)
        baseline = self.known.get(baseline_key)
        programs = {_program_of(baseline)} if baseline is not None else set()
        contenders: list[dict[str, Number]] = []
        objective = self.options.objective
        ok = (
            m
            for k, m in self.known.items()
            if objective_value(m, objective) is not None and k != baseline_key
        )
        for m in sorted(ok, key=lambda m: objective_value(m, objective)):  # type: ignore[arg-type, return-value]
            program = _program_of(m)
            if len(contenders) < self.options.recheck and program not in programs:
                contenders.append(dict(m.params))  # one per program: the same one twice
                programs.add(program)  # would be no second contender
        configs = [self.baseline_params, *contenders]
        builds = {config_key(configs[i]): build for i, build in self.build_iter(configs)}

        def sample(params: Mapping[str, Number]) -> float | str:
            m = self.measurer.sample(builds[config_key(params)])
            if m.status != "ok":
                return f"{m.status}: {m.error}"
            value = objective_value(m, objective)
            return value if value is not None else f"no energy: {_energy_error(m)}"

        return recheck(
            self.baseline_params,
            contenders,
            sample,
            rounds=self.options.recheck_rounds,
            min_speedup=1.0 + self.options.run.stable_within,
            on_round=self._recheck_round_done,
        )

    def _recheck_round_done(self, done: int) -> None:
        self.progress.recheck_round = done
        self._report()

    def finish(self, interrupted: bool, db_path: Path, prior: Prior) -> TuneReport:
        p = self.progress
        options = self.options
        search_best = None
        if p.best_params is not None:
            search_best = Outcome.of(p.best_params, self.known.get(config_key(p.best_params)))
        verdict = None
        checkable = search_best is not None and self.baseline is not None and options.recheck
        if checkable and not interrupted:
            try:
                with self.stopwatch.part("recheck"):
                    verdict = self._recheck()
            except KeyboardInterrupt:
                interrupted = True
        winner = verdict.winner if verdict is not None else p.best_params
        best = Outcome.of(winner, self.known.get(config_key(winner))) if winner else None
        default = Outcome.of(self.default_params, self.known.get(config_key(self.default_params)))
        header = None
        if best is not None and not self.baseline_failed and options.write_header:
            header = tuned_header_path(self.problem.source, p.device, options.out_dir)
            text = render_header(
                self.problem,
                best.params,
                device=p.device,
                space_size=p.space_size,
                measurements=p.evaluations,
                default_time=p.default_time,
                best_time=best.time,
                tool_version=__version__,
                speedup=speedup_claim(verdict, options.objective),
                note=_objective_note(options.objective, best, default),
                environment=self.measurer.environment(best.params),
            )
            try:
                write_if_changed(header, text)
            except AnnotuneError as error:  # checked writable before the tune: say, keep the report
                self.progress.warnings += (f"the tuned header was not written: {error.message}",)
                header = None
        drift = self._drift()
        baseline = None
        if self.baseline_params != self.default_params:
            baseline = Outcome.of(self.baseline_params, self.baseline)
        return TuneReport(
            device=p.device,
            evaluations=p.evaluations,
            reused=p.reused,
            same_program=p.same_program,
            invalid=self.invalid,
            best=best,
            default=default,
            header=header,
            interrupted=interrupted,
            space_size=p.space_size,
            db_path=db_path,
            prior=prior,
            warnings=p.warnings,
            failures=tuple(sorted(self.failures.values(), key=lambda f: -f.count)),
            gave_up=self.gave_up,
            baseline=baseline,
            baseline_failed=self.baseline_failed,
            recheck=verdict,
            search_best=search_best,
            drift=drift,
            transient=p.transient,
            timing="+".join(sorted(self.timing)),
            notes=self._notes(verdict, drift, interrupted),
            run_dir=self.measurer.run_dir,
            wall_breakdown=self.stopwatch.breakdown(self._busy_on()),
            devices=p.devices,
            devices_lost=self.devices_lost,
            objective=options.objective,
        )

    def _busy_on(self) -> str:
        """What the timed regions kept busy: "GPU" for GPU code (CUDA, OpenACC, a kernel) on a
        device that is no host CPU, else "host"."""
        problem = self.problem
        gpu_code = (
            kernel_mode(problem, self.options.mode)
            or problem.language == "cuda"
            or "acc" in problem.pragmas
        )
        return "GPU" if gpu_code and not self.progress.device.startswith(CPU_PREFIX) else "host"

    def _drift(self) -> Drift | None:
        if not self.drift or self.baseline is None or self.baseline.time is None:
            return None
        first = self.baseline.time
        largest = max(((t - first) / first for t in self.drift), key=abs)
        interval = self.baseline.interval
        within = self.options.run.stable_within
        outside = [
            not (interval[0] <= t <= interval[1]) if interval else abs(t - first) > within * first
            for t in self.drift
        ]
        return Drift(tuple(self.drift), largest, any(outside))

    def _notes(self, verdict: Verdict | None, drift: Drift | None, interrupted: bool) -> tuple:
        notes = []
        if self.baseline_failed:
            notes.append(
                f"the baseline {self.baseline_params} failed ({self.baseline_failed}): there is "
                "nothing to check outputs against or to compare times with"
            )
        elif self.baseline is None:
            notes.append("the baseline failed; outputs are not checked and no speedup is claimed")
        if verdict is not None and verdict.baseline_error:
            notes.append(
                f"the baseline failed in the final check ({verdict.baseline_error}); "
                "no speedup is claimed"
            )
        elif verdict is not None and verdict.kept_baseline:
            notes.append(
                "no configuration was significantly faster than the baseline in the final "
                "check; the baseline is kept"
            )
        elif verdict is None and self.progress.best_params is not None and self.baseline:
            why = "interrupted" if interrupted else "--recheck 0"
            why = "every device was lost" if self.devices_lost else why
            notes.append(f"no speedup is claimed: the final check did not run ({why})")
        if drift is not None and drift.noisy:
            notes.append(
                f"noisy: the default's time moved by {drift.largest:+.1%} during the tune, "
                "outside its first measurement's 95% interval"
            )
        if "wall" in self.timing:
            notes.append(
                "times are the process's wall time, start-up included (no timing header and "
                "no --time-regex)"
            )
        if self.throttled:
            reasons = ", ".join(sorted(self.throttled))
            count = max(self.throttled.values())
            notes.append(f"the GPU was throttled ({reasons}) during {count} measurements")
        if not self.builder.dependency_tracking:
            notes.append(
                f"{self.builder.compiler.argv[0]} does not list the files it reads (-MD -MF): "
                "the compile cache sees the variant and its -I directories only, so rerun with "
                "--fresh after editing a header found some other way"
            )
        if not self.builder.verifies_values:
            notes.append(
                f"{self.builder.compiler.argv[0]} cannot be run to preprocess only (-E -dM): "
                "the tuned values were not checked to reach the compiler"
            )
        if self.fallbacks:
            notes.append(
                f"{len(self.fallbacks)} variants were compiled by nvcc because NVRTC could not "
                f"compile them (first: {self.fallbacks[0]})"
            )
        if self.by_others:
            notes.append(
                f"{self.by_others} configurations were measured by another annotune tuning the "
                "same study at the same time"
            )
        if self.progress.transient:
            notes.append(
                f"{self.progress.transient} transient failures were not stored; the next run "
                "measures them again"
            )
        lost = [d for d in self.progress.devices if d.lost]
        if lost and len(lost) < len(self.progress.devices):
            notes.append(
                f"{len(lost)} of {len(self.progress.devices)} devices were lost during the tune "
                f"({lost[0].name}: {lost[0].lost}); the others measured what they held"
            )
        return tuple(notes)


class _Flight:
    """A session's measurements in flight on a pool of devices: the concurrent search's
    `Measurements` (`annotune.session.concurrent`).

    Each configuration goes the sequential loop's way (`_Session._measure_configs`): served
    from what is known, else claimed, built, and handed to the pool; its measurement is
    recorded and told as it lands. A configuration of a program already in flight waits for
    that program's measurement instead of being measured again; a transient failure is tried
    once more; every `drift_every` new measurements the baseline is re-measured on the first
    device (the one that measures the baseline and the final check). `abandon` releases the
    claims of whatever is still in flight when the search ends early.
    """

    def __init__(self, session: _Session, pool: DevicePool, stop: Event | None):
        self.session = session
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
        session.progress.devices = pool.rates()

    def room(self, batch: int) -> int:
        return room(self.pool.devices(), self.pool.outstanding(), batch)

    def devices(self) -> int:
        return self.pool.devices()

    def start(self, rows: Sequence[int]) -> None:
        s = self.session
        configs = s.space.to_dicts(s.legal[np.asarray(rows, dtype=np.int64)])
        mine: list[tuple[int, dict[str, Number]]] = []
        for row, params in zip(rows, configs, strict=True):
            if self._served(row, params):
                continue
            if s.db.claim(s.study, params, s.owner, lifetime=s.lifetime):
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
            self.session.progress.devices = self.pool.rates()
        ready, self.ready = self.ready, []
        return ready

    def drain(self) -> None:
        """Wait for the drift checks still on a device once the search has all it asked for:
        their times belong in the report."""
        while self.pool.outstanding():
            self._receive(None)
        self.session.progress.devices = self.pool.rates()

    def _receive(self, timeout: float | None) -> None:
        """Wait up to `timeout` (None: until some lands) for the devices' work and record it;
        the wait is the tune's measuring time (the devices measure, the tune waits)."""
        with self.session.stopwatch.part("measure"):
            landed = self.pool.wait(timeout)
        for work, measurement in landed:
            self._landed(work, measurement)

    def abandon(self) -> None:
        """Release the claims of configurations that will not be recorded in this tune."""
        s = self.session
        for params in self.claimed.values():
            s.db.release(s.study, params, s.owner)
        self.claimed.clear()
        s.progress.devices = self.pool.rates()

    def _served(self, row: int, params: dict[str, Number]) -> bool:
        known = self.session._stored(params)
        if known is None:
            return False
        self.session._count(params, known, reused=True)
        self.ready.append(_result(row, known, self.session.options.objective))
        return True

    def _poll_held(self) -> None:
        """Configurations other tunes held: theirs once recorded, ours once let go."""
        s = self.session
        mine = []
        for row, params in list(self.held.items()):
            if self._served(row, params):
                del self.held[row]
            elif s.db.claim(s.study, params, s.owner, lifetime=s.lifetime):
                del self.held[row]
                self.claimed[row] = params
                mine.append((row, params))
        self._build(mine)

    def _build(self, mine: list[tuple[int, dict[str, Number]]]) -> None:
        """Build in parallel; hand each build to the pool as it lands."""
        if not mine:
            return
        s = self.session
        with closing(s.build_iter([params for _, params in mine])) as builds:
            while True:
                with s.stopwatch.part("compile"):
                    landed = next(builds, None)
                if landed is None:
                    break
                index, build = landed
                self._dispatch(mine[index][0], s._built(build))

    def _dispatch(self, row: int, build: BuildResult, tries: int = 0) -> None:
        s = self.session
        program = s._program(build)
        if program and tries == 0:
            same = s.programs.get(program)
            if same is not None:
                self._done(row, s._keep(_shared(same, build.params), shared=True))
                return
            if program in self.waiting:  # the same program is being measured
                self.waiting[program].append((row, build))
                return
            self.waiting[program] = []
        key = self._key()
        self.work[key] = (row, build, program, tries)
        self.pool.submit(Work(key, build, s._stop_above()))

    def _landed(self, work: Work, measurement: Measurement) -> None:
        s = self.session
        # Device seconds, averaged over the devices: shares of the tune's wall time.
        s.stopwatch.book(measurement, 1 / self.device_count)
        if work.key in self.drifts:
            self.drifts.discard(work.key)
            if measurement.status == "ok":
                s.drift.append(measurement.time)  # type: ignore[arg-type]
            return
        row, build, program, tries = self.work.pop(work.key)
        if measurement.transient and tries == 0:
            if build.transient:
                build = s._build(build.params)
            self._dispatch(row, build, tries=1)
            return
        s._noted(measurement)
        if program and not measurement.transient:
            info = {**measurement.compile_info, "program": program}
            measurement = replace(measurement, compile_info=info)
            s.programs[program] = measurement
        measurement = s._keep(measurement, shared=False)
        self._done(row, measurement)
        for other, other_build in self.waiting.pop(program, []) if program else []:
            if measurement.transient:  # the program has no measurement yet: measure it
                self._dispatch(other, other_build)
            else:
                self._done(other, s._keep(_shared(measurement, other_build.params), shared=True))
        self._check_drift()

    def _done(self, row: int, measurement: Measurement) -> None:
        self.claimed.pop(row, None)
        self.ready.append(_result(row, measurement, self.session.options.objective))

    def _check_drift(self) -> None:
        s = self.session
        if not s.drift_due():
            return
        key = self._key()
        self.drifts.add(key)
        self.pool.submit(Work(key, s._build(s.baseline_params), pinned=0))

    def _key(self) -> int:
        self.keys += 1
        return self.keys


def _result(row: int, measurement: Measurement, objective: str) -> Result:
    """What the strategy is told of a measurement: its objective's value, or why it has none
    (a failure; or, for energy, a run whose energy the meter could not vouch for)."""
    value = objective_value(measurement, objective) if measurement.status == "ok" else None
    if measurement.status == "ok" and value is None:
        return Result(row, None, f"no energy: {_energy_error(measurement)}")
    return Result(row, value, measurement.error)


def _energy_error(measurement: Measurement) -> str:
    said = measurement.compile_info.get("energy")
    error = said.get("error") if isinstance(said, dict) else None
    return error or "the runner measured none"


def _shared(measured: Measurement, params: Mapping[str, Number]) -> Measurement:
    """`measured`'s measurement for `params`, a configuration of the same program."""
    info = {**measured.compile_info, "same_program_as": dict(measured.params)}
    return replace(measured, params=dict(params), compile_info=info, created="")


def _program_of(measurement: Measurement) -> object:
    """The program a measurement ran: its hash, or its own params when there is none."""
    return measurement.compile_info.get("program") or config_key(measurement.params)


def speedup_claim(verdict: Verdict | None, objective: str = "time") -> str:
    """The header's speedup line: only what the final check measured (for energy or EDP,
    how many times less of it the winner takes than the baseline)."""
    if verdict is None or verdict.speedup is None:
        return ""
    if verdict.kept_baseline:
        return "none significant in an interleaved re-check; the baseline is kept"
    low, high = verdict.interval  # type: ignore[misc]
    what = "the baseline" if objective == "time" else OBJECTIVE_GAINS[objective]
    return (
        f"{verdict.speedup:.2f}x {what} (95% interval {low:.2f}-{high:.2f}, "
        f"interleaved re-check, {verdict.rounds} rounds)"
    )


def _objective_note(objective: str, best: Outcome, default: Outcome) -> str:
    """The header's line on what was minimised, when not time: the energies per run."""
    if objective == "time":
        return ""

    def joules(outcome: Outcome) -> str:
        return f"{outcome.energy:.4g} J" if outcome.energy is not None else "not measured"

    unit = OBJECTIVE_UNITS[objective]
    return (
        f"tuned for {objective} ({unit}); energy per run: {joules(best)}, default {joules(default)}"
    )
