"""Kernel mode: launch the annotated kernel from each configuration's cubin and time it.

For each configuration the runner evaluates the pragma's launch (grid, block, shared memory,
argument sizes and values), loads the cubin, packs the arguments once, and launches:

1. once on fresh inputs: the outputs (`out` and `inout` arrays) are read back and checked; a
   configuration whose outputs are wrong is not timed;
2. `warmup` times, untimed;
3. between two CUDA events each, until its median is stable (`annotune.run.sampling`); the
   median is the configuration's time (ms). The launches are queued in batches and waited for
   once per batch (`_batch_size`); the stopping rule is applied to each time in launch order,
   so the times kept are those one launch at a time would give. When the kernel's arrays fit in
   the L2 cache, a buffer twice the L2's size is cleared before each timed launch (`flush_l2`,
   on by default then), so no launch is timed on the cache its predecessor warmed.

Inputs are pseudo-random and depend only on the seed, the argument's position, type and length,
so every configuration sees the same data: floating-point elements uniform in [0, 1), integers
in [0, 100), `out` arrays zero. They stay on the device from one configuration to the next (per
argument, until its element count changes): `in` arrays are uploaded once, `inout` arrays once
to a pristine copy that is copied on the device into the kernel's array before each checked
launch, and `out` arrays are zeroed there. The first configuration measured shows whether the
kernel leaves its `in` arrays alone; one that writes them is an error in the pragma. When a
configuration's outputs are wrong and the kept inputs have changed (an earlier configuration
wrote out of bounds), it is judged again on fresh copies. A context reset (after a fault) takes
the kept copies with it; they are uploaded again.

The default configuration is measured first and its outputs are the reference: an output
further from it than `atol + rtol * |reference|` (integers: any difference) makes a
configuration `wrong_output`, with the largest error in the reason. A launch the device refuses
(too many threads, too much shared memory) or a kernel that faults is a `runtime_error`; a
kernel that runs past `timeout` is a `timeout`. Failures are data: the runner returns them as
measurements, resets the device when a fault poisoned it, and goes on.

Later timed launches run on whatever earlier launches left in `inout` arrays: they are timed,
not checked.

Given an energy meter (`annotune.run.energy`), the runner measures energy after the times, in
`energy_batches` batches of its own: launches queued back to back, without the L2 flush (whose
clearing would be billed to the kernel), for at least the meter's `min_window` (NVML resolves
no less than about a second), the launch count estimated from the median time. A batch the
meter saw as too short, or over which it saw no energy, is tried again at least twice as long,
up to `ENERGY_ATTEMPTS` times; then the measurement has no energy and says why
(`compile_info["energy"]["error"]`), never 0 J. A batch's energy divided by its launches is one
sample; their median is the configuration's energy per launch, the board's idle power over the
batch included. A kernel shorter than it takes Python to queue a launch (a few µs) runs as
densely as launches can be queued, and its energy per launch includes the gaps between them.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from annotune.annotate.kernels import KernelSpec, Launch, LaunchArg, LaunchConstant, LaunchError
from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import BuildResult, Measurement, Number
from annotune.core.stats import median_interval, relative_halfwidth
from annotune.run.backends import BackendError, KernelBackend, KernelTimeout
from annotune.run.backends.base import Flush
from annotune.run.conditions import GpuMonitor, summarize
from annotune.run.energy import EnergyError, EnergyMeter, EnergyReading
from annotune.run.program import compile_info as build_info
from annotune.run.sampling import Sampling

__all__ = ["KernelReference", "KernelRunner", "compare_outputs", "fill_notes"]


INTEGER_INPUT_LIMIT = 100
"""Integer inputs are drawn from [0, INTEGER_INPUT_LIMIT): small, so that they stay valid as
sizes or (small) indices and cannot overflow a sum."""

ENERGY_ATTEMPTS = 4
"""Tries at one energy batch before the configuration is left without an energy."""

ENERGY_SHORTFALL = 0.9
"""An energy batch at least this share of the meter's window is long enough: its launch count
is planned from the median time, so about half the batches come out a little short of it."""

ENERGY_CHECK_S = 0.01
"""About how much work (s) is queued between two looks at the meter's clock in an energy batch."""

_FIRST_INTERVAL = next(n for n in itertools.count(1) if median_interval([1.0] * n) is not None)
"""The fewest samples whose median has a 95% interval: below it no time is stable yet."""


@dataclass(frozen=True)
class KernelReference:
    """One configuration's outputs (read-only arrays by argument name): what others must match."""

    params: Mapping[str, Number]
    outputs: Mapping[str, np.ndarray]


def compare_outputs(
    outputs: Mapping[str, np.ndarray], reference: KernelReference, *, rtol: float, atol: float
) -> str:
    """Why `outputs` do not match the reference, or "" when they do (NaN matches NaN)."""
    for name, expected in reference.outputs.items():
        actual = outputs[name]
        if actual.shape != expected.shape:
            return (
                f"output '{name}' has {actual.size} elements, the default configuration's "
                f"{expected.size}"
            )
        a, e = actual.astype(np.float64), expected.astype(np.float64)
        if expected.dtype.kind == "f":
            close = np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
        else:
            close = actual == expected
        if close.all():
            continue
        bad = np.flatnonzero(~close)
        errors = np.abs(a[bad] - e[bad])
        errors = np.where(np.isnan(errors), np.inf, errors)
        worst = int(bad[np.argmax(errors)])
        return (
            f"output '{name}' differs from the default configuration's at {bad.size} of "
            f"{expected.size} elements; max error {errors.max():.3g} at index {worst} "
            f"({actual[worst].item()!r}, expected {expected[worst].item()!r})"
        )
    return ""


@dataclass(frozen=True)
class _Slot:
    """A pointer argument's device memory, kept from one configuration to the next while its
    element count stays the same."""

    count: int
    work: object  # what the kernel gets
    pristine: object | None  # `inout`: the input, copied into `work` before each checked launch


@dataclass(frozen=True)
class _Run:
    """What one configuration's launches gave: its outputs, why they are wrong ("" when they
    are not checked or right) and, when right, the timed launches' times (ms)."""

    outputs: dict[str, np.ndarray]
    mismatch: str
    times: Sequence[float]
    energy: _Energy | None = None


@dataclass(frozen=True)
class _Energy:
    """One configuration's energy batches: each batch's energy per launch (J), launches and
    seconds; or, when no batch could be measured, why not."""

    samples: tuple[float, ...] = ()
    launches: tuple[int, ...] = ()
    seconds: tuple[float, ...] = ()
    error: str = ""

    def to_json(self, meter: EnergyMeter) -> dict:
        if self.error:
            return {"method": meter.method, "error": self.error}
        seconds = [round(s, 4) for s in self.seconds]
        return {"method": meter.method, "launches": list(self.launches), "seconds": seconds}


@dataclass
class _Spent:
    """Where one measurement's time went, added up as it runs (seconds)."""

    timed: float = 0.0  # wall time inside the timed batches
    gpu: float = 0.0  # the sum of their event times
    energy: float = 0.0  # wall time inside the energy batches


class KernelRunner:
    """Measures the kernel of one `#pragma annotune kernel`, one configuration at a time.

    `timeout` bounds how long one launch may take, in seconds. Inputs are made once per
    (argument, type, length) and reused for every configuration; so are their device copies,
    until `release()` or a context reset. With a `meter`, each "ok" configuration's energy per
    launch is measured too, in `energy_batches` batches (see the module docstring).

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
        self._inputs: dict[tuple[int, str, int], np.ndarray] = {}
        self._constants: dict[tuple, np.ndarray] = {}  # `constant_array`'s, by their key
        self._slots: dict[int, _Slot] = {}  # by argument position
        self._flush: Flush | None = None
        self._generation = backend.generation  # of the context the slots live in
        self._inputs_checked = False  # whether a kernel was seen to leave its `in` arrays alone

    def to_json(self) -> dict:
        """What changes a time, an energy or a verdict: part of the results database's study
        key (the energy settings only when energy is measured)."""
        data = {
            "mode": "kernel",
            "kernel": self.spec.name,
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
        spent = _Spent()
        self.outputs = None
        measurement, self.outputs = self._measure(build, self.reference, stop_above, spent)
        wall = time.perf_counter() - started
        seconds = {"wall": wall, "setup": wall - spent.timed - spent.energy, "gpu": spent.gpu}
        if self.meter is not None:
            seconds["energy"] = spent.energy
        info = {**measurement.compile_info, "run_seconds": seconds}
        return replace(measurement, compile_info=info)

    def _measure(
        self,
        build: BuildResult,
        reference: KernelReference | None,
        stop_above: float | None,
        spent: _Spent,
    ) -> tuple[Measurement, KernelReference | None]:
        params = build.params
        info = build_info(build)
        if build.executable is None:
            return Measurement(params, "compile_error", error=build.error, compile_info=info), None
        try:
            launch = self.spec.launch(params)
        except LaunchError as error:
            return Measurement(params, "runtime_error", error=str(error), compile_info=info), None
        info = {**info, "launch": launch.to_json(), "backend": self.backend.name}
        try:  # a template kernel's symbol depends on the configuration (`BuildResult.symbols`)
            image = (build.executable.read_bytes(), build.symbols.get(self.spec.name, ""))
        except OSError as error:
            reason = f"cannot read the cubin: {error.strerror}"
            return Measurement(params, "runtime_error", error=reason, compile_info=info), None
        flush = self._flush_bytes(launch)
        info["l2_flush"] = flush > 0
        try:
            run = self._run(image, launch, flush, reference, stop_above, spent)
            if run.mismatch and self._changed_input(launch, ("in", "inout")) is not None:
                # An earlier configuration wrote out of bounds into the inputs kept on the
                # device: judge this one again on fresh copies.
                self.release()
                run = self._run(image, launch, flush, reference, stop_above, spent)
        except BackendError as error:
            self._recover(error)
            status = "timeout" if isinstance(error, KernelTimeout) else "runtime_error"
            return Measurement(params, status, error=str(error)[:500], compile_info=info), None
        if run.mismatch:
            return Measurement(params, "wrong_output", error=run.mismatch, compile_info=info), None
        if self.monitor is not None:
            info["gpu"] = summarize([self.monitor.sample()])
        times = run.times
        energies: tuple[float, ...] = ()
        if self.meter is not None and run.energy is not None:
            info["energy"] = run.energy.to_json(self.meter)
            energies = run.energy.samples
        measurement = Measurement(
            params,
            "ok",
            time=statistics.median(times),
            times=tuple(times),
            compile_info=info,
            energy=statistics.median(energies) if energies else None,
            energies=energies,
        )
        return measurement, KernelReference(dict(params), run.outputs)

    def release(self) -> None:
        """Free the device memory kept across configurations; the next measurement uploads
        the inputs again."""
        held = [b for slot in self._slots.values() for b in (slot.work, slot.pristine)]
        if self._flush is not None:
            held.append(self._flush[0])
        self._slots.clear()
        self._flush = None
        _free(self.backend, held)

    def _recover(self, error: BackendError) -> None:
        try:
            self.backend.recover()
        except BackendError as fatal:
            raise AnnotuneError(
                f"the GPU could not be made usable again after: {error} ({fatal})"
            ) from None

    def _flush_bytes(self, launch: Launch) -> int:
        """How much to clear before each timed launch: twice the L2 size, or 0 for no flush."""
        l2 = self.backend.l2_cache_bytes()
        if self.flush_l2 is None:
            wanted = sum(arg.nbytes for arg in launch.args if arg.is_pointer) <= l2
        else:
            wanted = self.flush_l2
        return 2 * l2 if wanted and l2 > 0 else 0

    def _run(
        self,
        image: tuple[bytes, str],  # the cubin, and the kernel's symbol in it ("": the spec's)
        launch: Launch,
        flush: int,
        reference: KernelReference | None,
        stop_above: float | None,
        spent: _Spent,
    ) -> _Run:
        backend = self.backend
        if backend.generation != self._generation:  # a reset took every handle with it
            self._slots.clear()
            self._flush = None
            self._generation = backend.generation
        kernel = backend.load(image[0], image[1] or self.spec.mangled_name)
        try:
            self._fill_constants(kernel, launch)
            args: list[object] = []
            for index, arg in enumerate(launch.args):
                if not arg.is_pointer:
                    args.append(_scalar(arg))
                    continue
                slot = self._slot(index, arg)
                if arg.count and arg.kind == "inout":
                    backend.copy(slot.work, slot.pristine, arg.nbytes)
                elif arg.count and arg.kind == "out":
                    backend.fill(slot.work, arg.nbytes)
                args.append(slot.work)
            prepared = backend.prepare(kernel, launch.grid, launch.block, launch.shared, args)
            backend.launch(prepared)
            backend.synchronize(self.timeout)
            outputs = {}
            for index, arg in enumerate(launch.args):
                if arg.kind in ("out", "inout"):
                    host = np.empty(arg.count, arg.dtype)
                    if arg.count:
                        backend.download(self._slots[index].work, host)
                    host.flags.writeable = False
                    outputs[arg.name] = host
            if not self._inputs_checked:
                self._check_inputs_kept(launch)
            if reference is not None:
                mismatch = compare_outputs(outputs, reference, rtol=self.rtol, atol=self.atol)
                if mismatch:
                    return _Run(outputs, mismatch, ())
            for _ in range(self.warmup):
                backend.launch(prepared)
            backend.synchronize(self.timeout)
            if flush and self._flush is None:
                self._flush = (backend.allocate(flush), flush)
            times = self._time(prepared, self._flush if flush else None, stop_above, spent)
            energy = None
            if self.meter is not None:
                began = time.perf_counter()
                energy = self._energy(self.meter, prepared, statistics.median(times))
                spent.energy += time.perf_counter() - began
            return _Run(outputs, "", times, energy)
        finally:
            with contextlib.suppress(BackendError):  # after a fault: the reset frees it
                backend.unload(kernel)

    def input_array(self, index: int, arg: LaunchArg) -> np.ndarray:
        """The host's copy of the pointer argument at `index`: zeros for `out` (what the device
        sets it to), else the seeded input (read-only, the same for every configuration)."""
        if arg.kind == "out":
            return np.zeros(arg.count, arg.dtype)
        key = (index, arg.dtype, arg.count, arg.fill)
        if key not in self._inputs:
            data = input_data(arg, np.random.default_rng([self.seed, index]))
            data.flags.writeable = False
            self._inputs[key] = data
        return self._inputs[key]

    def constant_array(self, index: int, constant: LaunchConstant, count: int) -> np.ndarray:
        """What the `__constant__` variable at `index` of the spec's `constants` is filled with,
        `count` elements (as many as the cubin holds): by its rule, else as an `in` array is
        (read-only, the same for every configuration of that size)."""
        key = (index, constant.dtype, count, constant.fill)
        if key not in self._constants:
            as_input = LaunchArg(constant.name, "in", constant.dtype, count, fill=constant.fill)
            data = input_data(as_input, np.random.default_rng([self.seed, index, 1]))
            data.flags.writeable = False
            self._constants[key] = data
        return self._constants[key]

    def _fill_constants(self, kernel: object, launch: Launch) -> None:
        """Set the `__constant__` variables the host would, in the module just loaded (each
        load starts from the cubin's image), before its first launch."""
        for index, constant in enumerate(launch.constants):
            address, nbytes = self.backend.find_global(kernel, constant.symbol)
            data = self.constant_array(index, constant, nbytes // np.dtype(constant.dtype).itemsize)
            if data.size:
                self.backend.upload(address, data)

    def _slot(self, index: int, arg: LaunchArg) -> _Slot:
        """The device memory of the pointer argument at `index`, its input uploaded: kept from
        an earlier configuration when the element count is the same, else made anew (and the
        old freed, so memory does not grow with the sizes a space tries)."""
        slot = self._slots.get(index)
        if slot is not None and slot.count == arg.count:
            return slot
        if slot is not None:
            del self._slots[index]
            _free(self.backend, [slot.work, slot.pristine])
        taken: list[object] = []
        try:
            taken.append(self.backend.allocate(max(arg.nbytes, 1)))
            if arg.kind == "inout":
                taken.append(self.backend.allocate(max(arg.nbytes, 1)))
            if arg.kind != "out" and arg.count:
                self.backend.upload(taken[-1], self.input_array(index, arg))
        except BackendError:
            _free(self.backend, taken)
            raise
        slot = _Slot(arg.count, taken[0], taken[1] if arg.kind == "inout" else None)
        self._slots[index] = slot
        return slot

    def _changed_input(self, launch: Launch, kinds: tuple[str, ...]) -> int | None:
        """The position of the first argument of `kinds` whose input on the device (for
        `inout`, the pristine copy) is no longer the host's, or None."""
        for index, arg in enumerate(launch.args):
            if arg.kind not in kinds or not arg.count:
                continue
            slot = self._slots[index]
            kept = np.empty(arg.count, arg.dtype)
            self.backend.download(slot.pristine if arg.kind == "inout" else slot.work, kept)
            if kept.tobytes() != self.input_array(index, arg).tobytes():
                return index
        return None

    def _check_inputs_kept(self, launch: Launch) -> None:
        """Once, after the first checked launch: the `in` arrays stay on the device for every
        later configuration, so a kernel that writes one would change all their inputs."""
        index = self._changed_input(launch, ("in",))
        if index is None:
            self._inputs_checked = True
            return
        self.release()
        name = launch.args[index].name
        raise AnnotuneError(
            f"kernel '{self.spec.name}' writes '{name}', which the pragma declares in(...): "
            f"every configuration would then start from what the last one left; declare it "
            f"inout(...)",
            self.spec.args[index].location,
        )

    def _time(
        self, prepared: object, flush: Flush | None, stop_above: float | None, spent: _Spent
    ) -> list[float]:
        """Timed launches in batches until `Sampling.enough`, applied to each time in launch
        order, so the times kept are those that one launch at a time would have given."""
        times: list[float] = []
        seconds = 0.0
        while True:
            count = _batch_size(self.sampling, times, seconds)
            began = time.perf_counter()
            wait = self.timeout * count  # each launch may take `timeout`, as the checked one
            batch = self.backend.timed_launches(prepared, count, flush, timeout=wait)
            took = time.perf_counter() - began
            spent.timed += took
            spent.gpu += sum(batch) / 1e3
            for done, elapsed in enumerate(batch, 1):
                times.append(elapsed)
                if self.sampling.enough(times, seconds + took * done / len(batch), stop_above):
                    return times
            seconds += took

    def _energy(self, meter: EnergyMeter, prepared: object, median_ms: float) -> _Energy:
        """`energy_batches` batches of back-to-back launches, each at least the meter's
        `min_window` long (a batch too short, or with no energy seen, is tried again longer)."""
        per_launch = max(median_ms / 1e3, 1e-7)
        samples, launches, seconds = [], [], []
        for _ in range(self.energy_batches):
            window = meter.min_window
            for _attempt in range(ENERGY_ATTEMPTS):
                try:
                    count, reading = self._energy_batch(meter, prepared, window, per_launch)
                except EnergyError as error:
                    return _Energy(error=str(error))
                if reading.joules > 0 and reading.seconds >= ENERGY_SHORTFALL * meter.min_window:
                    break
                window *= max(2.0, meter.min_window / max(reading.seconds, 1e-9))
            else:
                return _Energy(error=_unmeasured(meter, reading))
            samples.append(reading.joules / count)
            launches.append(count)
            seconds.append(reading.seconds)
        return _Energy(tuple(samples), tuple(launches), tuple(seconds))

    def _energy_batch(
        self, meter: EnergyMeter, prepared: object, window: float, per_launch: float
    ) -> tuple[int, EnergyReading]:
        """Launches queued back to back until about `window` seconds of them are queued (by
        the median time) or the meter's clock says `window` has passed (launching is then
        slower than the kernel); how many, and the meter's reading over them and the wait."""
        target = max(1, math.ceil(window / per_launch))
        chunk = max(1, math.ceil(ENERGY_CHECK_S / per_launch))
        count = 0
        meter.start()
        try:
            while count < target and (count == 0 or meter.elapsed() < window):
                queued = min(chunk, target - count)
                for _ in range(queued):
                    self.backend.launch(prepared)
                count += queued
            self.backend.synchronize(self.timeout + 4 * count * per_launch)
        except BaseException:
            with contextlib.suppress(EnergyError):
                meter.stop()
            raise
        return count, meter.stop()


def fill_notes(spec: KernelSpec) -> tuple[str, ...]:
    """What a user should know once about the kernel's `__constant__` variables: those filled
    by the default rule, and those left as the cubin holds them (zeros), with why."""
    notes = []
    default = [c for c in spec.constants if c.fill is None and not c.why]
    if default:
        listed = ", ".join(f"{c.name} ({c.ctype})" for c in default)
        notes.append(
            f"kernel mode fills the __constant__ variables the host would set (cudaMemcpyToSymbol) "
            f"as it fills in(...) arrays, floats uniform in [0, 1) and integers in "
            f"[0, {INTEGER_INPUT_LIMIT}): {listed}; where that does not fit, give a rule: "
            "constants(NAME = RULE) in the kernel's declaration"
        )
    for constant in spec.constants:
        if constant.why:
            where = constant.location
            notes.append(
                f"__constant__ {constant.name} ({constant.ctype}, {where.file}:{where.line}) "
                f"keeps the cubin's zeros in kernel mode: {constant.why}"
            )
    return tuple(notes)


def _unmeasured(meter: EnergyMeter, reading: EnergyReading) -> str:
    """Why an energy batch was given up on, after its last try."""
    if reading.joules <= 0:
        return (
            f"{meter.description} saw no energy in {ENERGY_ATTEMPTS} ever longer batches, the "
            f"last {reading.seconds:.3g} s long"
        )
    return (
        f"{meter.description} needs batches of {meter.min_window:g} s; after "
        f"{ENERGY_ATTEMPTS} tries the last was {reading.seconds:.3g} s"
    )


def _scalar(arg: LaunchArg) -> np.generic:
    """The value as the parameter's C type, converted as C would (truncation, wrap-around)."""
    with np.errstate(all="ignore"):
        return np.array(arg.value).astype(arg.dtype)[()]


def _free(backend: KernelBackend, buffers: Sequence[object | None]) -> None:
    """Free buffers no longer used; after a fault these calls may fail, which changes nothing:
    the context reset frees them."""
    for buffer in buffers:
        if buffer is not None:
            with contextlib.suppress(BackendError):
                backend.free(buffer)


def _batch_size(sampling: Sampling, times: Sequence[float], seconds: float) -> int:
    """How many timed launches to queue next: `min_runs` first; then about what the median
    interval, narrowing as 1/sqrt(n), says is still needed, at most as many as so far (the
    rule may stop sooner than guessed), never past `max_runs` or, at the pace so far,
    `max_seconds`."""
    n = len(times)
    if n < sampling.min_runs:
        return sampling.min_runs - n
    cap = min(sampling.max_runs - n, n)
    if seconds > 0:
        cap = min(cap, max(1, int((sampling.max_seconds - seconds) / (seconds / n))))
    if n < _FIRST_INTERVAL:
        wanted = _FIRST_INTERVAL - n
    else:
        width = relative_halfwidth(times)
        wanted = math.ceil(n * (width / sampling.within) ** 2) - n if width < math.inf else cap
    return max(1, min(cap, wanted))


def input_data(arg: LaunchArg, rng: np.random.Generator) -> np.ndarray:
    """An input array's elements: by its fill rule (`annotate.grammar.FILLS`, bounds checked
    when the launch was computed), else floats uniform in [0, 1), booleans 0 or 1 and other
    integers in [0, INTEGER_INPUT_LIMIT)."""
    dtype = np.dtype(arg.dtype)
    rule, bounds = arg.fill if arg.fill is not None else ("", ())
    if rule == "iota":
        data = np.arange(arg.count)
    elif rule == "value":
        data = np.full(arg.count, bounds[0])
    elif rule == "range" or (rule == "uniform" and dtype.kind != "f"):
        data = rng.integers(int(bounds[0]), int(bounds[1]), arg.count)
    elif rule == "uniform":
        data = rng.uniform(float(bounds[0]), float(bounds[1]), arg.count)
    elif dtype.kind == "f":
        data = rng.random(arg.count)
    elif dtype.kind == "b":
        data = rng.integers(0, 2, arg.count)
    else:
        data = rng.integers(0, INTEGER_INPUT_LIMIT, arg.count)
    return data.astype(dtype)
