"""The measurers a tune runs its builds with on this machine: program mode (a process per
run; the baseline's `annotune-check:` value and `[file.check]` captures the reference) and
kernel mode (a launch in this process; the baseline's output arrays the reference), made by
`open_measurer` from the `MeasureSettings` alone, so that a Ray actor can make one from what
it is sent."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

from annotune.annotate import Problem
from annotune.annotate.kernels import KernelSpec, LaunchError
from annotune.annotate.problem import chosen_kernel
from annotune.builder import CompilerCommand
from annotune.core.records import BuildResult, Measurement, Number
from annotune.run import energy
from annotune.run.backends import select_backend
from annotune.run.conditions import open_monitor
from annotune.run.kernel import KernelRunner, fill_notes
from annotune.run.program import ProgramRunner, RunSpec
from annotune.run.protocol import Measurer
from annotune.run.sampling import Sampling
from annotune.session.options import MeasureSettings, kernel_mode

RECHECK_SAMPLES = 5
"""Kernel mode: timed launches per round of the final check (a launch is microseconds)."""


def open_measurer(
    problem: Problem, settings: MeasureSettings, resources: ExitStack
) -> tuple[Measurer, CompilerCommand | None, tuple[int, int] | None]:
    """The runner for this problem, the compile command it needs, and in kernel mode the
    architecture the builder compiles cubins for (with NVRTC, given the compile command's
    flags)."""
    kernel = kernel_mode(problem, settings.mode)
    monitor, why_not = None, ""
    if kernel or problem.language == "cuda":
        monitor, why_not = open_monitor()
        if monitor is not None:
            resources.callback(monitor.close)
    warnings = (f"GPU conditions (clock, temperature, power) are not recorded: {why_not}",)
    warnings = warnings if why_not else ()
    meter = None
    if settings.objective != "time":
        # The GPU's board for kernels and CUDA programs; the host's packages for the rest.
        on_gpu = kernel or problem.language == "cuda"
        meter = energy.open_meter(["nvml"] if on_gpu else ["rapl"], powercap=energy.POWERCAP)
        resources.callback(meter.close)
    if not kernel:
        # Where annotune was started, unless told: input files named in arguments are found
        # where the user expects them, whatever directory the source is in.
        spec = replace(settings.run, cwd=settings.run.cwd or Path.cwd())
        if not settings.check:  # --no-check: no output is checked, the config's rules neither
            spec = replace(spec, output_check=None)
        runner = ProgramRunner(spec, monitor, meter)
        once = ProgramRunner(replace(spec, repeats=1, max_repeats=1), monitor, meter)
        measurer = _ProgramMeasurer(runner, once, check=settings.check, warnings=warnings)
        return measurer, settings.compiler, None
    spec = chosen_kernel(problem, settings.mode, settings.kernel)
    if settings.run.output_check is not None:
        warnings += (
            "[file.check] applies to program mode only: kernel mode checks the kernel's output "
            "arrays against the baseline's, and the program's output is not read (--mode "
            "program runs the program and checks its output)",
        )
    warnings = warnings + fill_notes(spec)  # the __constant__ variables the host would set
    backend = resources.enter_context(select_backend(settings.backend))

    def runner(sampling: Sampling) -> KernelRunner:
        return KernelRunner(
            spec,
            backend,
            warmup=settings.run.warmup,
            sampling=sampling,
            seed=settings.seed,
            rtol=settings.run.check_tolerance,
            timeout=settings.run.timeout,
            flush_l2=settings.flush_l2,
            monitor=monitor,
            meter=meter,
        )

    fixed = Sampling(min_runs=RECHECK_SAMPLES, max_runs=RECHECK_SAMPLES)
    # The final check's rounds are its energy samples: one energy batch a round is enough.
    recheck_runner = runner(fixed)
    recheck_runner.energy_batches = 1
    measurer = _KernelMeasurer(
        runner(settings.run.sampling), recheck_runner, check=settings.check, warnings=warnings
    )
    return measurer, settings.compiler, backend.compute_capability()


def run_key(spec: RunSpec | KernelSpec, params: Mapping[str, Number]) -> str | None:
    """What of a run `params` change besides its program: a program's environment and
    arguments, a kernel's launch (None when it cannot be computed). Two configurations of one
    program with the same run key are one measurement."""
    if isinstance(spec, RunSpec):
        return repr((sorted(spec.environment(params).items()), spec.arguments(params)))
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
    """Program mode: the baseline's `annotune-check:` value and `[file.check]`'s `result`
    captures are every other run's reference."""

    def __init__(self, runner: ProgramRunner, once: ProgramRunner, *, check: bool, warnings: tuple):
        self.runner = runner
        self.once = once  # one timed run: a round of the final check
        self.check = check
        self.warnings: tuple[str, ...] = warnings

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
        return self.runner.measure(build, stop_above)

    def sample(self, build: BuildResult) -> Measurement:
        return self.once.measure(build)

    def adopt_baseline(self, measurement: Measurement, rebuild: Callable[[], BuildResult]) -> None:
        if self.check and measurement.status == "ok":
            self.runner.reference = self.once.reference = measurement.compile_info.get("check")
            result = measurement.compile_info.get("result")
            captured = tuple(map(str, result)) if result is not None else None
            self.runner.reference_result = self.once.reference_result = captured


class _KernelMeasurer:
    """Kernel mode: the baseline configuration's output arrays are the reference."""

    def __init__(self, runner: KernelRunner, once: KernelRunner, *, check: bool, warnings: tuple):
        self.runner = runner
        self.once = once  # a few timed launches: a round of the final check
        self.check = check
        self.warnings: tuple[str, ...] = warnings

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
        return self.runner.measure(build, stop_above)

    def sample(self, build: BuildResult) -> Measurement:
        return self.once.measure(build)

    def adopt_baseline(self, measurement: Measurement, rebuild: Callable[[], BuildResult]) -> None:
        """Outputs are not stored: when the baseline was reused, run it once more for them."""
        if not self.check or measurement.status != "ok":
            return
        if self.runner.outputs is None:  # the last measurement's: the baseline's, unless reused
            self.runner.reference = None
            self.runner.measure(rebuild())
        self.runner.reference = self.once.reference = self.runner.outputs
