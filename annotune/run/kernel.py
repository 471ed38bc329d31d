"""Kernel mode: launch the annotated kernel from each configuration's cubin and time it.

For each configuration the runner evaluates the pragma's launch (grid, block, shared memory,
argument sizes and values), loads the cubin, copies the inputs, and launches:

1. once on fresh inputs: the outputs (`out` and `inout` arrays) are read back and checked;
2. `warmup` times, untimed;
3. between two CUDA events each, until its median is stable (`annotune.run.sampling`); the
   median is the configuration's time (ms). When the kernel's arrays fit in the L2 cache, a
   buffer twice the L2's size is cleared before each timed launch (`flush_l2`, on by default
   then), so no launch is timed on the cache its predecessor warmed.

Inputs are pseudo-random and depend only on the seed, the argument's position, type and length,
so every configuration sees the same data: floating-point elements uniform in [0, 1), integers
in [0, 100), `out` arrays zero. The default configuration is measured first and its outputs are
the reference: an output further from it than `atol + rtol * |reference|` (integers: any
difference) makes a configuration `wrong_output`, with the largest error in the reason. A launch
the device refuses (too many threads, too much shared memory) or a kernel that faults is a
`runtime_error`; a kernel that runs past `timeout` is a `timeout`. Failures are data: the
runner returns them as measurements, resets the device when a fault poisoned it, and goes on.

Later timed launches run on whatever earlier launches left in `inout` arrays: they are timed,
not checked.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from annotune.annotate.kernel import KernelSpec, Launch, LaunchArg, LaunchError
from annotune.core.diagnostics import AnnotuneError
from annotune.core.records import BuildResult, Measurement, Number
from annotune.run.backends import BackendError, KernelBackend, KernelTimeout
from annotune.run.conditions import GpuMonitor, summarize
from annotune.run.program import compile_info as build_info
from annotune.run.sampling import Sampling

__all__ = ["KernelReference", "KernelRunner", "compare_outputs"]


INTEGER_INPUT_LIMIT = 100
"""Integer inputs are drawn from [0, INTEGER_INPUT_LIMIT): small, so that they stay valid as
sizes or (small) indices and cannot overflow a sum."""


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


class KernelRunner:
    """Measures the kernel of one `#pragma annotune kernel`, one configuration at a time.

    `timeout` bounds each wait for the device, in seconds. Inputs are made once per
    (argument, type, length) and reused for every configuration.
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
    ):
        if warmup < 0:
            raise ValueError("warmup must be non-negative")
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
        self._inputs: dict[tuple[int, str, int], np.ndarray] = {}

    def to_json(self) -> dict:
        """What changes a time or a verdict: part of the results database's study key."""
        return {
            "mode": "kernel",
            "kernel": self.spec.name,
            "warmup": self.warmup,
            "sampling": self.sampling.to_json(),
            "seed": self.seed,
            "rtol": self.rtol,
            "atol": self.atol,
            "flush_l2": self.flush_l2,
        }

    def measure(
        self,
        build: BuildResult,
        reference: KernelReference | None = None,
        stop_above: float | None = None,
    ) -> tuple[Measurement, KernelReference | None]:
        """Measure one built configuration; its failures are statuses, not exceptions.

        Returns the measurement and, when it is "ok", this configuration's outputs: the caller
        keeps those of the default configuration and passes them as `reference` from then on.
        Without a reference, outputs are not checked. A configuration whose fastest launch is
        slower than `stop_above` ms gets only the minimum number of timed launches. Raises
        AnnotuneError only when a fault leaves the GPU unusable, since no later configuration
        could be measured either.
        """
        params = build.params
        info = build_info(build)
        if build.executable is None:
            return Measurement(params, "compile_error", error=build.error, compile_info=info), None
        try:
            launch = self.spec.launch(params)
        except LaunchError as error:
            return Measurement(params, "runtime_error", error=str(error), compile_info=info), None
        info = {**info, "launch": launch.to_json(), "backend": self.backend.name}
        try:
            image = build.executable.read_bytes()
        except OSError as error:
            reason = f"cannot read the cubin: {error.strerror}"
            return Measurement(params, "runtime_error", error=reason, compile_info=info), None
        flush = self._flush_bytes(launch)
        info["l2_flush"] = flush > 0
        try:
            outputs, times = self._run(image, launch, flush, stop_above)
        except BackendError as error:
            self._recover(error)
            status = "timeout" if isinstance(error, KernelTimeout) else "runtime_error"
            return Measurement(params, status, error=str(error)[:500], compile_info=info), None
        if reference is not None:
            mismatch = compare_outputs(outputs, reference, rtol=self.rtol, atol=self.atol)
            if mismatch:
                return Measurement(params, "wrong_output", error=mismatch, compile_info=info), None
        if self.monitor is not None:
            info["gpu"] = summarize([self.monitor.sample()])
        measurement = Measurement(
            params, "ok", time=statistics.median(times), times=tuple(times), compile_info=info
        )
        return measurement, KernelReference(dict(params), outputs)

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
        self, image: bytes, launch: Launch, flush: int, stop_above: float | None
    ) -> tuple[dict[str, np.ndarray], list[float]]:
        backend = self.backend
        kernel = backend.load(image, self.spec.mangled_name)
        buffers: list[tuple[LaunchArg, object]] = []
        scratch: list[object] = []
        try:
            args: list[object] = []
            for index, arg in enumerate(launch.args):
                if not arg.is_pointer:
                    args.append(_scalar(arg))
                    continue
                buffer = backend.allocate(max(arg.nbytes, 1))
                buffers.append((arg, buffer))
                if arg.count:
                    backend.upload(buffer, self.input_array(index, arg))
                args.append(buffer)
            shape = (launch.grid, launch.block, launch.shared, args)
            backend.launch(kernel, *shape)
            backend.synchronize(self.timeout)
            outputs = {}
            for arg, buffer in buffers:
                if arg.kind in ("out", "inout"):
                    host = np.empty(arg.count, arg.dtype)
                    if arg.count:
                        backend.download(buffer, host)
                    host.flags.writeable = False
                    outputs[arg.name] = host
            for _ in range(self.warmup):
                backend.launch(kernel, *shape)
            backend.synchronize(self.timeout)
            if flush:
                scratch.append(backend.allocate(flush))
            times: list[float] = []
            started = time.perf_counter()
            while True:
                if flush:
                    backend.fill(scratch[0], flush)
                times.append(backend.timed_launch(kernel, *shape, timeout=self.timeout))
                if self.sampling.enough(times, time.perf_counter() - started, stop_above):
                    return outputs, times
        finally:
            _release(backend, kernel, [buffer for _, buffer in buffers] + scratch)

    def input_array(self, index: int, arg: LaunchArg) -> np.ndarray:
        """What is uploaded for the pointer argument at `index`: zeros for `out`, else the
        seeded input (read-only, the same for every configuration)."""
        if arg.kind == "out":
            return np.zeros(arg.count, arg.dtype)
        key = (index, arg.dtype, arg.count)
        if key not in self._inputs:
            rng = np.random.default_rng([self.seed, index])
            dtype = np.dtype(arg.dtype)
            if dtype.kind == "f":
                data = rng.random(arg.count).astype(dtype)
            elif dtype.kind == "b":
                data = rng.integers(0, 2, arg.count).astype(dtype)
            else:
                data = rng.integers(0, INTEGER_INPUT_LIMIT, arg.count).astype(dtype)
            data.flags.writeable = False
            self._inputs[key] = data
        return self._inputs[key]


def _scalar(arg: LaunchArg) -> np.generic:
    """The value as the parameter's C type, converted as C would (truncation, wrap-around)."""
    with np.errstate(all="ignore"):
        return np.array(arg.value).astype(arg.dtype)[()]


def _release(backend: KernelBackend, kernel: object, buffers: Sequence[object]) -> None:
    """Free what one measurement took; after a fault these calls may fail, which changes nothing:
    the runner resets the context next."""
    for release, handle in [*((backend.free, b) for b in buffers), (backend.unload, kernel)]:
        with contextlib.suppress(BackendError):
            release(handle)
