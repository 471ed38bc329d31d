"""The pycuda backend (the optional extra `annotune[cuda]`), used first where it is installed.

Launches go through `prepare`/`prepared_call` with a struct format built from the arguments'
types: pycuda packs them with native alignment, which is how CUDA lays out kernel parameters,
so mixed sizes (`size_t n, float a, double *x`) land where the kernel reads them. The format
is set once per configuration (`prepare`); pycuda still packs the values at each call, in C.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from annotune.run.backends.base import (
    DEFAULT_SHARED_LIMIT,
    BackendError,
    BackendUnavailable,
    Dims,
    Flush,
    KernelBackend,
    wait_until,
)


def _import_pycuda():
    try:
        import pycuda.driver as cuda
    except ImportError:
        raise BackendUnavailable("pycuda is not installed (pip install 'annotune[cuda]')") from None
    return cuda


@dataclass(frozen=True)
class _Kernel:
    module: object  # pycuda frees the module when this, its last reference, goes
    function: object


@dataclass(frozen=True)
class _Launch:
    """A prepared launch: the function (its struct format set) and the values to pack."""

    function: object
    grid: Dims
    block: Dims
    shared: int
    values: tuple[object, ...]


class PycudaBackend(KernelBackend):
    """Kernel launches through pycuda, in a context of its own made current on this thread."""

    name = "pycuda"

    def __init__(self, device: int = 0, *, driver: object | None = None):
        """`driver` is the `pycuda.driver` module, imported when None; the tests pass a CPU
        stand-in to check the argument packing without a GPU."""
        cuda = driver or _import_pycuda()
        self._cuda = cuda
        try:
            cuda.init()
            count = cuda.Device.count()
        except cuda.Error as error:
            raise BackendUnavailable(f"no usable CUDA driver or GPU ({error})") from None
        if device >= count:
            raise BackendUnavailable(f"no CUDA device {device} ({count} found)")
        self._device = cuda.Device(device)
        self._open_context()

    def _open_context(self) -> None:
        self._context = self._device.make_context()
        self._stop = self._cuda.Event()
        self._last = self._stop  # the event recorded last: what `recover` asks
        self._pairs: list[tuple[object, object]] = []  # timed launches' events, made as needed
        self.generation += 1

    def _call(self, what: str, function, *args, **kwargs):
        """Run a pycuda call; its errors become BackendError."""
        try:
            return function(*args, **kwargs)
        except self._cuda.Error as error:
            raise BackendError(f"{what} failed: {error}") from None

    def device_name(self) -> str:
        return self._device.name()

    def compute_capability(self) -> tuple[int, int]:
        major, minor = self._device.compute_capability()
        return int(major), int(minor)

    def l2_cache_bytes(self) -> int:
        attribute = self._cuda.device_attribute.L2_CACHE_SIZE
        return int(self._call("reading the L2 size", self._device.get_attribute, attribute))

    def pci_bus_id(self) -> str:
        return str(self._call("reading the PCI bus id", self._device.pci_bus_id))

    def load(self, image: bytes, symbol: str) -> _Kernel:
        module = self._call("loading the cubin", self._cuda.module_from_buffer, image)
        function = self._call(f"finding kernel {symbol}", module.get_function, symbol)
        return _Kernel(module, function)

    def unload(self, kernel: object) -> None:
        """Nothing to do: pycuda unloads a module once no kernel refers to it."""

    def find_global(self, kernel: object, symbol: str) -> tuple[object, int]:
        assert isinstance(kernel, _Kernel)
        address, nbytes = self._call(
            f"finding __constant__ {symbol}",
            kernel.module.get_global,  # type: ignore[attr-defined]
            symbol,
        )
        return address, int(nbytes)

    def allocate(self, nbytes: int) -> object:
        return self._call(f"allocating {nbytes} bytes", self._cuda.mem_alloc, nbytes)

    def free(self, buffer: object) -> None:
        self._call("freeing device memory", buffer.free)  # type: ignore[attr-defined]

    def upload(self, buffer: object, array: np.ndarray) -> None:
        self._call("copying to the device", self._cuda.memcpy_htod, buffer, array)

    def download(self, buffer: object, array: np.ndarray) -> None:
        self._call("copying from the device", self._cuda.memcpy_dtoh, array, buffer)

    def fill(self, buffer: object, nbytes: int) -> None:
        self._call("clearing device memory", self._cuda.memset_d8, buffer, 0, nbytes)

    def copy(self, target: object, source: object, nbytes: int) -> None:
        self._call("copying on the device", self._cuda.memcpy_dtod_async, target, source, nbytes)

    def prepare(
        self, kernel: object, grid: Dims, block: Dims, shared: int, args: Sequence[object]
    ) -> _Launch:
        assert isinstance(kernel, _Kernel)
        function = kernel.function
        if shared > DEFAULT_SHARED_LIMIT:
            attribute = self._cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES
            self._call("raising the shared memory limit", function.set_attribute, attribute, shared)
        formats = "".join(arg.dtype.char if isinstance(arg, np.generic) else "P" for arg in args)
        values = tuple(arg if isinstance(arg, np.generic) else int(arg) for arg in args)
        self._call("preparing the launch", function.prepare, formats)
        return _Launch(function, grid, block, shared, values)

    def launch(self, prepared: object) -> None:
        assert isinstance(prepared, _Launch)
        self._call(
            "launching the kernel",
            prepared.function.prepared_call,
            prepared.grid,
            prepared.block,
            *prepared.values,
            shared_size=prepared.shared,
        )

    def timed_launches(
        self, prepared: object, count: int, flush: Flush | None, *, timeout: float
    ) -> list[float]:
        while len(self._pairs) < count:
            self._pairs.append((self._cuda.Event(), self._cuda.Event()))
        pairs = self._pairs[:count]
        for start, stop in pairs:
            if flush is not None:
                self.fill(*flush)
            self._call("recording an event", start.record)
            self.launch(prepared)
            self._call("recording an event", stop.record)
        self._last = pairs[-1][1]
        self._wait(timeout, "the kernel")
        return [float(self._call("reading the events", a.time_till, b)) for a, b in pairs]

    def synchronize(self, timeout: float) -> None:
        self._call("recording an event", self._stop.record)
        self._last = self._stop
        self._wait(timeout, "the device")

    def _wait(self, timeout: float, what: str) -> None:
        wait_until(lambda: self._call(f"waiting for {what}", self._last.query), timeout, what)

    def recover(self) -> None:
        """A new context when the last event reports a fault or is still pending (a hang)."""
        try:
            if self._last.query():
                return
        except self._cuda.Error:
            pass
        try:
            self._context.pop()
            self._context.detach()
        except self._cuda.Error:
            pass  # the poisoned context may refuse; a new one is made all the same
        self._open_context()

    def close(self) -> None:
        self._context.pop()
        self._context.detach()
