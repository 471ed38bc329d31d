"""Program mode: run a built executable and read how long its work took.

The time comes, in order of preference, from the lines `annotune-time-ms: X` printed by
annotune's timing header (`annotune_timing.h`: CUDA events under nvcc, a steady clock on the
host), from a user regex whose first group is the time (in `time_unit`, milliseconds by
default), or, only when neither is configured, from the process's wall time (start-up included;
the measurement says so).
Each configuration is run `warmup` times untimed, then timed until its median is stable
(`annotune.run.sampling`); its time is the median of the timed runs.
A non-zero exit, a timeout, a missing time, or an `annotune-check:` value that is not a finite
number or differs from the baseline configuration's makes the configuration invalid, with the
reason kept; so does an output that fails the config's `[file.check]` rules
(`annotune.core.output_check`: `expect`, `reject`, or `result` captures that differ from the
baseline's), status `wrong_output` like a differing check value. Each run is its own process
group, killed whole when the run ends: nothing it started outlives it; what of its output is
read is bounded (`annotune.run.process`: its start and its end). A run gets annotune's own
environment plus the `env` settings, whose `{NAME}`s take the configuration's values: an
environment variable can be a tunable.

Given an energy meter (`annotune.run.energy`: RAPL for the host, NVML for a CUDA program's
GPU), each timed run's energy is measured over the whole process run, start-up, input and
output included (a program's timed region cannot be metered from outside); their median is
the configuration's energy per run. A run shorter than the meter's `min_window`, or one over
which it saw no energy, leaves the configuration without an energy, with the reason in
`compile_info["energy"]["error"]`: never 0 J, never a median of the longer runs alone.
"""

from __future__ import annotations

import itertools
import math
import os
import re
import signal
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from annotune.core.literals import fill_placeholders, placeholder_mistake, placeholders
from annotune.core.output_check import OutputCheck
from annotune.core.records import (
    TRANSIENT_ERRNOS,
    BuildResult,
    Measurement,
    Number,
)
from annotune.run.conditions import GpuMonitor, summarize
from annotune.run.energy import EnergyError, EnergyMeter
from annotune.run.process import run_in_own_group
from annotune.run.sampling import Sampling

_KILLED_FROM_OUTSIDE = frozenset({signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
"""Signals a program does not send itself when it crashes: someone else ended the run."""

TIME_LINE = re.compile(r"^annotune-time-ms:\s*([-+0-9.eEinfa]+)\s*$", re.MULTILINE)
CHECK_LINE = re.compile(r"^annotune-check:\s*(\S+)\s*$", re.MULTILINE)

TIME_UNITS = {"s": 1e3, "ms": 1.0, "us": 1e-3, "ns": 1e-6}
"""What a time read with the regex is multiplied by to be in milliseconds."""

TIMING_VARIABLES = (
    "OMP_NUM_THREADS",
    "OMP_PROC_BIND",
    "OMP_PLACES",
    "CUDA_VISIBLE_DEVICES",
    "ACC_NUM_CORES",
    "GOMP_CPU_AFFINITY",
)
"""Variables of annotune's own environment that change a program's time (its threads, where
they run, which GPU): every run inherits them, so their values are part of the study key."""



@dataclass(frozen=True)
class RunSpec:
    """How to run a variant: arguments, working directory, repeats and limits.

    `repeats` is the least number of timed runs; a configuration is run more, up to
    `max_repeats` runs or `max_seconds` of timed runs, until its median is stable within
    ±`stable_within` (`annotune.run.sampling`). `max_repeats = repeats` gives a fixed count.
    `timing_header`: the program includes annotune_timing.h, so a run must print its time.
    `env`: variables set for every run, over annotune's own environment; `{NAME}` in a value
    is the configuration's value of the parameter NAME.
    """

    args: tuple[str, ...] = ()
    cwd: Path | None = None
    timeout: float = 60.0
    warmup: int = 1
    repeats: int = 5
    max_repeats: int = 30
    max_seconds: float = 10.0
    stable_within: float = 0.02
    time_regex: str | None = None
    time_unit: str = "ms"  # of what `time_regex` captures
    timing_header: bool = False
    check_tolerance: float = 1e-6
    env: tuple[tuple[str, str], ...] = ()
    output_check: OutputCheck | None = None  # the config's `[file.check]`

    def __post_init__(self) -> None:
        if self.warmup < 0:
            raise ValueError("warmup must be non-negative")
        if not (math.isfinite(self.check_tolerance) and self.check_tolerance >= 0):
            raise ValueError("the check tolerance must be a finite number >= 0")
        self.sampling  # noqa: B018  (validates the repeats settings now, not at the first run)
        if self.time_regex is not None and re.compile(self.time_regex).groups < 1:
            raise ValueError("the time regex needs a group capturing the time")
        if self.time_unit not in TIME_UNITS:
            raise ValueError(
                f"unknown time unit {self.time_unit!r} (expected {', '.join(TIME_UNITS)})"
            )
        if self.time_unit != "ms" and self.time_regex is None:
            raise ValueError("a time unit is that of the time regex (--time-regex): there is none")
        for name, value in self.env:
            if not name or "=" in name or "\0" in name + value:
                raise ValueError(f"{name!r} cannot be an environment variable's name")
            mistake = placeholder_mistake(value, name)
            if mistake is not None:
                raise ValueError(mistake[1])

    @property
    def sampling(self) -> Sampling:
        return Sampling(
            min_runs=self.repeats,
            max_runs=max(self.max_repeats, self.repeats),
            max_seconds=self.max_seconds,
            within=self.stable_within,
        )

    def environment(self, params: Mapping[str, Number] | None = None) -> dict[str, str]:
        """What of a run's environment changes its time: the `TIMING_VARIABLES` set in
        annotune's own environment now, then `env`, with `params`' values for its `{NAME}`s
        (as written without `params`)."""
        inherited = {name: os.environ[name] for name in TIMING_VARIABLES if name in os.environ}
        if params is None:
            return {**inherited, **dict(self.env)}
        return {
            **inherited,
            **{name: fill_placeholders(value, params) for name, value in self.env},
        }

    def arguments(self, params: Mapping[str, Number]) -> list[str]:
        """The program's arguments with `params`' values for each `{NAME}` that names one
        (`args = ["-wg", "{WG}"]`: a knob the program reads at run time)."""
        return [fill_placeholders(arg, params) for arg in self.args]

    def to_json(self) -> dict:
        """What changes a time: part of the results database's study key. The run directory is
        in it: arguments that name input files mean other files from elsewhere, and a failure
        to find them must not be reused as the configuration's result. The time unit and the
        environment appear only when they say something."""
        data = {
            "args": list(self.args),
            "run_dir": str(self.cwd) if self.cwd is not None else None,
            "warmup": self.warmup,
            "repeats": self.repeats,
            "sampling": self.sampling.to_json(),
            "time_regex": self.time_regex,
            "timing_header": self.timing_header,
        }
        if self.time_unit != "ms":
            data["time_unit"] = self.time_unit
        if self.time_regex is None and not self.timing_header:
            # Wall times taken before the run's wait stopped polling were rounded up to 50 ms
            # steps (`process.run_in_own_group`): such a study starts anew, never reused.
            data["wall_clock"] = "exact wait"
        environment = self.environment()
        if environment:
            data["environment"] = environment
        if self.output_check is not None:
            data["output_check"] = self.output_check.to_json()
        return data


env_placeholders = placeholders  # the names inside `{...}` of an `env` value or argument


@dataclass(frozen=True)
class _Run:
    ms: float | None
    check: float | None
    error: str = ""
    status: str = "ok"
    transient: bool = False
    timing: str = ""
    joules: float | None = None  # over the process run, when metered and measurable
    energy_error: str = ""  # why a metered run has no energy
    result: tuple[str, ...] | None = None  # what `[file.check]`'s `result` captured


ENERGY_SCOPE = "process run, start-up included"
"""What a program's energy covers (kept with each measurement)."""


class ProgramRunner:
    """Measures executables one at a time (never in parallel: timings must not interfere)."""

    def __init__(
        self,
        spec: RunSpec,
        monitor: GpuMonitor | None = None,
        meter: EnergyMeter | None = None,
    ):
        self.spec = spec
        self.monitor = monitor
        self.meter = meter
        self.reference: float | None = None  # the baseline's check value; None: not checked
        self.reference_result: tuple[str, ...] | None = None  # its `result` captures
        self._regex = re.compile(spec.time_regex, re.MULTILINE) if spec.time_regex else None

    def to_json(self) -> dict:
        """What changes a time or an energy: the spec's part of the study key, and the meter's
        when energy is measured."""
        if self.meter is None:
            return self.spec.to_json()
        return {**self.spec.to_json(), "energy": self.meter.to_json()}

    def measure(self, build: BuildResult, stop_above: float | None = None) -> Measurement:
        """Run `build` (warm-up, then timed runs until `RunSpec.sampling` has enough) into one
        Measurement; failures are statuses. A configuration whose fastest run is slower than
        `stop_above` ms gets only the minimum number of runs. A run's `annotune-check:` value
        must match `reference` (when set) within the spec's `check_tolerance`, and its
        `[file.check]` `result` captures `reference_result` (the baseline's, once adopted).

        `compile_info["run_seconds"]` says where the call's time went: `wall` (all of it), `gpu`
        (the timed runs' reported times, summed) and `setup` (the rest: process start-up and
        whatever each run did outside its timed region, warm-up runs whole; never below 0,
        should a program report more than it took).
        """
        started = time.perf_counter()
        times: list[float] = []
        references = (self.reference, self.reference_result)
        measurement = self._measure(build, references, stop_above, times)
        wall = time.perf_counter() - started
        gpu = sum(times) / 1e3
        seconds = {"wall": wall, "setup": max(0.0, wall - gpu), "gpu": gpu}
        info = {**measurement.compile_info, "run_seconds": seconds}
        return replace(measurement, compile_info=info)

    def _measure(
        self,
        build: BuildResult,
        references: tuple[float | None, tuple[str, ...] | None],
        stop_above: float | None,
        times: list[float],
    ) -> Measurement:
        """`measure`, adding each timed run's time to `times` as it comes."""
        reference_check, reference_result = references
        info = compile_info(build)
        if build.executable is None:
            return Measurement(
                build.params,
                "compile_error",
                error=build.error,
                compile_info=info,
                transient=build.transient,
            )
        info = dict(info)
        sampling = self.spec.sampling
        conditions = []
        energies: list[float] = []
        energy_error = ""
        check = None
        result = None
        timed_seconds = 0.0
        retried_timeout = False
        for attempt in itertools.count():
            started = time.perf_counter()
            meter = self.meter if attempt >= self.spec.warmup else None
            run = self._run_once(build.executable, build.params, meter)
            if run.status == "timeout" and not retried_timeout:
                retried_timeout = True  # once may be the machine's fault; twice is the variant's
                run = self._run_once(build.executable, build.params, meter)
            if run.status != "ok":
                return Measurement(
                    build.params,
                    run.status,
                    error=run.error,
                    compile_info=info,
                    transient=run.transient,
                )
            if run.check is not None:
                check = run.check
                if reference_check is not None and not _close(
                    run.check, reference_check, self.spec.check_tolerance
                ):
                    return Measurement(
                        build.params,
                        "wrong_output",
                        error=f"check value {run.check!r} differs from the baseline's "
                        f"{reference_check!r}",
                        compile_info=info,
                    )
            if run.result is not None:
                result = run.result
                differs = _differs(self.spec.output_check, run.result, reference_result)
                if differs:
                    return Measurement(
                        build.params,
                        "wrong_output",
                        error=differs,
                        compile_info=info,
                    )
            if attempt < self.spec.warmup:
                continue
            times.append(run.ms)  # type: ignore[arg-type]
            info["timing"] = run.timing
            if run.joules is not None:
                energies.append(run.joules)
            energy_error = energy_error or run.energy_error
            timed_seconds += time.perf_counter() - started
            if self.monitor is not None:
                conditions.append(self.monitor.sample())
            if sampling.enough(times, timed_seconds, stop_above):
                break
        if check is not None:
            info["check"] = check
        if result is not None:
            info["result"] = list(result)  # the baseline's is the reference, reused or not
        if conditions:
            info["gpu"] = summarize(conditions)
        if energy_error:
            energies = []
        if self.meter is not None:
            info["energy"] = {"method": self.meter.method, "per": ENERGY_SCOPE}
            if energy_error:
                info["energy"]["error"] = energy_error
        return Measurement(
            build.params,
            "ok",
            time=statistics.median(times),
            times=tuple(times),
            compile_info=info,
            energy=statistics.median(energies) if energies else None,
            energies=tuple(energies),
        )

    def _run_once(
        self, executable: Path, params: Mapping[str, Number], meter: EnergyMeter | None = None
    ) -> _Run:
        """One run of the program; with a `meter`, its energy over the whole process run."""
        # Absolute: the program runs in `spec.cwd`, where a path relative to ours means nothing.
        argv = [str(executable.absolute()), *self.spec.arguments(params)]
        env = {**os.environ, **self.spec.environment(params)}
        if meter is not None:
            meter.start()
        try:
            finished = run_in_own_group(argv, self.spec.cwd, self.spec.timeout, env)
        except OSError as error:
            transient = error.errno in TRANSIENT_ERRNOS
            return _Run(None, None, f"cannot run: {error.strerror}", "runtime_error", transient)
        finally:
            joules, energy_error = _stop(meter) if meter is not None else (None, "")
        run = self._judge(finished)
        if run.status != "ok" or meter is None:
            return run
        return replace(run, joules=joules, energy_error=energy_error)

    def _judge(self, finished: tuple[int, str, str, float] | None) -> _Run:
        """What a finished (or timed-out: None) process run gives: its time, check value, or
        why it has none."""
        if finished is None:
            return _Run(None, None, f"timed out after {self.spec.timeout:g} s", "timeout")
        returncode, stdout, stderr, wall_ms = finished
        if -returncode in _KILLED_FROM_OUTSIDE:
            said = f"killed from outside (signal {-returncode}), e.g. by the out-of-memory killer"
            return _Run(None, None, said, "runtime_error", transient=True)
        if returncode != 0:
            reason = _last_line(stderr) or _last_line(stdout)
            how = f"signal {-returncode}" if returncode < 0 else f"code {returncode}"
            said = f": {reason}" if reason else " (it printed nothing)"
            return _Run(None, None, f"exited with {how}{said}"[:500], "runtime_error")
        ms, source = _time(self.spec, self._regex, stdout, wall_ms)
        if ms is None:
            return _Run(None, None, source, "runtime_error")
        result = None
        if self.spec.output_check is not None:
            wrong, result = self.spec.output_check.judge(f"{stdout}\n{stderr}")
            if wrong:
                return _Run(None, None, wrong, "wrong_output")
        checks = CHECK_LINE.findall(stdout)
        if not checks:
            return _Run(ms, None, timing=source, result=result)
        check = _number(checks[-1])
        if check is None or not math.isfinite(check):
            said = f"check value {checks[-1]!r} is not a finite number"
            return _Run(None, None, said, "wrong_output")
        return _Run(ms, check, timing=source, result=result)


def _time(
    spec: RunSpec, regex: re.Pattern | None, stdout: str, wall_ms: float
) -> tuple[float | None, str]:
    """The run's time and where it came from ("header", "regex" or "wall"), or None and
    why there is none. Wall time only when no timing source is configured: it includes
    the process's start-up, which a timing line or a regex leaves out."""
    lines = TIME_LINE.findall(stdout)
    if lines:
        reported = [_number(v) for v in lines]
        if any(v is None or not math.isfinite(v) or v < 0 for v in reported):
            return None, f"timing line {lines[0]!r} is not a finite, non-negative number"
        return statistics.median(reported), "header"  # type: ignore[type-var]
    if regex is not None:
        found = [_number(m.group(1)) for m in regex.finditer(stdout)]
        found = [v for v in found if v is not None and math.isfinite(v) and v >= 0]
        if not found:
            return None, "no timing line: nothing in the output matched the time regex"
        return statistics.median(found) * TIME_UNITS[spec.time_unit], "regex"
    if spec.timing_header:
        return None, (
            "no timing line: the program includes annotune_timing.h but printed no "
            "'annotune-time-ms:' (did it reach ANNOTUNE_TIMER_STOP?)"
        )
    return wall_ms, "wall"


def _differs(
    rules: OutputCheck | None, result: tuple[str, ...], reference: tuple[str, ...] | None
) -> str:
    """Why a run's `result` captures differ from the baseline's ("" when they agree, or when
    there is nothing to compare)."""
    if rules is None or reference is None:
        return ""
    return rules.compare(result, tuple(reference))


def _stop(meter: EnergyMeter) -> tuple[float | None, str]:
    """Close the meter's window: its energy (J), or None and why it cannot be trusted."""
    try:
        reading = meter.stop()
    except EnergyError as error:
        return None, str(error)
    if reading.seconds < meter.min_window:
        return None, (
            f"a run of {reading.seconds:.3g} s is shorter than the {meter.min_window:g} s "
            f"{meter.description} needs: no energy is recorded"
        )
    if reading.joules <= 0:
        return None, f"{meter.description} saw no energy over a run of {reading.seconds:.3g} s"
    return reading.joules, ""


def compile_info(build: BuildResult) -> dict:
    """What the compile reported, kept with each measurement (shared by every runner)."""
    info: dict = {"seconds": round(build.seconds, 3)}
    if build.resources:
        info["kernels"] = {
            name: {
                "registers": r.registers,
                "shared_bytes": r.shared_bytes,
                "spill_stores": r.spill_stores,
                "spill_loads": r.spill_loads,
            }
            for name, r in build.resources.items()
        }
    return info


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _close(value: float, reference: float, tolerance: float) -> bool:
    if math.isnan(value) or math.isnan(reference):
        return False
    return abs(value - reference) <= tolerance * max(1.0, abs(reference))


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""
