"""The tuning loop: strategy, builder, runner and database joined, one batch at a time.

When the database (or result files the user names) holds measurements of the same source and
space on other GPUs, the search learns from them (`annotune.transfer.prior.gather_prior`): the
`transfer` strategy ranks the space with a model of those GPUs, measures the most promising
configurations first and goes on as IterML (see `annotune.search.transfer`).

Every measurement is committed to the database as it completes, so a crash, SIGKILL or Ctrl-C
loses at most the one being taken; a re-run with the same settings resumes: configurations
already in the database are served from it ("reused") and never measured again. The default
configuration is always measured first: its time is the baseline, and its `annotune-check:`
value is the reference every other configuration's output must match.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from annotune import __version__
from annotune.annotate import Problem, problem_space
from annotune.annotate.kernel import KernelSpec
from annotune.builder import Builder, CompilerCommand, cubin_compiler
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.records import BuildResult, Candidates, Measurement, Number, Result
from annotune.emit import render_header, tuned_header_path, write_if_changed
from annotune.results.database import Database, Study, StudyKey, config_key, default_db_path
from annotune.run.backends import select_backend
from annotune.run.device import current_device_name
from annotune.run.kernel import KernelReference, KernelRunner
from annotune.run.program import ProgramRunner, RunSpec
from annotune.search import Budget, Strategy, create, run_search
from annotune.space import Space
from annotune.transfer.features import features_for
from annotune.transfer.prior import TRANSFER_STRATEGIES, Prior, gather_prior


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
    db_path: Path | None = None  # default: .annotune/results.db beside the source
    cache_dir: Path | None = None  # default: .annotune/cache beside the source
    fresh: bool = False
    compiler: CompilerCommand | None = None  # default: by language (see build.compiler)
    compile_timeout: float = 300.0
    run: RunSpec = field(default_factory=RunSpec)
    mode: str = "auto"  # "program", "kernel", or "auto": kernel when the source declares one
    kernel: str | None = None  # which `#pragma annotune kernel` (needed when there are several)
    backend: str | None = None  # kernel mode: "pycuda" or "cuda-python" (default: what imports)
    transfer: bool = True  # learn from other GPUs' results (only for iterml and transfer)
    transfer_from: tuple[Path, ...] = ()  # T4 / Kernel Tuner cache files of other GPUs


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

GIVE_UP_AFTER = 8
"""Configurations that all failed the same way, with none valid, before the search stops."""


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
    measured: int = 0
    compile_failures: int = 0
    run_failures: int = 0
    best_time: float | None = None
    best_params: dict[str, Number] | None = None
    default_time: float | None = None
    failures: list[FailureKind] = field(default_factory=list)  # each kind when first seen
    transfer_from: tuple[str, ...] = ()  # the GPUs the search learned from
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Outcome:
    params: dict[str, Number]
    time: float | None

    def to_json(self) -> dict:
        return {"params": self.params, "time": self.time}


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

    def to_json(self) -> dict:
        return {
            "device": self.device,
            "evaluations": self.evaluations,
            "reused": self.reused,
            "invalid": self.invalid,
            "best": self.best.to_json() if self.best else None,
            "default": self.default.to_json(),
            "header": str(self.header) if self.header else None,
            "interrupted": self.interrupted,
            "space_size": self.space_size,
            "db": str(self.db_path),
            "transfer": self.prior.to_json() if self.prior and self.prior.tasks else None,
            "warnings": list(self.warnings),
            "failures": [f.to_json() for f in self.failures],
            "gave_up": self.gave_up,
        }


ProgressCallback = Callable[[TuneProgress], None]


def tune(
    problem: Problem, options: TuneOptions, on_progress: ProgressCallback | None = None
) -> TuneReport:
    """Tune `problem` on this machine and write the best configuration's header.

    Ctrl-C (KeyboardInterrupt) stops the search cleanly: what was measured is kept and the
    best-so-far header is still written; the report says `interrupted`.
    """
    space = problem_space(problem)
    rng = np.random.default_rng(options.seed)
    legal, legal_count = space.search_rows(rng)
    candidates = Candidates(space.decode(legal), space.names)
    device = options.device or current_device_name()
    target = features_for(device)
    with ExitStack() as resources:
        measurer, compiler = _measurer(problem, options, resources)
        builder = Builder(
            problem,
            compiler=compiler,
            cache_dir=options.cache_dir or problem.source.parent / ".annotune" / "cache",
            jobs=options.jobs,
            timeout=options.compile_timeout,
        )
        db_path = options.db_path or default_db_path(problem.source)
        db = resources.enter_context(Database(db_path))
        key = StudyKey.for_problem(
            problem,
            device=device,
            build={"compiler": builder.identity(), "run": measurer.to_json()},
        )
        study = db.open_study(
            key, fresh=options.fresh, device_features=target.to_json() if target else None
        )
        prior = Prior()
        if options.transfer and options.strategy in TRANSFER_STRATEGIES:
            prior = gather_prior(
                candidates,
                key,
                target,
                db=db,
                files=options.transfer_from,
                rng=np.random.default_rng([options.seed, 1]),
            )
        strategy = (
            create("transfer", **prior.options()) if prior.tasks else create(options.strategy)
        )
        session = _Session(problem, space, legal, db, study, builder, measurer, on_progress)
        session.progress = TuneProgress(
            device,
            legal_count,
            options.budget,
            strategy.name,
            transfer_from=prior.sources,
            warnings=prior.warnings,
        )
        interrupted = False
        try:
            known = session.measure_default()
            left = None if options.budget is None else options.budget - session.progress.evaluations
            run_search(
                _KnownFirst(strategy, known),
                candidates,
                session.measure,
                budget=Budget(max(0, left) if left is not None else None, options.seconds),
                rng=rng,
                batch_size=max(1, builder.jobs),
                on_batch=session.after_batch,
            )
        except KeyboardInterrupt:
            interrupted = True
        return session.finish(options, interrupted, db_path, prior)


def _measurer(problem: Problem, options: TuneOptions, resources: ExitStack):
    """The runner for this problem and the compiler it needs (kernel mode builds cubins)."""
    mode = options.mode
    if mode == "auto":
        mode = "kernel" if problem.kernels else "program"
    if mode == "program":
        spec = options.run if options.run.cwd else replace(options.run, cwd=problem.source.parent)
        return _ProgramMeasurer(ProgramRunner(spec)), options.compiler
    if mode != "kernel":
        raise AnnotuneError(f"unknown mode {mode!r} (expected program, kernel or auto)")
    spec = _kernel_spec(problem, options.kernel)
    backend = resources.enter_context(select_backend(options.backend))
    runner = KernelRunner(
        spec,
        backend,
        warmup=options.run.warmup,
        repeats=options.run.repeats,
        seed=options.seed,
        timeout=options.run.timeout,
    )
    compiler = options.compiler or cubin_compiler(backend.compute_capability())
    return _KernelMeasurer(runner), compiler


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


class _ProgramMeasurer:
    """Program mode: the default's `annotune-check:` value is every other run's reference."""

    def __init__(self, runner: ProgramRunner):
        self.runner = runner
        self.reference: float | None = None

    def to_json(self) -> dict:
        return self.runner.spec.to_json()

    def measure(self, build: BuildResult) -> Measurement:
        return self.runner.measure(build, self.reference)

    def adopt_default(self, measurement: Measurement, rebuild: Callable[[], BuildResult]) -> None:
        if measurement.status == "ok":
            self.reference = measurement.compile_info.get("check")


class _KernelMeasurer:
    """Kernel mode: the default configuration's output arrays are the reference."""

    def __init__(self, runner: KernelRunner):
        self.runner = runner
        self.reference: KernelReference | None = None
        self._last: KernelReference | None = None

    def to_json(self) -> dict:
        return self.runner.to_json()

    def measure(self, build: BuildResult) -> Measurement:
        measurement, self._last = self.runner.measure(build, self.reference)
        return measurement

    def adopt_default(self, measurement: Measurement, rebuild: Callable[[], BuildResult]) -> None:
        """Outputs are not stored: when the default was reused, run it once more for them."""
        if measurement.status != "ok":
            return
        if self._last is None:
            _, self._last = self.runner.measure(rebuild(), None)
        self.reference = self._last


class _KnownFirst(Strategy):
    """A strategy told of results measured before the search (the default configuration).

    They are told once the strategy starts, and filtered out of what it asks for, so they
    cost no budget and are never measured twice.
    """

    def __init__(self, inner: Strategy, known: Sequence[Result]):
        self.inner = inner
        self.known = {result.index: result for result in known}
        self.name = inner.name

    def start(self, candidates: Candidates, rng: np.random.Generator) -> None:
        self.inner.start(candidates, rng)
        if self.known:
            self.inner.tell(list(self.known.values()))

    def ask(self, max_count: int) -> list[int]:
        while True:
            asked = self.inner.ask(max_count)
            fresh = [i for i in asked if i not in self.known]
            if fresh or not asked:
                return fresh

    def tell(self, results: Sequence[Result]) -> None:
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
        on_progress: ProgressCallback | None,
    ):
        self.problem = problem
        self.space = space
        self.legal = legal
        self.db = db
        self.study = study
        self.builder = builder
        self.measurer = measurer
        self.on_progress = on_progress
        self.known = {config_key(m.params): m for m in db.measurements(study)}
        self.seen: set[str] = set()
        self.invalid = 0
        self.failures: dict[tuple[str, str], FailureKind] = {}
        self.gave_up = False
        self.default_params = space.to_dicts(space.default_row()[None, :])[0]
        self.progress: TuneProgress

    def _report(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.progress)

    def measure_default(self) -> list[Result]:
        """Measure the default first; its result, as a row of the space if it is legal."""
        (measurement,) = self._measure_configs([self.default_params])
        if measurement.status == "ok":
            self.progress.default_time = measurement.time
        self.measurer.adopt_default(
            measurement, lambda: self.builder.build([self.default_params])[0]
        )
        self._report()
        row = np.flatnonzero((self.legal == self.space.default_row()).all(axis=1))
        if not len(row):
            return []
        time = measurement.time if measurement.status == "ok" else None
        return [Result(int(row[0]), time, measurement.error)]

    def measure(self, indices: Sequence[int]) -> list[Result]:
        configs = self.space.to_dicts(self.legal[np.asarray(indices, dtype=np.int64)])
        measurements = self._measure_configs(configs)
        return [
            Result(index, m.time if m.status == "ok" else None, m.error)
            for index, m in zip(indices, measurements, strict=True)
        ]

    def _measure_configs(self, configs: list[dict[str, Number]]) -> list[Measurement]:
        """Serve what the database has; build the rest in parallel, then run them one by one."""
        found: dict[int, Measurement] = {}
        to_build: list[int] = []
        for i, params in enumerate(configs):
            known = self.known.get(config_key(params))
            if known is not None:
                found[i] = known
                self._count(params, known, reused=True)
            else:
                to_build.append(i)
        builds = self.builder.build([configs[i] for i in to_build]) if to_build else []
        for i, build in zip(to_build, builds, strict=True):
            measurement = self.measurer.measure(build)
            self.db.record(self.study, measurement)
            self.known[config_key(measurement.params)] = measurement
            found[i] = measurement
            self._count(configs[i], measurement, reused=False)
        return [found[i] for i in range(len(configs))]

    def _count(self, params: dict[str, Number], m: Measurement, *, reused: bool) -> None:
        key = config_key(params)
        if key in self.seen:
            return
        self.seen.add(key)
        p = self.progress
        p.evaluations += 1
        p.reused += reused
        p.measured += not reused
        if m.status == "ok":
            if p.best_time is None or m.time < p.best_time:  # type: ignore[operator]
                p.best_time, p.best_params = m.time, dict(params)
        else:
            self.invalid += 1
            p.compile_failures += m.status == "compile_error"
            p.run_failures += m.status != "compile_error"
            kind = (m.status, _NUMBER.sub("#", m.error))
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
        self._report()
        kinds = list(self.failures.values())
        self.gave_up = (
            self.progress.best_time is None and len(kinds) == 1 and kinds[0].count >= GIVE_UP_AFTER
        )
        return self.gave_up

    def finish(
        self, options: TuneOptions, interrupted: bool, db_path: Path, prior: Prior
    ) -> TuneReport:
        p = self.progress
        default = Outcome(self.default_params, p.default_time)
        best = Outcome(p.best_params, p.best_time) if p.best_params is not None else None
        header = None
        if best is not None:
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
            )
            write_if_changed(header, text)
        return TuneReport(
            device=p.device,
            evaluations=p.evaluations,
            reused=p.reused,
            invalid=self.invalid,
            best=best,
            default=default,
            header=header,
            interrupted=interrupted,
            space_size=p.space_size,
            db_path=db_path,
            prior=prior,
            warnings=prior.warnings,
            failures=tuple(sorted(self.failures.values(), key=lambda f: -f.count)),
            gave_up=self.gave_up,
        )


def speedup(report: TuneReport) -> float | None:
    """Default time over best time, when both are known."""
    if report.best is None or not report.best.time or report.default.time is None:
        return None
    value = report.default.time / report.best.time
    return value if math.isfinite(value) else None
