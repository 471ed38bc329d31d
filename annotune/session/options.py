"""What one `annotune tune` runs with: the command line over the config file over the defaults.

The command line says what this run should do; the config file (its `[[file]]` entry, or the
source's `#pragma annotune args`) says how the program is built and run, so that a plain
`annotune tune FILE` measures it the same way every time. `tune_options` merges the two, here
and nowhere else; the CLI only parses into `TuneArguments` and prints what `tune` reports.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeVar

from annotune.annotate import Problem
from annotune.annotate.problem import RunSettings, chosen_kernel
from annotune.builder import CompilerCommand
from annotune.builder.nvrtc import nvrtc_unavailable, start_pool
from annotune.core.diagnostics import AnnotuneError
from annotune.core.literals import placeholder_mistake
from annotune.core.records import OBJECTIVES, Number
from annotune.run.program import RunSpec, env_placeholders
from annotune.search import TRANSFER_STRATEGIES

T = TypeVar("T")

KERNEL_CHECK_RTOL = 1e-5
"""Kernel mode's default relative tolerance: its inputs are random floats, so an 8192-term
float32 sum in another order differs from the default's by up to about 4e-6 (gesummv, mvt);
a missing term differs by about 1e-4."""


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

    def measuring(self) -> MeasureSettings:
        """The settings a measurer is made from."""
        return MeasureSettings(
            mode=self.mode,
            kernel=self.kernel,
            backend=self.backend,
            compiler=self.compiler,
            run=self.run,
            check=self.check,
            flush_l2=self.flush_l2,
            seed=self.seed,
            objective=self.objective,
        )


@dataclass(frozen=True)
class MeasureSettings:
    """What a measurer is made from (`annotune.session.measurers.open_measurer`): the part of
    `TuneOptions` a device needs, small enough to send to a Ray actor's process."""

    mode: str = "auto"
    kernel: str | None = None
    backend: str | None = None
    compiler: CompilerCommand | None = None
    run: RunSpec = field(default_factory=RunSpec)
    check: bool = True
    flush_l2: bool | None = None
    seed: int = 0
    objective: str = "time"


def kernel_mode(problem: Problem, mode: str) -> bool:
    """Whether `mode` ("program", "kernel" or "auto": kernel when the source declares one)
    launches a kernel in process rather than running the program."""
    if mode not in ("program", "kernel", "auto"):
        raise AnnotuneError(f"unknown mode {mode!r} (expected program, kernel or auto)")
    return mode == "kernel" or (mode == "auto" and bool(problem.kernels))


@dataclass(frozen=True)
class TuneArguments:
    """`annotune tune`'s options as given. A build or run setting not given is None (or empty),
    so that the config file's, else the default, applies; the others default as `TuneOptions`.

    Combinations that can never work are refused on construction (AnnotuneError), before the
    source is read: a wrong option is reported as such, not as a problem of the file. A single
    value out of its range (a budget of 0, an unknown strategy or time unit) never gets here:
    the command line refuses it as it parses (`annotune.cli.params`).
    """

    strategy: str = TuneOptions.strategy
    budget: int = 100  # measurements; unlike `TuneOptions.budget`, never None (no limit)
    seconds: float | None = None
    seed: int = TuneOptions.seed
    device: str | None = None
    jobs: int | None = None
    out_dir: Path | None = None
    db_path: Path | None = None
    fresh: bool = TuneOptions.fresh
    compiler: str | None = None  # a preset name or a command template (`CompilerCommand.parse`)
    compile_timeout: float = TuneOptions.compile_timeout
    args: tuple[str, ...] = ()  # the program's arguments
    repeats: int | None = None  # the least number of timed runs
    max_repeats: int | None = None
    stable_within: float | None = None
    warmup: int | None = None
    timeout: float | None = None
    time_regex: str | None = None
    time_unit: str | None = None  # of what time_regex captures: s, ms, us or ns
    run_dir: Path | None = None  # where the program runs (default: where annotune started)
    check_rtol: float | None = None
    mode: str = TuneOptions.mode
    kernel: str | None = None
    backend: str | None = None
    transfer: bool = TuneOptions.transfer
    transfer_from: tuple[Path, ...] = ()
    recheck: int = TuneOptions.recheck
    recheck_rounds: int = TuneOptions.recheck_rounds
    retry_failed: bool = TuneOptions.retry_failed
    reference: str | None = None  # "NAME=VALUE,NAME=VALUE"
    check: bool = TuneOptions.check
    flush_l2: bool | None = TuneOptions.flush_l2
    ray: bool = TuneOptions.ray
    ray_address: str | None = None
    devices: int | Literal["all"] | None = None  # --ray: how many (None: all GPUs, 1 replay)
    replay: tuple[Path, ...] = ()
    replay_delay: float | None = TuneOptions.replay_delay  # None: the recorded time
    sync: bool = TuneOptions.sync
    objective: str = TuneOptions.objective
    gpus: Path | None = None  # the user's GPU table (`--gpus`): features for transfer
    compile_only: bool = False  # compile configurations, run none (`compile_file`)
    arch: str | None = None  # with compile_only: the architecture nvcc compiles for
    sized: bool = False  # tuned at several problem sizes (`tune_sizes`)

    def __post_init__(self) -> None:
        if self.transfer_from and not self.transfer:
            raise AnnotuneError("--transfer-from needs transfer; drop --no-transfer")
        if self.transfer_from and self.strategy not in TRANSFER_STRATEGIES:
            raise AnnotuneError(
                f"--transfer-from works with the strategies {', '.join(TRANSFER_STRATEGIES)}, "
                f"not {self.strategy!r}"
            )
        if self.recheck and self.recheck_rounds < 6:
            raise AnnotuneError(
                "--recheck-rounds must be at least 6: fewer give no 95% interval of a speedup"
            )
        if self.reference is not None:
            parse_reference(self.reference)
        self._check_devices()
        self._check_compile_only()

    def _check_compile_only(self) -> None:
        """`--arch` and `--compile-only` go together; a compile-only run measures nothing, on
        no device, at one size."""
        if self.arch is not None and not self.compile_only:
            raise AnnotuneError(
                "--arch works with --compile-only; a tune compiles with its compile command",
                hint="name the architecture in --compiler, e.g. "
                "--compiler 'nvcc -O3 -arch=sm_90 {source} -o {output}'",
            )
        if self.compile_only and (self.ray or self.replay):
            raise AnnotuneError(
                "--compile-only compiles here and measures nothing: drop --ray and --replay"
            )
        if self.compile_only and self.sized:
            raise AnnotuneError("--sizes tunes; --compile-only compiles one size at a time")

    def _check_devices(self) -> None:
        """Where the tune measures: Ray's options need --ray, and a count of replay devices
        is a number (`all` counts GPUs)."""
        if self.ray_address is not None and not self.ray:
            raise AnnotuneError("--ray-address needs --ray")
        if self.sync and not self.ray:
            raise AnnotuneError(
                "--sync is how several devices share the search: it needs --ray (without it "
                "one device measures, and the search is already the sequential one)"
            )
        if self.devices is not None and not self.ray:
            raise AnnotuneError(
                "--devices needs --ray: without it annotune measures on this machine's device"
            )
        if self.devices == "all" and self.replay:
            raise AnnotuneError(
                "--devices all counts the GPUs Ray sees; with --replay give how many replay "
                "devices serve each recording, e.g. --devices 4"
            )
        if len(self.replay) > 1 and not self.ray:
            raise AnnotuneError(
                "several --replay recordings are several kinds of device: add --ray"
            )


def tune_options(problem: Problem, given: TuneArguments) -> TuneOptions:
    """The options `tune` runs `problem` with: each build and run setting (compile command,
    program arguments, timeout, warmup, repeats, time regex and unit, run directory) from the
    command line when given, else from the config file (`problem.settings`), else `RunSpec`'s
    and the builder's default (a run directory left None is where `tune` is called). The
    environment comes from the config alone. Whether each run must print its time follows
    from the source (`Problem.timing_header`).

    AnnotuneError when the merged compile command or run settings cannot be used.
    """
    return TuneOptions(
        strategy=given.strategy,
        budget=given.budget,
        seconds=given.seconds,
        seed=given.seed,
        device=given.device,
        jobs=given.jobs,
        out_dir=given.out_dir,
        db_path=given.db_path,
        fresh=given.fresh,
        compiler=_compiler(given.compiler, problem.settings),
        compile_timeout=given.compile_timeout,
        run=_run_spec(given, problem),
        mode=given.mode,
        kernel=given.kernel,
        backend=given.backend,
        transfer=given.transfer,
        transfer_from=given.transfer_from,
        recheck=given.recheck,
        recheck_rounds=given.recheck_rounds,
        retry_failed=given.retry_failed,
        reference=parse_reference(given.reference) if given.reference is not None else None,
        check=given.check,
        flush_l2=given.flush_l2,
        ray=given.ray,
        ray_address=given.ray_address,
        devices=given.devices,
        replay=given.replay,
        replay_delay=given.replay_delay,
        sync=given.sync,
        objective=given.objective,
        gpus=given.gpus,
    )


def parse_reference(text: str) -> dict[str, Number]:
    """`--reference "BLOCK_X=64,BLOCK_Y=8"` as a configuration (checked against the space by
    `tune`); AnnotuneError when it is not NAME=NUMBER pairs."""
    params: dict[str, Number] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, equals, value = part.partition("=")
        number = _number(value.strip())
        if not equals or not name.strip().isidentifier() or number is None:
            raise AnnotuneError(
                f"--reference {text!r}: {part!r} is not NAME=NUMBER",
                hint='e.g. --reference "BLOCK_X=64,BLOCK_Y=8"',
            )
        params[name.strip()] = number
    if not params:
        raise AnnotuneError("--reference names no parameter", hint='e.g. --reference "BLOCK_X=64"')
    return params


def _number(text: str) -> Number | None:
    if not text.isascii():
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _compiler(given: str | None, settings: RunSettings) -> CompilerCommand | None:
    """None leaves the choice to the builder (by language)."""
    if given is not None:
        return CompilerCommand.parse(given)
    return CompilerCommand.from_config(settings.compile) if settings.compile else None


def _run_spec(given: TuneArguments, problem: Problem) -> RunSpec:
    settings = problem.settings
    run_dir = _first(given.run_dir, settings.run_dir)
    chosen = {
        "timeout": _first(given.timeout, settings.timeout),
        "warmup": _first(given.warmup, settings.warmup),
        "repeats": _first(given.repeats, settings.repeats),
        "time_regex": _first(given.time_regex, settings.time_regex),
        "time_unit": _first(given.time_unit, settings.time_unit),
        "cwd": Path(run_dir).resolve() if run_dir is not None else None,
        "max_repeats": given.max_repeats,
        "stable_within": given.stable_within,
        "check_tolerance": given.check_rtol,
    }
    if given.check_rtol is None and kernel_mode(problem, given.mode):
        # float32 sums a configuration reorders differ from the default's by a few 1e-6,
        # unless the kernel's declaration says what its outputs may differ by
        kernel = chosen_kernel(problem, given.mode, given.kernel)
        declared = kernel.tolerance if kernel is not None else None
        chosen["check_tolerance"] = KERNEL_CHECK_RTOL if declared is None else declared
    try:
        return RunSpec(
            args=_args(problem, given.args or settings.args),
            timing_header=problem.timing_header,
            env=_env(problem),
            output_check=problem.settings.output_check,
            **{name: value for name, value in chosen.items() if value is not None},
        )
    except (ValueError, TypeError) as error:
        raise AnnotuneError(str(error)) from None


def _env(problem: Problem) -> tuple[tuple[str, str], ...]:
    """The config's `[file.env]`, once each `{NAME}` in it is known to name a parameter."""
    names = [p.name for p in problem.params]
    for setting in problem.settings.env:
        for name in env_placeholders(setting.value):
            if name not in names:
                raise AnnotuneError(
                    f"{{{name}}} in env {setting.name} names no parameter",
                    setting.location.shifted(setting.value.index(f"{{{name}}}")),
                    hint=f"parameters: {', '.join(names)}",
                )
    return tuple((setting.name, setting.value) for setting in problem.settings.env)


def _args(problem: Problem, args: tuple[str, ...]) -> tuple[str, ...]:
    """The program's arguments, once each `{NAME}` in them is known to name a parameter (a
    misspelt one would reach the program as written, without a word)."""
    names = [p.name for p in problem.params]
    for arg in args:
        mistake = placeholder_mistake(arg, f"the program's argument {arg!r}")
        if mistake is not None:  # a config's are located when read; `--arg`'s are not
            raise AnnotuneError(mistake[1])
        for name in env_placeholders(arg):
            if name not in names:
                raise AnnotuneError(
                    f"{{{name}}} in the program's argument {arg!r} names no parameter",
                    hint=f"parameters: {', '.join(names) or 'none'}",
                )
    return args


def _first(given: T | None, configured: T | None) -> T | None:
    return given if given is not None else configured


def warm_nvrtc(kernels: bool, jobs: int | None) -> None:
    """Start NVRTC's workers (about a second, in the background) when kernels will compile
    with NVRTC (kernel mode; a compile command with a flag NVRTC cannot take leaves them
    idle): called before libclang parses the source, or the space is enumerated, the workers
    are up by the time the first variant is ready."""
    if kernels and not nvrtc_unavailable():
        start_pool(max(1, jobs or os.cpu_count() or 1))
