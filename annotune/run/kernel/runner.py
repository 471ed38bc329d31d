"""Kernel mode's runner: one configuration's launches, from its cubin to its Measurement
(the package docstring tells the whole of it)."""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from annotune.annotate.kernels import KernelSpec, Launch, LaunchArg, LaunchConstant, LaunchError
from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import BuildResult, Measurement, Number
from annotune.run.backends import BackendError, KernelBackend, KernelTimeout
from annotune.run.conditions import GpuMonitor, summarize
from annotune.run.energy import EnergyMeter
from annotune.run.kernel.energy import Energy, measure_energy
from annotune.run.kernel.inputs import HostInputs
from annotune.run.kernel.launch_limits import LaunchLimits, kernel_resources, launch_limits
from annotune.run.kernel.memory import DeviceMemory
from annotune.run.kernel.outputs import KernelReference, compare_outputs
from annotune.run.kernel.timing import Spent, flush_bytes, timed_launches
from annotune.run.program import compile_info as build_info
from annotune.run.sampling import Sampling


@dataclass(frozen=True)
class _Run:
    """What one configuration's launches gave: its outputs, why they are wrong ("" when they
    are not checked or right) and, when right, the timed launches' times (ms)."""

    outputs: dict[str, np.ndarray]
    mismatch: str
    times: Sequence[float]
    energy: Energy | None = None


class KernelRunner:
    """Measures the kernel of one `#pragma annotune kernel`, one configuration at a time.

    `timeout` bounds how long one launch may take, in seconds. Inputs are made once per
    (argument, type, length) and reused for every configuration; so are their device copies,
    until `release()` or a context reset. With a `meter`, each "ok" configuration's energy per
    launch is measured too, in `energy_batches` batches (`annotune.run.kernel.energy`).

    `reference` is what outputs are checked against (None: they are not checked); `outputs`,
    after each `measure`, the configuration's outputs when it was "ok", else None: the caller
    keeps the default configuration's and makes them the `reference`.
    """

    def __init__(
        self,
        spec: KernelSpec,
        backend: KernelBackend,
        *,
        warmup: int = 1,
        sampling: Sampling | None = None,
        seed: int = 0,
        rtol: float = 1e-5,
        atol: float = 1e-8,
        timeout: float = 10.0,
        flush_l2: bool | None = None,
        monitor: GpuMonitor | None = None,
        meter: EnergyMeter | None = None,
        energy_batches: int = 3,
    ):
        if warmup < 0:
            raise ValueError("warmup must be non-negative")
        if energy_batches < 1:
            raise ValueError("at least one energy batch is needed")
        self.spec = spec
        self.backend = backend
        self.warmup = warmup
        self.sampling = sampling or Sampling()
        self.seed = seed
        self.rtol = rtol
        self.atol = atol
        self.timeout = timeout
        self.flush_l2 = flush_l2
        self.monitor = monitor  # NVML: the GPU's conditions right after the timed launches
        self.meter = meter
        self.energy_batches = energy_batches
        self.reference: KernelReference | None = None
        self.outputs: KernelReference | None = None
        self._host = HostInputs(seed)
        self._memory = DeviceMemory(backend, self._host)
        self.limits: LaunchLimits = launch_limits(backend.compute_capability())  # the device's

    def to_json(self) -> dict:
        """What changes a time, an energy or a verdict: part of the results database's study
        key (the energy settings only when energy is measured)."""
        data = {
            "mode": "kernel",
            "kernel": self.spec.declared,
            "warmup": self.warmup,
            "sampling": self.sampling.to_json(),
            "seed": self.seed,
            "rtol": self.rtol,
            "atol": self.atol,
            "flush_l2": self.flush_l2,
        }
        if self.meter is not None:
            data["energy"] = {**self.meter.to_json(), "batches": self.energy_batches}
        filled = [c for c in self.spec.constants if not c.why]
        if filled:  # what they hold changes the kernel's work (zeros before annotune filled them)
            data["constants"] = {
                c.name: c.fill.to_json() if c.fill is not None else "default" for c in filled
            }
        return data

    def measure(self, build: BuildResult, stop_above: float | None = None) -> Measurement:
        """Measure one built configuration; its failures are statuses, not exceptions.

        Its outputs are checked against `reference` when there is one, and kept in `outputs`
        when it is "ok" (None otherwise). A configuration whose fastest launch is
        slower than `stop_above` ms gets only the minimum number of timed launches. Raises
        AnnotuneError when a fault leaves the GPU unusable, since no later configuration could
        be measured either, and when the kernel writes an array the pragma declares `in`.

        `compile_info["run_seconds"]` says where the call's time went: `wall` (all of it),
        `setup` (all but the timed and energy launches), `gpu` (the timed launches' event
        times) and, with a meter, `energy` (the energy batches).
        """
        started = time.perf_counter()
        spent = Spent()
        self.outputs = None
        measurement, self.outputs = self._measure(build, stop_above, spent)
        wall = time.perf_counter() - started
        seconds = {"wall": wall, "setup": wall - spent.timed - spent.energy, "gpu": spent.gpu}
        if self.meter is not None:
            seconds["energy"] = spent.energy
        info = {**measurement.compile_info, "run_seconds": seconds}
        return replace(measurement, compile_info=info)

    def _measure(
        self, build: BuildResult, stop_above: float | None, spent: Spent
    ) -> tuple[Measurement, KernelReference | None]:
        params = build.params
        info = build_info(build)
        if build.executable is None:
            return Measurement(params, "compile_error", error=build.error, compile_info=info), None
        try:  # a launch the device cannot run is refused here, before its module is loaded
            launch = self.spec.launch(params)
            self.limits.check(launch, kernel_resources(build, self.spec))
        except LaunchError as error:
            reason = f"cannot launch: {error}"
            return Measurement(params, "runtime_error", error=reason, compile_info=info), None
        info = {**info, "launch": launch.to_json(), "backend": self.backend.name}
        try:  # a template kernel's symbol depends on the configuration (`BuildResult.symbols`)
            image = (build.executable.read_bytes(), build.symbols.get(self.spec.declared, ""))
        except OSError as error:
            reason = f"cannot read the cubin: {error.strerror}"
            return Measurement(params, "runtime_error", error=reason, compile_info=info), None
        flush = flush_bytes(self.backend, launch, self.flush_l2)
        info["l2_flush"] = flush > 0
        try:
            run = self._run(image, launch, flush, stop_above, spent)
            if run.mismatch and self._memory.changed_input(launch, ("in", "inout")) is not None:
                # An earlier configuration wrote out of bounds into the inputs kept on the
                # device: judge this one again on fresh copies.
                self.release()
                run = self._run(image, launch, flush, stop_above, spent)
        except BackendError as error:
            _recover(self.backend, error)
            status = "timeout" if isinstance(error, KernelTimeout) else "runtime_error"
            return Measurement(params, status, error=str(error)[:500], compile_info=info), None
        if run.mismatch:
            return Measurement(params, "wrong_output", error=run.mismatch, compile_info=info), None
        if self.monitor is not None:
            info["gpu"] = summarize([self.monitor.sample()])
        return _ok(params, run, info, self.meter), KernelReference(dict(params), run.outputs)

    def release(self) -> None:
        """Free the device memory kept across configurations; the next measurement uploads
        the inputs again."""
        self._memory.release()

    def _run(
        self,
        image: tuple[bytes, str],  # the cubin, and the kernel's symbol in it ("": the spec's)
        launch: Launch,
        flush: int,
        stop_above: float | None,
        spent: Spent,
    ) -> _Run:
        backend, memory = self.backend, self._memory
        memory.forget_if_reset()  # a reset took every handle with it
        kernel = backend.load(image[0], image[1] or self.spec.mangled_name)
        try:
            memory.fill_constants(kernel, launch)
            args = memory.arguments(launch)
            prepared = backend.prepare(kernel, launch.grid, launch.block, launch.shared, args)
            backend.launch(prepared)
            backend.synchronize(self.timeout)
            outputs = memory.outputs(launch)
            memory.check_inputs_kept(self.spec, launch)
            if self.reference is not None:
                mismatch = compare_outputs(outputs, self.reference, rtol=self.rtol, atol=self.atol)
                if mismatch:
                    return _Run(outputs, mismatch, ())
            for _ in range(self.warmup):
                backend.launch(prepared)
            backend.synchronize(self.timeout)
            buffer = memory.flush_buffer(flush) if flush else None
            times = timed_launches(
                backend,
                prepared,
                self.sampling,
                timeout=self.timeout,
                flush=buffer,
                stop_above=stop_above,
                spent=spent,
            )
            energy = None
            if self.meter is not None:
                began = time.perf_counter()
                median = statistics.median(times)
                batches, timeout = self.energy_batches, self.timeout
                energy = measure_energy(
                    backend, self.meter, prepared, median, batches=batches, timeout=timeout
                )
                spent.energy += time.perf_counter() - began
            return _Run(outputs, "", times, energy)
        finally:
            with contextlib.suppress(BackendError):  # after a fault: the reset frees it
                backend.unload(kernel)

    def input_array(self, index: int, arg: LaunchArg) -> np.ndarray:
        """The host's copy of the pointer argument at `index` (`HostInputs.input_array`)."""
        return self._host.input_array(index, arg)

    def constant_array(self, index: int, constant: LaunchConstant, count: int) -> np.ndarray:
        """What a `__constant__` variable is filled with (`HostInputs.constant_array`)."""
        return self._host.constant_array(index, constant, count)


def _ok(params: dict[str, Number], run: _Run, info: dict, meter: EnergyMeter | None) -> Measurement:
    """The measurement of a configuration whose outputs were right: its median time and,
    with a meter, its median energy per launch."""
    energies: tuple[float, ...] = ()
    if meter is not None and run.energy is not None:
        info["energy"] = run.energy.to_json(meter)
        energies = run.energy.samples
    return Measurement(
        params,
        "ok",
        time=statistics.median(run.times),
        times=tuple(run.times),
        compile_info=info,
        energy=statistics.median(energies) if energies else None,
        energies=energies,
    )


def _recover(backend: KernelBackend, error: BackendError) -> None:
    """Make the device usable again after `error`; AnnotuneError when it cannot be."""
    try:
        backend.recover()
    except BackendError as fatal:
        raise AnnotuneError(
            f"the GPU could not be made usable again after: {error} ({fatal})"
        ) from None
